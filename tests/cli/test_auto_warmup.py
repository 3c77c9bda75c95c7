"""The first ``framework`` command starts ``framework warmup`` in the background (framework/cli/warmup.py):
once per machine key, without waiting, into the user cache folder, also from a read-only install."""

from __future__ import annotations

import importlib
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from framework import cli
from framework.cli import warmup

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class _Spawns:
    """Stands in for subprocess.Popen in warmup: records each start instead of compiling."""

    def __init__(self):
        self.calls = []

    def __call__(self, argv, **kwargs):
        self.calls.append((argv, kwargs))
        return type("Child", (), {"pid": 4242})()


@pytest.fixture
def spawns(tmp_path, monkeypatch):
    pytest.importorskip("numba")
    monkeypatch.setenv("FRAMEWORK_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("FRAMEWORK_NO_AUTO_WARMUP", raising=False)
    monkeypatch.delenv("FRAMEWORK_NO_JIT", raising=False)
    rec = _Spawns()
    monkeypatch.setattr(warmup.subprocess, "Popen", rec)
    return rec


def test_first_command_starts_one_detached_warmup_and_does_not_wait(spawns, capsys):
    assert cli.main(["ops", "Relu"]) == 0
    assert len(spawns.calls) == 1
    argv, kw = spawns.calls[0]
    assert argv == [sys.executable, "-m", "framework", "warmup", "--background"]
    assert kw["start_new_session"] and kw["stdin"] == subprocess.DEVNULL
    assert kw["env"]["PYTHONPATH"].split(os.pathsep)[0] == ROOT  # the child imports this same package
    err = capsys.readouterr().err
    assert "compiling the kernels in the background" in err and str(warmup.done_path().with_suffix(".log")) in err
    assert warmup.done_path().with_suffix(".running").read_text().strip() == "4242"
    assert cli.main(["ops", "Relu"]) == 0  # one is running: no second
    assert len(spawns.calls) == 1


def test_no_warmup_when_done_disabled_or_compiling_anyway(spawns, monkeypatch):
    for command in ("warmup", "tune"):
        assert not warmup.start_in_background(command)
    monkeypatch.setenv("FRAMEWORK_NO_AUTO_WARMUP", "1")
    assert not warmup.start_in_background("run")
    monkeypatch.delenv("FRAMEWORK_NO_AUTO_WARMUP")
    monkeypatch.setenv("FRAMEWORK_NO_JIT", "1")
    assert not warmup.start_in_background("run")
    monkeypatch.delenv("FRAMEWORK_NO_JIT")
    done = warmup.done_path()
    done.parent.mkdir(parents=True)
    done.write_text("x")
    assert not warmup.start_in_background("run")
    assert spawns.calls == []
    done.unlink()
    assert warmup.start_in_background("run") and len(spawns.calls) == 1


def test_a_stale_lock_is_replaced(spawns):
    lock = warmup.done_path().with_suffix(".running")
    lock.parent.mkdir(parents=True)
    lock.write_text("1\n")
    assert not warmup.start_in_background("run")
    old = time.time() - 2 * 3600
    os.utime(lock, (old, old))
    assert warmup.start_in_background("run") and len(spawns.calls) == 1


def test_an_unwritable_cache_folder_is_no_error(spawns, tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("FRAMEWORK_CACHE_DIR", str(blocker / "cache"))
    assert not warmup.start_in_background("run") and spawns.calls == []


def test_the_background_warmup_records_it_is_done_and_frees_the_lock(spawns, monkeypatch, capsys):
    from framework.kernels import window_jit

    ran = []
    monkeypatch.setattr(window_jit, "warm_up", lambda: ran.append(1) or 0.0)
    monkeypatch.setattr(warmup, "_lower_priority", lambda: ran.append("nice"))
    monkeypatch.setattr(warmup, "warm_others", lambda: ran.append(2) or [])
    assert warmup.start_in_background("run")
    assert cli.main(["warmup", "--background"]) == 0
    assert ran == ["nice", 1, 2]
    assert warmup.done_path().exists() and not warmup.done_path().with_suffix(".running").exists()
    assert "kernels ready" in capsys.readouterr().out
    assert not warmup.start_in_background("run") and len(spawns.calls) == 1


def test_the_listing_names_every_strategy_and_every_other_family(monkeypatch, capsys):
    """`framework warmup` compiles the families outside the strategies too (catalog.OTHERS: recurrent,
    activation, int8) and lists each with its state, beside every conv and pool strategy."""
    pytest.importorskip("numba")
    from framework.kernels import catalog, window_jit

    monkeypatch.setattr(window_jit, "warm_up", lambda: 0.0)  # the strategies' kernels: tested elsewhere
    monkeypatch.setattr(warmup, "_record_done", lambda: None)  # leaves the user's cache folder alone
    assert cli.main(["warmup"]) == 0
    lines = capsys.readouterr().out.splitlines()
    for op, strategy in catalog.strategies():
        assert any(line.strip().startswith(f"{op} {strategy.name}: ") for line in lines), (op, strategy.name)
    for family, ops, name in catalog.OTHERS:
        mine = [line for line in lines if line.strip().startswith(f"{family} ({ops}): ")]
        assert len(mine) == 1, (family, lines)
        ready = importlib.import_module(name).available()
        assert mine[0].endswith(": ready") == ready, mine[0]


def test_a_read_only_install_warms_up_into_the_user_cache_folder(tmp_path):
    """A read-only copy of the package, an empty user cache: `framework ops Relu` returns at once and its
    background warm-up compiles into <cache>/numba (stopped after its first cached kernel)."""
    pytest.importorskip("numba")
    install = tmp_path / "site"
    shutil.copytree(
        os.path.join(ROOT, "framework"), install / "framework", ignore=shutil.ignore_patterns("__pycache__")
    )
    for d, _, files in os.walk(install):
        os.chmod(d, 0o555)
        for f in files:
            os.chmod(os.path.join(d, f), 0o444)
    cache = tmp_path / "cache"
    skip = ("NUMBA_CACHE_DIR", "FRAMEWORK_NO_AUTO_WARMUP", "FRAMEWORK_NO_JIT")
    env = {k: v for k, v in os.environ.items() if k not in skip}
    env |= {"FRAMEWORK_CACHE_DIR": str(cache), "PYTHONPATH": str(install), "PYTHONDONTWRITEBYTECODE": "1"}
    pid = None
    try:
        out = subprocess.run(
            [sys.executable, "-m", "framework", "ops", "Relu"],
            env=env,
            cwd=str(tmp_path),
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert out.returncode == 0 and "Relu" in out.stdout, out.stderr
        assert "compiling the kernels in the background" in out.stderr
        locks = list((cache / "warmup").glob("*.running"))
        assert len(locks) == 1
        pid = int(locks[0].read_text())
        deadline = time.time() + 600
        while time.time() < deadline and not any(f.endswith(".nbi") for _, _, fs in os.walk(cache) for f in fs):
            time.sleep(0.5)
        cached = [f for _, _, fs in os.walk(cache / "numba") for f in fs]
        assert any(f.endswith(".nbi") for f in cached), (cached, (cache / "warmup").iterdir())
        in_package = [f for _, _, fs in os.walk(install) for f in fs if f.endswith((".nbi", ".nbc"))]
        assert in_package == []
    finally:
        if pid is not None:
            try:
                os.killpg(pid, signal.SIGTERM)  # its own session: the background warm-up this test started
            except ProcessLookupError:
                pass
        for d, _, _ in os.walk(install):
            os.chmod(d, 0o755)


def test_the_check_does_not_import_the_nn_ops(tmp_path):
    """Every command checks for the warm-up record: that must not cost the import of the nn ops and numba."""
    code = (
        "import sys; from framework.cli import warmup; p = warmup.done_path(); "
        "print('framework.ops.nn' in sys.modules, 'numba' in sys.modules, p.parent)"
    )
    env = dict(os.environ, FRAMEWORK_CACHE_DIR=str(tmp_path), PYTHONPATH=ROOT)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "False", str(tmp_path / "warmup")]
