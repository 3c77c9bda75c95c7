"""framework.runtime.state: the process state in one object, resettable; BLAS threads set per net run and
restored; importing the package changes nothing about the host process."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from framework.caffe2.python import core
from framework.memory.workspace import Workspace
from framework.runtime import blas, parallel
from framework.runtime.state import RUNTIME


class _FakeBlas:
    """Stands for a threadpoolctl controller of one BLAS library."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.calls: list[int] = []

    def get_num_threads(self) -> int:
        return self.n

    def set_num_threads(self, n: int) -> None:
        self.calls.append(n)
        self.n = n


@pytest.fixture
def fake_blas():
    saved = (RUNTIME.threads, RUNTIME.pool, RUNTIME.blas_threads, RUNTIME.blas_decided, RUNTIME._blas_libs)
    lib = _FakeBlas(4)
    RUNTIME._blas_libs = (lib,)
    RUNTIME.blas_log.clear()
    yield lib
    RUNTIME.threads, RUNTIME.pool, RUNTIME.blas_threads, RUNTIME.blas_decided, RUNTIME._blas_libs = saved


def _net(ws: Workspace, name: str, seen: list, lib: _FakeBlas):
    n = core.Net(name)
    n.Relu("x", "y")
    n.Python(lambda inputs, outputs: seen.append(lib.n))([], [])
    ws.feed_blob("x", np.ones(3, np.float32))
    return ws.create_net(n)


def test_blas_threads_are_set_for_a_run_and_restored_after(fake_blas):
    blas.set_blas_threads(1)
    ws, seen = Workspace(), []
    net = _net(ws, "n", seen, fake_blas)
    assert fake_blas.n == 4 and not fake_blas.calls  # creating a net changes nothing
    net.run()
    net.run()
    assert seen == [1, 1] and fake_blas.n == 4
    assert RUNTIME.blas_log[-4:] == [("apply", 4, 1), ("restore", 1, 4), ("apply", 4, 1), ("restore", 1, 4)]


def test_nested_runs_apply_once_and_restore_at_the_outermost(fake_blas):
    blas.set_blas_threads(2)
    RUNTIME.enter_net()
    RUNTIME.enter_net()
    assert fake_blas.n == 2
    RUNTIME.exit_net()
    assert fake_blas.n == 2
    RUNTIME.exit_net()
    assert fake_blas.n == 4 and fake_blas.calls == [2, 4]


def test_a_failing_run_restores_blas_too(fake_blas):
    blas.set_blas_threads(1)
    ws = Workspace()
    n = core.Net("bad")
    n.Python(lambda inputs, outputs: 1 / 0)([], [])
    net = ws.create_net(n)
    with pytest.raises(ZeroDivisionError):
        net.run()
    assert fake_blas.n == 4 and RUNTIME._depth == 0


def test_none_leaves_blas_alone_and_the_env_default_is_taken_at_the_first_run(fake_blas, monkeypatch):
    blas.set_blas_threads(None)
    RUNTIME.enter_net()
    RUNTIME.exit_net()
    assert not fake_blas.calls
    RUNTIME.blas_decided = False
    monkeypatch.setenv("FRAMEWORK_BLAS_THREADS", "3")
    RUNTIME.enter_net()
    assert fake_blas.n == 3 and RUNTIME.blas_threads == 3
    RUNTIME.exit_net()
    assert fake_blas.n == 4


def test_intra_op_threads_ask_for_one_blas_thread_per_worker_during_runs(fake_blas):
    blas.set_blas_threads(None)
    parallel.set_num_threads(2)
    try:
        assert RUNTIME.threads == 2 and RUNTIME.pool is not None and RUNTIME.blas_threads == 1
        assert fake_blas.n == 4  # not capped for the process
    finally:
        parallel.set_num_threads(1)


def test_reset_forgets_every_decision():
    probe = (
        "from framework.runtime.state import RUNTIME; from framework.runtime import parallel, blas\n"
        "parallel.set_num_threads(2); blas.set_blas_threads(3)\n"
        "RUNTIME.reset()\n"
        "print(RUNTIME.threads, RUNTIME.pool, RUNTIME.pools, RUNTIME.blas_threads, RUNTIME.blas_decided, "
        "parallel.get_num_threads())\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "FRAMEWORK_NUM_THREADS"}
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["None", "None", "{}", "None", "False", "1"]


def test_importing_the_package_changes_nothing_about_the_process():
    probe = (
        "import os, sys, json\n"
        "before = dict(os.environ)\n"
        "import framework\n"
        "from framework import Workspace\n"  # a name of the package, loaded on use
        "print(json.dumps([dict(os.environ) == before, 'numpy' in sys.modules, Workspace.__name__]))\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_CORETYPE", "FRAMEWORK_BLAS_CORETYPE")}
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    same_env, _, name = json.loads(out.stdout.strip().splitlines()[-1])
    assert same_env and name == "Workspace"


def test_real_blas_threads_are_restored_after_a_run():
    threadpoolctl = pytest.importorskip("threadpoolctl")
    libs = RUNTIME.blas_libs()
    if not libs:
        pytest.skip("no BLAS library threadpoolctl can see")
    saved = (RUNTIME.blas_threads, RUNTIME.blas_decided)
    before = [lib.get_num_threads() for lib in libs]
    seen: list = []
    try:
        blas.set_blas_threads(1)
        ws = Workspace()
        n = core.Net("real")
        n.Python(
            lambda inputs, outputs: seen.append(
                max(i["num_threads"] for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas")
            )
        )([], [])
        ws.create_net(n).run()
    finally:
        RUNTIME.blas_threads, RUNTIME.blas_decided = saved
    assert seen == [1]
    assert [lib.get_num_threads() for lib in libs] == before
