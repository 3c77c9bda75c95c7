"""Cross-check FC, activations and SoftmaxWithLoss (forward and gradients) against PyTorch."""

from __future__ import annotations

import numpy as np
import pytest

from framework.core import CreateOperator
from framework.memory.workspace import Workspace
from framework.ops import create_operator, get_gradient_for_op

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch


def _run(op_def, feeds):
    ws = Workspace()
    for k, v in feeds.items():
        ws.feed_blob(k, v)
    create_operator(op_def, ws).run()
    return ws


def test_fc_and_gradient_match_torch_linear():
    rng = np.random.default_rng(0)
    x, w, b = (rng.standard_normal(s).astype(np.float32) for s in ((8, 6), (4, 6), (4,)))
    dy = rng.standard_normal((8, 4)).astype(np.float32)
    fc = CreateOperator("FC", ["X", "W", "b"], ["Y"])
    ws = _run(fc, {"X": x, "W": w, "b": b})
    (g,), _ = get_gradient_for_op(fc, ["dY"])
    ws.feed_blob("dY", dy)
    create_operator(g, ws).run()
    tx, tw, tb = (torch.tensor(a, requires_grad=True) for a in (x, w, b))
    ty = torch.nn.functional.linear(tx, tw, tb)
    ty.backward(torch.tensor(dy))
    np.testing.assert_allclose(ws.fetch_blob("Y"), ty.detach().numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(ws.fetch_blob("W_grad"), tw.grad.numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(ws.fetch_blob("b_grad"), tb.grad.numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(ws.fetch_blob("X_grad"), tx.grad.numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    "op_type,kwargs,fn",
    [
        ("Relu", {}, lambda t: torch.relu(t)),
        ("LeakyRelu", {"alpha": 0.1}, lambda t: torch.nn.functional.leaky_relu(t, 0.1)),
        ("Elu", {}, lambda t: torch.nn.functional.elu(t)),
        ("Selu", {}, lambda t: torch.selu(t)),
        ("Sigmoid", {}, lambda t: torch.sigmoid(t)),
        ("Tanh", {}, lambda t: torch.tanh(t)),
        ("Softplus", {}, lambda t: torch.nn.functional.softplus(t)),
        ("Softsign", {}, lambda t: torch.nn.functional.softsign(t)),
        ("Swish", {}, lambda t: torch.nn.functional.silu(t)),
        ("Gelu", {}, lambda t: torch.nn.functional.gelu(t)),
        ("Gelu", {"fast_gelu": True}, lambda t: torch.nn.functional.gelu(t, approximate="tanh")),
        ("HardSigmoid", {"alpha": 1 / 6, "beta": 0.5}, lambda t: torch.nn.functional.hardsigmoid(t)),
        ("Softmax", {}, lambda t: torch.softmax(t, 1)),
        ("LogSoftmax", {}, lambda t: torch.log_softmax(t, 1)),
    ],
)
def test_activation_and_gradient_match_torch(op_type, kwargs, fn):
    rng = np.random.default_rng(1)
    x = rng.uniform(-4, 4, (5, 7)).astype(np.float32)
    dy = rng.standard_normal((5, 7)).astype(np.float32)
    op = CreateOperator(op_type, ["X"], ["Y"], **kwargs)
    ws = _run(op, {"X": x})
    ops, gi = get_gradient_for_op(op, ["dY"])
    ws.feed_blob("dY", dy)
    for g in ops:
        create_operator(g, ws).run()
    tx = torch.tensor(x, requires_grad=True)
    ty = fn(tx)
    ty.backward(torch.tensor(dy))
    np.testing.assert_allclose(ws.fetch_blob("Y"), ty.detach().numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(ws.fetch_blob(gi[0]), tx.grad.numpy(), rtol=1e-4, atol=1e-5)


def test_softmax_with_loss_matches_torch_cross_entropy():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((6, 5)).astype(np.float32)
    labels = rng.integers(0, 5, 6).astype(np.int32)
    op = CreateOperator("SoftmaxWithLoss", ["X", "L"], ["P", "loss"])
    ws = _run(op, {"X": x, "L": labels})
    (g,), _ = get_gradient_for_op(op, [None, "dloss"])
    ws.feed_blob("dloss", np.array(1.0, np.float32))
    create_operator(g, ws).run()
    tx = torch.tensor(x, requires_grad=True)
    loss = torch.nn.functional.cross_entropy(tx, torch.tensor(labels, dtype=torch.long))
    loss.backward()
    np.testing.assert_allclose(ws.fetch_blob("loss"), loss.item(), rtol=1e-5)
    np.testing.assert_allclose(ws.fetch_blob("X_grad"), tx.grad.numpy(), rtol=1e-5, atol=1e-6)
