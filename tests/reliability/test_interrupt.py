"""Ctrl-C during a dag run: RunNet returns (raising KeyboardInterrupt) only after every worker has
stopped, so nothing of the interrupted run still writes blobs and the next run does not overlap."""

from __future__ import annotations

import os
import signal
import threading
import time

import numpy as np
import pytest

from framework import core
from framework.memory.workspace import Workspace


def _long_dag(ws: Workspace, chains: int = 2, length: int = 300) -> str:
    net = core.Net("long")
    net.Proto().type = "dag"
    net.Proto().num_workers = 2
    a = net.Proto().arg.add()
    a.name, a.i = "compile_ops", 0  # every op through run(), so each bumps its output's version
    for c in range(chains):
        ws.feed_blob(f"x{c}", np.eye(200, dtype=np.float32))
        prev = f"x{c}"
        for k in range(length):
            out = f"y{c}_{k % 2}"
            net.MatMul([prev, f"x{c}"], [out])
            prev = out
    ws.create_net(net)
    return "long"


def _versions(ws: Workspace) -> dict[str, int]:
    return {n: ws.get_blob(n)._obj.version for n in ws.blobs() if n.startswith("y")}


def test_ctrl_c_during_a_dag_run_stops_every_worker_before_returning():
    ws = Workspace()
    name = _long_dag(ws)
    ws.run_net(name)  # warm up: threads started, buffers allocated
    t0 = time.perf_counter()
    ws.run_net(name)
    if time.perf_counter() - t0 < 0.2:
        pytest.skip("this machine runs the net too fast to interrupt it reliably")
    timer = threading.Timer(0.05, os.kill, (os.getpid(), signal.SIGINT))  # a real Ctrl-C
    timer.start()
    try:
        ws.run_net(name)
    except KeyboardInterrupt:
        pass
    else:
        timer.cancel()
        pytest.skip("the run finished before the interrupt")
    after = _versions(ws)
    time.sleep(0.5)
    assert _versions(ws) == after, "a worker of the interrupted run was still writing blobs"
    ws.run_net(name)  # the next run works
    np.testing.assert_allclose(ws.fetch_blob("y0_1"), np.eye(200, dtype=np.float32))
