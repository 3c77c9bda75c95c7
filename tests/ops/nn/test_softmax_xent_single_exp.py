"""SoftmaxWithLoss and its gradient in a compiled net (one exp pass: p = exp(x - max) / sum, the loss from
x[label] - max - log(sum)) against float64 numpy references written here, with large and shifted logits."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.errors import OperatorError
from framework.memory.workspace import Workspace
from framework.proto.framework_pb2 import NetDef


def _net() -> NetDef:
    net = NetDef(name="xent", external_input=["x", "label", "dloss"])
    net.op.extend(
        [
            CreateOperator("SoftmaxWithLoss", ["x", "label"], ["p", "loss"], scale=2.0),
            CreateOperator("SoftmaxWithLossGradient", ["x", "label", "p", "dloss"], ["dx"], scale=2.0),
        ]
    )
    return net


def _reference(x: np.ndarray, labels: np.ndarray, dloss: float):
    x64 = x.astype(np.float64)
    z = x64 - x64.max(1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(1, keepdims=True))
    n = x.shape[0]
    loss = -2.0 * logp[np.arange(n), labels].sum() / n
    p = np.exp(logp)
    onehot = np.zeros_like(p)
    onehot[np.arange(n), labels] = 1.0
    return p, loss, (p - onehot) * 2.0 * dloss / n


@settings(max_examples=20, deadline=None)
@given(
    n=st.integers(1, 7),
    d=st.integers(1, 300),
    shift=st.sampled_from([0.0, 60.0, -300.0]),
    spread=st.sampled_from([1.0, 20.0]),
    seed=st.integers(0, 2**16),
)
def test_compiled_softmax_with_loss_and_gradient_match_float64(n, d, shift, spread, seed):
    rng = np.random.default_rng(seed)
    ws = Workspace()
    ws.feed_blob("x", (rng.standard_normal((n, d)) * spread + shift).astype(np.float32))
    ws.feed_blob("label", rng.integers(0, d, n).astype(np.int32))
    ws.feed_blob("dloss", np.array(0.75, np.float32))
    net = ws.create_net(_net())
    for _ in range(3):  # rerun on new values in the same buffers
        x = (rng.standard_normal((n, d)) * spread + shift).astype(np.float32)
        labels = rng.integers(0, d, n).astype(np.int32)
        ws.feed_blob("x", x)
        ws.feed_blob("label", labels)
        net.run()
        p, loss, dx = _reference(x, labels, 0.75)
        np.testing.assert_allclose(ws.fetch_blob("p"), p, rtol=1e-5, atol=1e-7)
        np.testing.assert_allclose(float(ws.fetch_blob("loss")), loss, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(ws.fetch_blob("dx"), dx, rtol=1e-5, atol=1e-7)


def test_compiled_softmax_with_loss_bad_label_leaves_outputs():
    rng = np.random.default_rng(0)
    ws = Workspace()
    ws.feed_blob("x", rng.standard_normal((3, 5)).astype(np.float32))
    ws.feed_blob("label", np.array([0, 4, 2], np.int32))
    ws.feed_blob("dloss", np.array(1.0, np.float32))
    net = ws.create_net(_net())
    net.run()
    before = {b: ws.fetch_blob(b).copy() for b in ("p", "loss", "dx")}
    ws.feed_blob("x", rng.standard_normal((3, 5)).astype(np.float32))
    ws.feed_blob("label", np.array([0, 5, 1], np.int32))
    with pytest.raises(OperatorError, match="ShapeError.*label 5"):
        net.run()
    for b, v in before.items():
        np.testing.assert_array_equal(ws.fetch_blob(b), v, err_msg=b)
