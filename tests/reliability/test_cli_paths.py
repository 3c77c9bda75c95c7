"""The CLI confines a net read from disk to --root (default: the current folder) unless
--allow-write DIR says otherwise, and never prints a traceback without --debug."""

from __future__ import annotations

import os
import subprocess

import numpy as np

import framework.cli.common as common
from framework.cli import main
from tests.cli.inprocess import run_cli

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SAVE_NET = """
name: "saver"
op {{ input: "x" output: "y" type: "Relu" }}
op {{ input: "y" type: "Save" arg {{ name: "db" s: "{db}" }} arg {{ name: "db_type" s: "minidb" }}
     arg {{ name: "absolute_path" i: {absolute} }} }}
external_input: "x"
"""


def _cli(*args: str, cwd: str) -> subprocess.CompletedProcess:
    return run_cli(*args, cwd=cwd)  # in-process (tests/cli/inprocess.py)


def _setup(tmp_path, db: str, absolute: int):
    work = tmp_path / "work"
    work.mkdir()
    (work / "net.pbtxt").write_text(SAVE_NET.format(db=db, absolute=absolute))
    np.save(work / "x.npy", np.ones((2, 2), np.float32))
    return work


def test_a_net_file_cannot_write_outside_the_current_folder(tmp_path):
    work = _setup(tmp_path, "../escaped.minidb", 0)
    proc = _cli("run", "net.pbtxt", "--input", "x=x.npy", cwd=str(work))
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("error: ") and "Traceback" not in proc.stderr
    assert "Save" in proc.stderr and "'db'" in proc.stderr and "../escaped.minidb" in proc.stderr
    assert "--allow-write" in proc.stderr
    assert sorted(os.listdir(tmp_path)) == ["work"]


def test_absolute_paths_need_allow_write(tmp_path, monkeypatch, capsys):
    target = tmp_path / "out" / "ok.minidb"
    target.parent.mkdir()
    work = _setup(tmp_path, str(target), 1)
    monkeypatch.chdir(work)
    try:
        assert main(["run", "net.pbtxt", "--input", "x=x.npy"]) == 2
        assert "not allowed" in capsys.readouterr().err
        assert not target.exists()
        assert main(["--allow-write", str(target.parent), "run", "net.pbtxt", "--input", "x=x.npy"]) == 0
        assert target.exists()
    finally:
        common.set_write_policy(None, ())


def test_root_moves_the_confinement(tmp_path, monkeypatch):
    work = _setup(tmp_path, "inside.minidb", 0)
    other = tmp_path / "other"
    other.mkdir()
    monkeypatch.chdir(work)
    try:
        assert main(["--root", str(other), "run", "net.pbtxt", "--input", "x=x.npy"]) == 0
    finally:
        common.set_write_policy(None, ())
    assert (other / "inside.minidb").exists() and not (work / "inside.minidb").exists()


def test_internal_errors_print_no_traceback_without_debug(tmp_path, monkeypatch, capsys):
    work = _setup(tmp_path, "x.minidb", 0)

    def broken(*a, **k):
        raise ZeroDivisionError("simulated bug")

    monkeypatch.setattr(common, "new_workspace", broken)
    code = main(["run", str(work / "net.pbtxt"), "--input", f"x={work / 'x.npy'}"])
    err = capsys.readouterr().err
    assert code == 1
    assert "Traceback" not in err and "internal error" in err and "ZeroDivisionError: simulated bug" in err
    assert "--debug" in err
    code = main(["--debug", "run", str(work / "net.pbtxt"), "--input", f"x={work / 'x.npy'}"])
    assert code == 1 and "Traceback" in capsys.readouterr().err
