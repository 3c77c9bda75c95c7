"""FC's weight handling: a large W is never copied (Y^T = W X^T, transposed into Y with the bias), a small
one is packed once into an allocator buffer the memory reporter counts; neither allocates per run.
Reshape re-runs (in place or not) allocate nothing either."""

from __future__ import annotations

import numpy as np
import pytest

from framework.core import CreateOperator
from framework.memory.allocator import memory_reporter
from framework.memory.workspace import Workspace
from framework.ops import create_operator
from framework.ops.nn import fc
from framework.proto.framework_pb2 import NetDef


@pytest.mark.parametrize("wide", [True, False])
@pytest.mark.parametrize("m", [1, 5])
def test_fc_large_weight_is_not_copied_small_one_is_packed_and_counted(monkeypatch, wide, m):
    rng = np.random.default_rng(m)
    k, n = 24, 10
    x = rng.standard_normal((m, 2, 3, 4)).astype(np.float32)
    w = rng.standard_normal((n, k)).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    monkeypatch.setattr(fc, "_PACK_MAX_BYTES", 0 if wide else 1 << 20)
    ws = Workspace()
    for name, v in (("X", x), ("W", w), ("b", b)):
        ws.feed_blob(name, v)
    op = create_operator(CreateOperator("FC", ["X", "W", "b"], ["Y"]), ws)
    rep = memory_reporter()
    runs = []
    for _ in range(3):
        before = (rep.allocations, rep.current_bytes)
        op.run()
        runs.append((rep.allocations - before[0], rep.current_bytes - before[1]))
    want = x.reshape(m, k).astype(np.float64) @ w.T.astype(np.float64) + b
    np.testing.assert_allclose(ws.fetch_blob("Y"), want, rtol=1e-5, atol=1e-5)
    assert op._wide == (wide and m > 1)
    if m > 1 and not wide:  # packed on the second run (W seen unchanged), through the allocator
        assert op._packed is not None and runs[1] == (1, w.nbytes)
    else:
        assert op._packed is None and runs[1] == (0, 0)
    assert runs[2] == (0, 0)
    c = op.compile()  # the compiled closure does the same
    ws.fetch_blob("Y")[...] = 0
    c()
    np.testing.assert_allclose(ws.fetch_blob("Y"), want, rtol=1e-5, atol=1e-5)


def test_reshape_reruns_allocate_nothing():
    ws = Workspace()
    ws.feed_blob("X", np.arange(32, dtype=np.float32).reshape(4, 8, 1, 1))
    net = NetDef(name="reshapes")
    net.op.extend(
        [
            CreateOperator("Relu", ["X"], ["Y"]),
            CreateOperator("Reshape", ["Y"], ["Z", "old"], shape=[0, -1]),
            CreateOperator("Relu", ["X"], ["A"]),
            CreateOperator("Reshape", ["A"], ["A", "old2"], shape=[0, -1]),  # in place
        ]
    )
    net.external_input.append("X")
    created = ws.create_net(net)
    for _ in range(3):
        created.run()
    rep = memory_reporter()
    before = rep.allocations
    for _ in range(3):
        created.run()
    assert rep.allocations == before
    assert ws.fetch_blob("Z").shape == (4, 8) and ws.fetch_blob("A").shape == (4, 8)
    np.testing.assert_array_equal(ws.fetch_blob("old2"), [4, 8, 1, 1])


@pytest.mark.parametrize("threads", [1, 2])
def test_fc_large_weight_many_rows_runs_on_w_directly(monkeypatch, threads):
    """A large W with 2 M >= K (a decoder over all time steps): Y = X W^T on W's own layout, no packed copy,
    no Y^T buffer, nothing allocated per run; values equal the float64 reference in run() and compiled."""
    import framework

    monkeypatch.setattr(fc, "_PACK_MAX_BYTES", 0)
    monkeypatch.setattr(fc, "SPLIT_MIN_BYTES", 1024)
    rng = np.random.default_rng(7)
    m, k, n = 12, 8, 70
    x = rng.standard_normal((m, k)).astype(np.float32)
    w = rng.standard_normal((n, k)).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    want = x.astype(np.float64) @ w.T.astype(np.float64) + b
    old = framework.get_num_threads()
    framework.set_num_threads(threads)
    try:
        ws = Workspace()
        for name, v in (("X", x), ("W", w), ("b", b)):
            ws.feed_blob(name, v)
        op = create_operator(CreateOperator("FC", ["X", "W", "b"], ["Y"]), ws)
        rep = memory_reporter()
        op.run()
        before = (rep.allocations, rep.current_bytes)
        for _ in range(2):
            op.run()
            np.testing.assert_allclose(ws.fetch_blob("Y"), want, rtol=1e-5, atol=1e-5)
        assert (rep.allocations, rep.current_bytes) == before
        assert not op._wide and not op._may_pack and op._packed is None
        ws.fetch_blob("Y")[...] = 0
        op.compile()()
        np.testing.assert_allclose(ws.fetch_blob("Y"), want, rtol=1e-5, atol=1e-5)
    finally:
        framework.set_num_threads(old)
