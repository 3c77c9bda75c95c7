"""SoftmaxWithLoss and its gradient split by rows over two intra-op threads: the same values as one thread,
bit for bit (each row is computed as on one thread), against float64 numpy references, no per-run allocation."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.proto.framework_pb2 import NetDef
from tests.ops.threaded import assert_same, run_threads


def _net() -> NetDef:
    net = NetDef(name="xent_threads", external_input=["x", "label", "dloss"])
    net.op.extend(
        [
            CreateOperator("SoftmaxWithLoss", ["x", "label"], ["p", "loss"], scale=1.5),
            CreateOperator("SoftmaxWithLossGradient", ["x", "label", "p", "dloss"], ["dx"], scale=1.5),
        ]
    )
    return net


def _reference(x, labels, dloss):
    x64 = x.astype(np.float64)
    z = x64 - x64.max(1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(1, keepdims=True))
    n = len(labels)
    p = np.exp(logp)
    onehot = np.zeros_like(p)
    onehot[np.arange(n), labels] = 1.0
    return p, -1.5 * logp[np.arange(n), labels].sum() / n, (p - onehot) * 1.5 * dloss / n


@settings(max_examples=10, deadline=None)
@given(n=st.integers(2, 9), d=st.integers(1, 40), seed=st.integers(0, 2**16))
def test_split_rows_equal_one_thread(n, d, seed):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((n, d)) * 5).astype(np.float32)
    labels = rng.integers(0, d, n).astype(np.int32)
    feeds = {"x": x, "label": labels, "dloss": np.array(0.5, np.float32)}
    results, tasks, allocs = run_threads(_net(), feeds, ["p", "loss", "dx"], min_work=1)
    assert tasks >= 4  # both ops ran their rows as two tasks
    assert allocs == 0
    assert_same(results)
    p, loss, dx = _reference(x, labels, 0.5)
    np.testing.assert_allclose(results[2]["p"], p, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(float(results[2]["loss"]), loss, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(results[2]["dx"], dx, rtol=1e-5, atol=1e-7)


def test_language_model_sized_logits_split_by_default():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((70, 4000)).astype(np.float32)
    labels = rng.integers(0, 4000, 70).astype(np.int32)
    feeds = {"x": x, "label": labels, "dloss": np.array(1.0, np.float32)}
    results, tasks, allocs = run_threads(_net(), feeds, ["p", "loss", "dx"])
    assert tasks >= 4 and allocs == 0
    assert_same(results)


def test_small_logits_stay_on_one_thread():
    rng = np.random.default_rng(2)
    feeds = {
        "x": rng.standard_normal((4, 10)).astype(np.float32),
        "label": np.array([1, 2, 3, 9], np.int32),
        "dloss": np.array(1.0, np.float32),
    }
    results, tasks, _ = run_threads(_net(), feeds, ["p", "loss", "dx"])
    assert tasks == 0
    assert_same(results)
