"""FCGradient split over two intra-op threads (dW and db by output features, dX by rows) against float64
numpy references written here, in run() and in the compiled closure, allocating nothing per run."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import framework
from framework.core import CreateOperator
from framework.memory.allocator import memory_reporter
from framework.memory.workspace import Workspace
from framework.ops import create_operator
from framework.ops.nn import fc


@pytest.fixture
def two_threads(monkeypatch):  # the same settings for every generated input: safe to share
    monkeypatch.setattr(fc, "SPLIT_MIN_BYTES", 256)
    old = framework.get_num_threads()
    framework.set_num_threads(2)
    yield
    framework.set_num_threads(old)


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    m=st.integers(2, 9), k=st.integers(1, 12), n=st.integers(64, 140), with_dx=st.booleans(), seed=st.integers(0, 999)
)
def test_fc_gradient_split_over_threads_matches_float64(two_threads, m, k, n, with_dx, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((m, k)).astype(np.float32)
    w = rng.standard_normal((n, k)).astype(np.float32)
    dy = rng.standard_normal((m, n)).astype(np.float32)
    ws = Workspace()
    for name, v in (("X", x), ("W", w), ("dY", dy)):
        ws.feed_blob(name, v)
    outs = ["dW", "db"] + (["dX"] if with_dx else [])
    op = create_operator(CreateOperator("FCGradient", ["X", "W", "dY"], outs), ws)
    x64, w64, dy64 = (a.astype(np.float64) for a in (x, w, dy))
    want = {"dW": dy64.T @ x64, "db": dy64.sum(0), "dX": dy64 @ w64}
    op.run()
    assert op._parallel_tasks() is not None and len(op._parallel_tasks()) == 2
    rep = memory_reporter()
    before = (rep.allocations, rep.current_bytes)
    for _ in range(2):
        op.run()
        for b in outs:
            np.testing.assert_allclose(ws.fetch_blob(b), want[b], rtol=1e-4, atol=1e-4, err_msg=b)
    assert (rep.allocations, rep.current_bytes) == before
    for b in outs:
        ws.fetch_blob(b)[...] = 0
    op.compile()()
    for b in outs:
        np.testing.assert_allclose(ws.fetch_blob(b), want[b], rtol=1e-4, atol=1e-4, err_msg=b)


def test_fc_gradient_small_weight_or_one_thread_is_not_split(monkeypatch):
    rng = np.random.default_rng(1)
    ws = Workspace()
    ws.feed_blob("X", rng.standard_normal((4, 8)).astype(np.float32))
    ws.feed_blob("W", rng.standard_normal((100, 8)).astype(np.float32))
    ws.feed_blob("dY", rng.standard_normal((4, 100)).astype(np.float32))
    op = create_operator(CreateOperator("FCGradient", ["X", "W", "dY"], ["dW", "db", "dX"]), ws)
    op.run()
    assert op._parallel_tasks() is None  # W under SPLIT_MIN_BYTES
    monkeypatch.setattr(fc, "SPLIT_MIN_BYTES", 256)
    old = framework.get_num_threads()
    framework.set_num_threads(1)
    try:
        assert op._parallel_tasks() is None
    finally:
        framework.set_num_threads(old)


def test_small_weight_with_many_rows_is_split_by_its_product():
    """An input projection over all time steps (1 MiB weight, 700 rows): FC and FCGradient split by the
    product's multiply-adds; the values as one thread's, to float rounding."""
    from framework.proto.framework_pb2 import NetDef
    from tests.ops.threaded import assert_same, run_threads

    rng = np.random.default_rng(2)
    feeds = {
        "X": rng.standard_normal((700, 256)).astype(np.float32),
        "W": rng.standard_normal((1024, 256)).astype(np.float32) * np.float32(0.05),
        "b": rng.standard_normal(1024).astype(np.float32),
        "dY": rng.standard_normal((700, 1024)).astype(np.float32),
    }
    assert feeds["W"].nbytes < fc.SPLIT_MIN_BYTES and 700 * 256 * 1024 >= fc.SPLIT_MIN_MACS
    net = NetDef(name="proj", external_input=list(feeds))
    net.op.extend(
        [
            CreateOperator("FC", ["X", "W", "b"], ["Y"]),
            CreateOperator("FCGradient", ["X", "W", "dY"], ["dW", "db", "dX"]),
        ]
    )
    results, tasks, allocs = run_threads(net, feeds, ["Y", "dW", "db", "dX"])
    assert tasks >= 4 and allocs == 0
    assert_same(results, rtol=1e-5, atol=1e-4)
    x64, w64, dy64 = (feeds[k].astype(np.float64) for k in ("X", "W", "dY"))
    np.testing.assert_allclose(results[2]["Y"], x64 @ w64.T + feeds["b"], rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(results[2]["dW"], dy64.T @ x64, rtol=1e-4, atol=1e-2)
    np.testing.assert_allclose(results[2]["dX"], dy64 @ w64, rtol=1e-4, atol=1e-3)
