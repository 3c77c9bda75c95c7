"""SoftmaxWithLoss's compiled pass (bn_train.softmax_xent_job): probabilities and label log-probabilities
against float64 numpy references written here, rows holding NaN or infinities as numpy's softmax leaves them,
the output written over its input, split rows with one thread's bits, and the op's run() and compiled
closure taking it for int32 labels."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import framework
from framework.core import CreateOperator
from framework.kernels import bn_train
from framework.memory.workspace import Workspace
from framework.ops import create_operator

pytestmark = pytest.mark.skipif(not bn_train.available(), reason="needs numba")


def _reference(x: np.ndarray, labels: np.ndarray):
    with np.errstate(all="ignore"):
        x64 = x.astype(np.float64)
        z = x64 - x64.max(1, keepdims=True)
        e = np.exp(z)
        s = e.sum(1, keepdims=True)
        return e / s, (z - np.log(s))[np.arange(len(labels)), labels]


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(1, 12),
    d=st.integers(1, 300),
    spread=st.sampled_from([0.1, 3.0, 40.0]),
    seed=st.integers(0, 9999),
)
def test_probabilities_and_log_probabilities_match_float64(n, d, spread, seed):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((n, d)) * spread).astype(np.float32)
    labels = rng.integers(0, d, n).astype(np.int32)
    p, picked = np.full_like(x, np.nan), np.full(n, np.nan, np.float32)
    job = bn_train.softmax_xent_job(x, p, labels, picked)
    assert job is not None
    job()
    want_p, want_lp = _reference(x, labels)
    # x - max rounds to float32 first (as in numpy's float32 softmax): e^t's relative error grows with |t| (87 at
    # most, below it p is 0: atol)
    np.testing.assert_allclose(p, want_p, rtol=1e-5, atol=1e-37)
    np.testing.assert_allclose(picked, want_lp, rtol=2e-6, atol=2e-6)


def test_nan_and_infinite_rows_as_numpy_softmax():
    inf, nan = np.inf, np.nan
    x = np.array([[1, 2, 3], [nan, 1, 2], [inf, 1, 2], [-inf, 1, 2], [-inf, -inf, -inf], [1, -200, 3]], np.float32)
    labels = np.array([0, 1, 1, 0, 1, 1], np.int32)
    p, picked = np.empty_like(x), np.empty(6, np.float32)
    bn_train.softmax_xent_job(x, p, labels, picked)()
    want_p, want_lp = _reference(x, labels)
    np.testing.assert_allclose(p, want_p, rtol=2e-6, atol=1e-37)  # NaN where numpy has NaN, 0 for -inf / e^-203
    np.testing.assert_allclose(picked, want_lp, rtol=2e-6)
    assert picked[3] == -inf


def test_in_place_and_split_rows_keep_one_threads_bits():
    rng = np.random.default_rng(4)
    x = (rng.standard_normal((64, 3000)) * 5).astype(np.float32)
    labels = rng.integers(0, 3000, 64).astype(np.int32)
    out = {}
    old = framework.get_num_threads()
    try:
        for threads in (1, 2):
            framework.set_num_threads(threads)
            p, picked = x.copy(), np.empty(64, np.float32)
            bn_train.softmax_xent_job(p, p, labels, picked)()  # p is x itself
            out[threads] = (p, picked)
    finally:
        framework.set_num_threads(old)
    want_p, want_lp = _reference(x, labels)
    np.testing.assert_allclose(out[1][0], want_p, rtol=1e-5, atol=1e-37)
    np.testing.assert_allclose(out[1][1], want_lp, rtol=2e-6, atol=2e-6)
    assert np.array_equal(out[1][0], out[2][0]) and np.array_equal(out[1][1], out[2][1])


def test_what_it_does_not_take():
    x, p, picked = np.zeros((3, 4), np.float32), np.zeros((3, 4), np.float32), np.zeros(3, np.float32)
    assert bn_train.softmax_xent_job(x, p, np.zeros(3, np.int64), picked) is None
    assert bn_train.softmax_xent_job(x.astype(np.float64), p, np.zeros(3, np.int32), picked) is None
    assert bn_train.softmax_xent_job(x[:, ::2], p[:, :2], np.zeros(3, np.int32), picked) is None


@pytest.mark.parametrize("label_dtype", [np.int32, np.int64])
def test_op_run_and_compiled_closure_agree(label_dtype):
    rng = np.random.default_rng(8)
    x = (rng.standard_normal((20, 500)) * 4).astype(np.float32)
    labels = rng.integers(0, 500, 20).astype(label_dtype)
    ws = Workspace()
    ws.feed_blob("x", x)
    ws.feed_blob("l", labels)
    op = create_operator(CreateOperator("SoftmaxWithLoss", ["x", "l"], ["p", "loss"], scale=2.0), ws)
    op.run()
    p_run, loss_run = ws.fetch_blob("p").copy(), float(ws.fetch_blob("loss"))
    fast = op.compile()
    assert (fast.__name__ == "softmax_with_loss_compiled") == (label_dtype == np.int32)
    ws.fetch_blob("p")[...] = 0
    fast()
    assert np.array_equal(ws.fetch_blob("p"), p_run) and float(ws.fetch_blob("loss")) == loss_run
    want_p, want_lp = _reference(x, labels)
    np.testing.assert_allclose(p_run, want_p, rtol=2e-6, atol=1e-37)
    assert loss_run == pytest.approx(-2.0 * want_lp.mean(), rel=1e-5)
