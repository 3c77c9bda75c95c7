"""native_gemm: numpy's own CBLAS products as native jobs. One task making a product gives np.matmul's bits
(the same call for the same operands), over every layout numpy hands to BLAS; operands numpy would not hand
to BLAS are refused; a product split by output columns over tasks matches a float64 reference; the bias
passes are exact; FC and FCTransposed split small products as native jobs at two threads, allocating
nothing per run."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import framework
from framework.core import CreateOperator
from framework.kernels import native_gemm
from framework.memory.workspace import Workspace
from framework.ops import create_operator
from framework.ops.nn import fc
from tests.ops.threaded import run_threads

pytestmark = pytest.mark.skipif(not native_gemm.available(), reason="needs numba and numpy's CBLAS")


def _operand(rng, rows: int, cols: int, transposed: bool, padded: bool) -> np.ndarray:
    """A float32 (rows, cols) matrix: C-ordered or a transposed view, inside a wider buffer when ``padded``
    (a leading dimension beyond the row)."""
    shape = (cols, rows) if transposed else (rows, cols)
    buf = rng.standard_normal((shape[0], shape[1] + (3 if padded else 0))).astype(np.float32)
    m = buf[:, : shape[1]]
    return m.T if transposed else m


@settings(max_examples=60, deadline=None)
@given(
    m=st.integers(1, 40),
    k=st.integers(1, 70),
    n=st.integers(1, 90),
    ta=st.booleans(),
    tb=st.booleans(),
    pa=st.booleans(),
    pb=st.booleans(),
    out_t=st.booleans(),
    seed=st.integers(0, 999),
)
def test_one_task_gives_np_matmul_bits(m, k, n, ta, tb, pa, pb, out_t, seed):
    rng = np.random.default_rng(seed)
    a, b = _operand(rng, m, k, ta, pa), _operand(rng, k, n, tb, pb)
    out, want = (np.full((n, m), np.nan, np.float32).T if out_t else np.full((m, n), np.nan, np.float32) for _ in "12")
    np.matmul(a, b, out=want)  # (numpy computes an F-ordered result as b.T @ a.T)
    job = native_gemm.Job(1)
    if not job.matmul(0, a, b, out):
        # numpy's dot (a 1 x 1 result), its own loop (k == 1) or syrk: refused, the caller computes it
        assert (m == 1 and n == 1) or k == 1
        return
    job.build()()
    assert np.array_equal(out, want)


def test_vector_times_matrix_gives_np_matmul_bits():
    rng = np.random.default_rng(3)
    a = rng.standard_normal(300).astype(np.float32)
    for b in (rng.standard_normal((300, 77)).astype(np.float32), rng.standard_normal((77, 300)).astype(np.float32).T):
        y = np.full(77, np.nan, np.float32)
        job = native_gemm.Job(1)
        assert job.matmul(0, a, b, y)
        job.build()()
        assert np.array_equal(y, a @ b)


def test_operands_blas_cannot_take_are_refused():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((8, 16)).astype(np.float32)
    b = rng.standard_normal((16, 12)).astype(np.float32)
    out = np.empty((8, 12), np.float32)
    job = native_gemm.Job(1)
    assert not job.matmul(0, a[:, ::2], b[::2], out)  # no unit stride
    assert not job.matmul(0, a.astype(np.float64), b, out)
    assert not job.matmul(0, a, b[:, :5], out)  # shapes disagree
    assert not job.matmul(0, a, a.T, np.empty((8, 8), np.float32))  # numpy's syrk
    assert not job.matmul(0, a[:1], b[:, :1], np.empty((1, 1), np.float32))  # numpy's dot
    assert not job.add_bias(0, out, np.zeros(5, np.float32))
    assert not job.add_transposed(0, out, np.zeros(12, np.float32), out)


@settings(max_examples=25, deadline=None)
@given(m=st.integers(1, 30), k=st.integers(2, 300), n=st.integers(33, 400), tb=st.booleans(), seed=st.integers(0, 999))
def test_split_by_columns_with_bias_matches_float64(m, k, n, tb, seed):
    rng = np.random.default_rng(seed)
    x, w = _operand(rng, m, k, False, False), _operand(rng, k, n, tb, False)
    bias = rng.standard_normal(n).astype(np.float32)
    y = np.full((m, n), np.nan, np.float32)
    cuts = [0, n // 3 // 16 * 16, n // 2, n]
    job = native_gemm.Job(3)
    for t in range(3):
        c0, c1 = cuts[t], cuts[t + 1]
        if c1 > c0:
            assert job.matmul(t, x, w[:, c0:c1], y[:, c0:c1]) or (m == 1 and c1 - c0 == 1)
            assert job.add_bias(t, y[:, c0:c1], bias[c0:c1])
    job.build()()
    want = x.astype(np.float64) @ w.astype(np.float64) + bias
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-4 * np.sqrt(k))


def test_bias_passes_are_exact():
    rng = np.random.default_rng(5)
    y = rng.standard_normal((20, 64)).astype(np.float32)
    b = rng.standard_normal(64).astype(np.float32)
    s = rng.standard_normal((64, 20)).astype(np.float32)
    want_add = y[:, 8:40] + b[8:40]
    out = np.zeros((20, 64), np.float32)
    job = native_gemm.Job(2)
    assert job.add_bias(0, y[:, 8:40], b[8:40])
    assert job.add_transposed(1, s[10:30], b[10:30], out[:, 10:30])
    job.build()()
    assert np.array_equal(y[:, 8:40], want_add)
    assert np.array_equal(out[:, 10:30], s[10:30].T + b[10:30])
    assert not out[:, :10].any() and not out[:, 30:].any()


@pytest.mark.parametrize("op_type", ["FC", "FCTransposed", "FCGradient"])
def test_small_fc_splits_as_a_native_job_at_two_threads(op_type):
    """A recurrent step's product (20 x 256 by 256 x 1024: under fc.SPLIT_MIN_MACS, over
    NATIVE_SPLIT_MIN_MACS) splits at two threads; values as one thread's to float rounding, nothing allocated."""
    rng = np.random.default_rng(7)
    x = rng.standard_normal((20, 256)).astype(np.float32)
    w = rng.standard_normal((256, 1024) if op_type == "FCTransposed" else (1024, 256)).astype(np.float32) / 16
    b = rng.standard_normal(1024).astype(np.float32)
    dy = rng.standard_normal((20, 1024)).astype(np.float32)
    assert fc.NATIVE_SPLIT_MIN_MACS <= 20 * 256 * 1024 < fc.SPLIT_MIN_MACS
    from framework.proto.framework_pb2 import NetDef

    net = NetDef(name="fc")
    if op_type == "FCGradient":
        net.op.append(CreateOperator(op_type, ["X", "W", "dY"], ["dW", "db", "dX"]))
        feeds, outs = {"X": x, "W": w, "dY": dy}, ["dW", "db", "dX"]
    else:
        net.op.append(CreateOperator(op_type, ["X", "W", "B"], ["Y"]))
        feeds, outs = {"X": x, "W": w, "B": b}, ["Y"]
    results, tasks, allocs = run_threads(net, feeds, outs, runs=4)
    assert tasks >= 2 and allocs == 0
    for name in outs:
        np.testing.assert_allclose(results[2][name], results[1][name], rtol=1e-5, atol=1e-4, err_msg=name)
    if op_type == "FCGradient":
        x64, w64, dy64 = (a.astype(np.float64) for a in (x, w, dy))
        want = {"dW": dy64.T @ x64, "db": dy64.sum(0), "dX": dy64 @ w64}
        for name in outs:
            np.testing.assert_allclose(results[2][name], want[name], rtol=1e-4, atol=1e-4, err_msg=name)


