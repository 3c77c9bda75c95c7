"""The convolutions' splits over two intra-op threads let the calling thread steal the pool thread's parts
(run_parallel(steal=True), and native jobs, whose every task any thread may claim): with the pool thread
held busy, Conv and ConvGradient still finish, give the bits of one thread, and nothing is allocated (a
stolen part runs on the calling thread's scratch, which its own part has sized)."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import framework.runtime.parallel as parallel
from bench.common import allocations_per_run
from framework.core import CreateOperator
from framework.kernels import native_pool
from framework.memory.workspace import Workspace
from framework.proto.framework_pb2 import NetDef
from framework.runtime.state import RUNTIME

pytest.importorskip("numba")


def _net(stride: int) -> NetDef:
    net = NetDef(name="conv_steal")
    net.op.append(CreateOperator("Conv", ["X", "W", "b"], ["Y"], kernel=3, stride=stride, pad=1))
    net.op.append(CreateOperator("ConvGradient", ["X", "W", "dY"], ["dW", "db", "dX"], kernel=3, stride=stride, pad=1))
    return net


def _feeds(stride: int) -> dict:
    rng = np.random.default_rng(7)
    o = (32 + 2 - 3) // stride + 1
    return {
        "X": rng.standard_normal((8, 16, 32, 32)).astype(np.float32),
        "W": rng.standard_normal((32, 16, 3, 3)).astype(np.float32),
        "b": rng.standard_normal(32).astype(np.float32),
        "dY": rng.standard_normal((8, 32, o, o)).astype(np.float32),
    }


def _reference_y(x, w, b, stride):
    """float64 cross-correlation with zero padding 1 (Caffe2's Conv, NCHW)."""
    n, c, h, wd = x.shape
    m = w.shape[0]
    xp = np.zeros((n, c, h + 2, wd + 2))
    xp[:, :, 1:-1, 1:-1] = x
    oh, ow = (h - 1) // stride + 1, (wd - 1) // stride + 1
    y = np.zeros((n, m, oh, ow)) + b[None, :, None, None]
    for a in range(3):
        for bb in range(3):
            win = xp[:, :, a : a + stride * (oh - 1) + 1 : stride, bb : bb + stride * (ow - 1) + 1 : stride]
            y += np.einsum("nchw,mc->nmhw", win, w[:, :, a, bb].astype(np.float64))
    return y


def _workspace(stride: int):
    ws = Workspace()
    for k, v in _feeds(stride).items():
        ws.feed_blob(k, v)
    return ws, ws.create_net(_net(stride))


@pytest.mark.parametrize("stride", [1, 2])
def test_parts_stolen_from_a_busy_pool_thread(stride):
    outs = ("Y", "dW", "db", "dX")
    old, old_min = parallel.get_num_threads(), parallel.SPLIT_MIN_WORK
    try:
        parallel.set_num_threads(1)
        ws1, net1 = _workspace(stride)
        net1.run()
        one = {k: np.array(ws1.fetch_blob(k)) for k in outs}
        parallel.set_num_threads(2)
        ws2, net2 = _workspace(stride)
        ran = []  # the thread of each Python part; for a native job: ("job", tasks, tasks this thread ran)
        old_task, old_native = parallel._task, native_pool.run
        parallel._task = lambda fn, caller: (ran.append(threading.get_ident()), old_task(fn, caller))

        def native(fn, block, n):
            old_native(fn, block, n)
            ran.append(("job", n, RUNTIME.pool.ran_here))

        native_pool.run = native
        try:
            assert allocations_per_run(net2.run, n=2, warm=2) == 0
            assert len(ran) > 4, "the convolutions did not split over the two threads"
            release = threading.Event()
            started = threading.Event()
            # the pool's one thread busy until released (from when it has started on it)
            blocker = RUNTIME.pool.submit(lambda: (started.set(), release.wait()))
            assert started.wait(10)
            timer = threading.Timer(5.0, release.set)  # without stealing the run would wait for it
            timer.start()
            try:
                ran.clear()
                assert allocations_per_run(net2.run, n=2, warm=0) == 0
                here = threading.get_ident()
                jobs_here = all(r[1] == r[2] for r in ran if isinstance(r, tuple))
                assert jobs_here and all(r == here for r in ran if not isinstance(r, tuple)), (
                    "a part waited for the pool"
                )
            finally:
                release.set()
                timer.cancel()
                blocker.result()
        finally:
            parallel._task, native_pool.run = old_task, old_native
        for k in outs:
            np.testing.assert_array_equal(ws2.fetch_blob(k), one[k], err_msg=k)
        f = _feeds(stride)
        np.testing.assert_allclose(one["Y"], _reference_y(f["X"], f["W"], f["b"], stride), rtol=1e-4, atol=1e-3)
        np.testing.assert_allclose(one["db"], f["dY"].astype(np.float64).sum(axis=(0, 2, 3)), rtol=1e-4, atol=1e-3)
    finally:
        parallel.SPLIT_MIN_WORK = old_min
        parallel.set_num_threads(old)
