"""The README's promises: two Quick start commands, one of them what CI runs; examples that work."""

import os
import re
import subprocess
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _read(path):
    with open(os.path.join(ROOT, path)) as f:
        return f.read()


def _quick_start_commands():
    readme = _read("README.md")
    section = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```\n(.*?)\n```", section, flags=re.S)


def test_quick_start_has_exactly_two_commands():
    cmds = _quick_start_commands()
    assert len(cmds) == 2, cmds
    assert all("\n" not in c for c in cmds)
    assert "framework train" in cmds[0] and "framework predict" in cmds[0]


def test_ci_runs_the_readme_test_command():
    assert _quick_start_commands()[1] in _read(".ci/run")


def test_the_python_example_is_the_shipped_script_and_runs():
    readme = _read("README.md")
    code = readme.split("## From Python", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    assert code == _read("examples/python_api.py")
    proc = subprocess.run([sys.executable, "examples/python_api.py"], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    rows = np.array([[float(v) for v in line.strip(" []").split()] for line in proc.stdout.strip().splitlines()])
    assert rows.shape == (2, 3)
    np.testing.assert_allclose(rows.sum(axis=1), 1.0, rtol=1e-4)


def test_the_pbtxt_example_is_the_shipped_file():
    readme = _read("README.md")
    block = readme.split("```pbtxt\n", 1)[1].split("```", 1)[0]
    assert block == _read("examples/tiny_net.pbtxt")