def test_int_fc_or_no_native_gemm_keeps_small_products_whole(monkeypatch):
    rng = np.random.default_rng(9)
    old = framework.get_num_threads()
    framework.set_num_threads(2)
    try:
        for dtype, native in ((np.int32, True), (np.float32, False)):
            monkeypatch.setattr(native_gemm, "available", lambda native=native: native)
            ws = Workspace()
            ws.feed_blob("X", rng.integers(-3, 3, (20, 256)).astype(dtype))
            ws.feed_blob("W", rng.integers(-3, 3, (1024, 256)).astype(dtype))
            ws.feed_blob("B", rng.integers(-3, 3, 1024).astype(dtype))
            op = create_operator(CreateOperator("FC", ["X", "W", "B"], ["Y"]), ws)
            op.run()
            assert op._parts() is None
            want = ws.fetch_blob("X").astype(np.int64) @ ws.fetch_blob("W").T.astype(np.int64) + ws.fetch_blob("B")
            np.testing.assert_allclose(ws.fetch_blob("Y"), want)
    finally:
        framework.set_num_threads(old)


def test_small_fc_without_a_native_job_runs_whole_not_as_python_tasks(monkeypatch):
    """A product under fc.SPLIT_MIN_MACS whose native job cannot be built runs as one call: Python tasks cost
    more than they save there."""

    rng = np.random.default_rng(11)
    x, w, b = (rng.standard_normal(s).astype(np.float32) for s in ((20, 256), (1024, 256), (1024,)))
    monkeypatch.setattr(fc, "_native_columns", lambda *a: None)
    calls = []
    monkeypatch.setattr(fc, "run_parallel", lambda *a, **k: calls.append(a))
    old = framework.get_num_threads()
    framework.set_num_threads(2)
    try:
        ws = Workspace()
        for name, v in (("X", x), ("W", w), ("B", b)):
            ws.feed_blob(name, v)
        op = create_operator(CreateOperator("FC", ["X", "W", "B"], ["Y"]), ws)
        for _ in range(3):  # the packed copy from the second run on
            op.run()
            np.testing.assert_allclose(ws.fetch_blob("Y"), x @ w.T + b, rtol=1e-4, atol=1e-4)
        assert op._parts() is not None and not calls
        ws.fetch_blob("Y")[...] = 0
        op.compile()()
        np.testing.assert_allclose(ws.fetch_blob("Y"), x @ w.T + b, rtol=1e-4, atol=1e-4)
        assert not calls
    finally:
        framework.set_num_threads(old)
