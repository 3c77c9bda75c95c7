"""A Crash op (it aborts the process) in a net read from a file is refused by the CLI, also when it
hides in a nested net, unless FRAMEWORK_ALLOW_CRASH_OP=1 asks for it."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOP = 'name: "n" op { type: "Crash" }'
NESTED = 'name: "n" op { input: "c" type: "If" arg { name: "then_net" n { name: "inner" op { type: "Crash" } } } }'


def _cli(*args, cwd, **env):
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", PYTHONPATH=ROOT, **env)
    return subprocess.run(
        [sys.executable, "-m", "framework", *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=300
    )


@pytest.mark.parametrize("text,where", [(TOP, 'net "n" op #0'), (NESTED, "then_net")])
def test_crash_op_refused(tmp_path, text, where):
    (tmp_path / "net.pbtxt").write_text(text)
    r = _cli("run", "net.pbtxt", cwd=tmp_path)
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert "Crash" in r.stderr and where in r.stderr and "net.pbtxt" in r.stderr


def test_crash_op_allowed_when_asked(tmp_path):
    (tmp_path / "net.pbtxt").write_text(TOP)
    r = _cli("run", "net.pbtxt", cwd=tmp_path, FRAMEWORK_ALLOW_CRASH_OP="1")
    assert r.returncode not in (0, 2)  # it did crash, as asked
