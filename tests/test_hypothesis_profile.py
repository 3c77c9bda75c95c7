"""tests/conftest.py's hypothesis profiles: the default one (the README's test command) caps every test at
DEFAULT_MAX_EXAMPLES examples, its own @settings included, and draws the same ones on every run; "full"
keeps each test's own count. Checked on a probe test file run with a copy of the conftest."""

import json
import os
import re
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

PROBE = """
import json, os
from hypothesis import given, settings, strategies as st

OUT = os.environ["PROBE_OUT"]


def _record(kind, n):
    with open(OUT, "a") as f:
        f.write(json.dumps([kind, n]) + "\\n")


class TestMethod:
    @settings(max_examples=50, deadline=None)
    @given(st.integers())
    def test_method(self, n):
        _record("method", n)


@settings(max_examples=50)
@given(st.integers(0, 10**9))
def test_function(n):
    _record("function", n)
"""


def _draws(tmp_path, run, **env):
    folder = tmp_path / run
    folder.mkdir()
    shutil.copy(os.path.join(ROOT, "tests", "conftest.py"), folder / "conftest.py")
    (folder / "test_probe.py").write_text(PROBE)
    out = folder / "draws.jsonl"
    full_env = {k: v for k, v in os.environ.items() if k != "HYPOTHESIS_PROFILE"}
    full_env |= {"PROBE_OUT": str(out), **env}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_probe.py"],
        cwd=folder,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    draws = {"method": [], "function": []}
    for line in out.read_text().splitlines():
        kind, n = json.loads(line)
        draws[kind].append(n)
    return draws


def test_default_profile_caps_and_repeats_the_examples(tmp_path):
    cap = int(
        re.search(r"^DEFAULT_MAX_EXAMPLES = (\d+)$", open(os.path.join(ROOT, "tests", "conftest.py")).read(), re.M)[1]
    )
    first, second = _draws(tmp_path, "a"), _draws(tmp_path, "b")
    for kind in ("method", "function"):
        assert 1 <= len(first[kind]) <= cap, first
    assert first == second
    full = _draws(tmp_path, "c", HYPOTHESIS_PROFILE="full")
    assert all(len(full[kind]) > cap for kind in full), full


def test_the_readme_states_the_profile():
    readme = open(os.path.join(ROOT, "README.md")).read()
    conftest = open(os.path.join(ROOT, "tests", "conftest.py")).read()
    n = re.search(r"at most (\d+) a test", readme)[1]
    assert f"\nDEFAULT_MAX_EXAMPLES = {n}\n" in conftest
    assert "HYPOTHESIS_PROFILE=full" in readme and 'register_profile("full"' in conftest
    assert "FRAMEWORK_TEST_TIMES" in readme and "FRAMEWORK_TEST_TIMES" in conftest
