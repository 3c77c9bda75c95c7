"""Cross entropies, SigmoidCrossEntropyWithLogits, AveragedLoss and Accuracy against float64 numpy references."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.errors import ArgumentError, ShapeError
from framework.memory.workspace import Workspace
from framework.ops import create_operator, get_gradient_for_op, get_schema
from framework.ops.gradient import NO_GRADIENT
from framework.ops.testing import arrays, assert_gradient_checks, assert_reference_checks

small = st.integers(1, 5)
logit_values = st.floats(-5, 5, width=32)


# -- LabelCrossEntropy / CrossEntropy ---------------------------------------------------------------


@settings(max_examples=20)
@given(n=small, d=small, data=st.data())
def test_label_cross_entropy(n, d, data):
    x = data.draw(arrays((n, d), np.float32, elements=st.floats(0.0, 1.0, width=32)))
    labels = data.draw(arrays((n,), np.int32, elements=st.integers(0, d - 1)))

    def reference(x, labels):
        return (-np.log(np.maximum(x[np.arange(n), labels].astype(np.float64), 1e-20))).astype(np.float32)

    assert_reference_checks(CreateOperator("LabelCrossEntropy", ["X", "L"], ["Y"]), [x, labels], reference)


def test_label_cross_entropy_clamps_and_1d_input():
    x = np.array([0.0, 0.5, 0.5], np.float32)  # 1D: one row
    out = assert_reference_checks(
        CreateOperator("LabelCrossEntropy", ["X", "L"], ["Y"]),
        [x, np.array([0], np.int64)],
        lambda x, l: np.array([-np.log(1e-20)], np.float32),
    )
    assert out[0].shape == (1,)


def test_label_cross_entropy_gradient_and_errors():
    rng = np.random.default_rng(4)
    x = rng.uniform(0.2, 1.0, (3, 4))
    op = CreateOperator("LabelCrossEntropy", ["X", "L"], ["Y"])
    assert_gradient_checks(op, [x, np.array([1, 0, 3], np.int32)], 0)
    ws = Workspace()
    ws.feed_blob("X", x)
    ws.feed_blob("L", np.array([1, 0], np.int32))
    with pytest.raises(ShapeError, match=r"LabelCrossEntropy.*'L' \[2\].*\[3\]"):
        create_operator(op, ws).run()


@settings(max_examples=20)
@given(n=small, d=small, data=st.data())
def test_cross_entropy(n, d, data):
    x = data.draw(arrays((n, d), np.float32, elements=st.floats(0.0, 1.0, width=32)))
    t = data.draw(arrays((n, d), np.float32, elements=st.floats(0.0, 1.0, width=32)))

    def reference(x, t):
        return (-(t * np.log(np.maximum(x.astype(np.float64), 1e-20))).sum(1)).astype(np.float32)

    assert_reference_checks(CreateOperator("CrossEntropy", ["X", "T"], ["Y"]), [x, t], reference)


def test_cross_entropy_gradient_and_errors():
    rng = np.random.default_rng(5)
    x, t = rng.uniform(0.2, 1.0, (3, 4)), rng.uniform(0, 1, (3, 4))
    op = CreateOperator("CrossEntropy", ["X", "T"], ["Y"])
    assert_gradient_checks(op, [x, t], 0)
    ws = Workspace()
    ws.feed_blob("X", x)
    ws.feed_blob("T", t[:, :2])
    with pytest.raises(ShapeError, match=r"CrossEntropy.*'T'.*\[3, 2\].*\[3, 4\]"):
        create_operator(op, ws).run()


# -- SigmoidCrossEntropyWithLogits ---------------------------------------------------------------


def _sigmoid_xent_ref(x, t):
    x64 = x.astype(np.float64)
    p = 1 / (1 + np.exp(-x64))
    loss = -(t * np.log(p) + (1 - t) * np.log(1 - p))
    return loss.mean(-1).astype(x.dtype)


@settings(max_examples=20)
@given(dims=st.lists(small, min_size=1, max_size=3), data=st.data())
def test_sigmoid_cross_entropy_with_logits(dims, data):
    x = data.draw(arrays(tuple(dims), np.float32, elements=logit_values))
    t = data.draw(arrays(tuple(dims), np.float32, elements=st.floats(0, 1, width=32)))
    op = CreateOperator("SigmoidCrossEntropyWithLogits", ["X", "T"], ["Y"])
    assert_reference_checks(op, [x, t], _sigmoid_xent_ref)


def test_sigmoid_cross_entropy_gradient_stability_and_errors():
    rng = np.random.default_rng(6)
    x, t = rng.standard_normal((2, 3, 4)), rng.uniform(0, 1, (2, 3, 4))
    op = CreateOperator("SigmoidCrossEntropyWithLogits", ["X", "T"], ["Y"])
    ops, _ = get_gradient_for_op(op, ["Y_grad"])
    assert list(ops[0].input) == ["Y_grad", "X", "T"]
    assert_gradient_checks(op, [x, t], 0)
    ws = Workspace()
    ws.feed_blob("X", np.array([[-200.0, 200.0]], np.float32))
    ws.feed_blob("T", np.array([[0.0, 1.0]], np.float32))
    create_operator(op, ws).run()
    np.testing.assert_allclose(ws.fetch_blob("Y"), [0.0], atol=1e-6)
    both = dict(log_D_trick=1, unjoined_lr_loss=1)
    with pytest.raises(ArgumentError, match="log_D_trick and unjoined_lr_loss"):
        create_operator(CreateOperator("SigmoidCrossEntropyWithLogits", ["X", "T"], ["Y"], **both), ws)


def _log_sigmoid(x):
    return -np.logaddexp(0, -x)


@pytest.mark.parametrize("mode", ["log_D_trick", "unjoined_lr_loss"])
def test_sigmoid_cross_entropy_modes(mode):
    rng = np.random.default_rng(7)
    x = rng.uniform(-3, 3, (3, 5))
    t = rng.integers(0, 2, (3, 5)).astype(np.float64)
    op = CreateOperator("SigmoidCrossEntropyWithLogits", ["X", "T"], ["Y"], **{mode: 1})
    if mode == "log_D_trick":
        # the generator's trick: maximise log D(x) for positives
        loss = -(2 * t - 1) * _log_sigmoid(x)
    else:
        # positives keep only -x (their log-partition term is dropped); negatives the usual softplus
        loss = -x * t + (1 - t) * np.logaddexp(0, x)
    assert_reference_checks(op, [x, t], lambda x, t: [loss.mean(axis=-1)])
    ops, _ = get_gradient_for_op(op, ["Y_grad"])
    assert any(a.name == mode and a.i == 1 for a in ops[0].arg)
    assert_gradient_checks(op, [x, t], 0)


# -- AveragedLoss --------------------------------------------------------------------------------


@settings(max_examples=15)
@given(dims=st.lists(small, min_size=1, max_size=3), data=st.data())
def test_averaged_loss(dims, data):
    x = data.draw(arrays(tuple(dims), np.float32))
    out = assert_reference_checks(
        CreateOperator("AveragedLoss", ["X"], ["loss"]), [x], lambda x: np.array(x.astype(np.float64).mean(), x.dtype)
    )
    assert out[0].shape == ()


def test_averaged_loss_gradient():
    x = np.random.default_rng(7).standard_normal((3, 2))
    op = CreateOperator("AveragedLoss", ["X"], ["loss"])
    ops, _ = get_gradient_for_op(op, ["loss_grad"])
    assert list(ops[0].input) == ["X", "loss_grad"]
    assert_gradient_checks(op, [x], 0)


# -- Accuracy -----------------------------------------------------------------------------------


def _accuracy_ref(top_k):
    def reference(x, labels):
        n, d = x.shape
        correct = 0
        for i in range(n):
            order = sorted(range(d), key=lambda j: (-x[i, j], j))  # stable: ties rank the lower index first
            correct += labels[i] in order[:top_k]
        return np.array(correct / n, np.float32)

    return reference


@settings(max_examples=25)
@given(n=small, d=small, top_k=st.integers(1, 3), data=st.data())
def test_accuracy(n, d, top_k, data):
    x = data.draw(arrays((n, d), np.float32, elements=st.sampled_from([0.0, 0.25, 0.5, 1.0])))  # many ties
    labels = data.draw(arrays((n,), np.int32, elements=st.integers(0, d - 1)))
    op = CreateOperator("Accuracy", ["X", "L"], ["acc"], top_k=top_k)
    out = assert_reference_checks(op, [x, labels], _accuracy_ref(top_k))
    assert out[0].dtype == np.float32 and out[0].shape == ()


def test_accuracy_has_no_gradient_and_checks_args():
    assert get_schema("Accuracy").gradient is NO_GRADIENT
    with pytest.raises(ArgumentError, match="top_k"):
        create_operator(CreateOperator("Accuracy", ["X", "L"], ["acc"], top_k=0), Workspace())
    ws = Workspace()
    ws.feed_blob("X", np.ones((2, 3), np.float32))
    ws.feed_blob("L", np.array([0, 5], np.int32))
    with pytest.raises(ShapeError, match=r"Accuracy.*'L'.*out of range"):
        create_operator(CreateOperator("Accuracy", ["X", "L"], ["acc"]), ws).run()
