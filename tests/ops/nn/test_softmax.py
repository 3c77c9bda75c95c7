"""Softmax, LogSoftmax and SoftmaxWithLoss against float64 numpy references written here."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.errors import ArgumentError, ShapeError, TypeMismatchError
from framework.memory.tensor import Tensor
from framework.memory.workspace import Workspace
from framework.ops import create_operator, get_gradient_for_op
from framework.ops.testing import arrays, assert_gradient_checks, assert_reference_checks

small = st.integers(1, 5)
logit_values = st.floats(-5, 5, width=32)


def _softmax_ref(x, axis=1, log=False):
    ax = axis % x.ndim
    n = int(np.prod(x.shape[:ax]))
    x2 = x.reshape(n, -1).astype(np.float64)
    z = x2 - x2.max(1, keepdims=True)
    e = np.exp(z)
    out = z - np.log(e.sum(1, keepdims=True)) if log else e / e.sum(1, keepdims=True)
    return out.reshape(x.shape).astype(x.dtype)


# -- Softmax / LogSoftmax --------------------------------------------------------------------------


@pytest.mark.parametrize("op_type", ["Softmax", "LogSoftmax"])
@settings(max_examples=20)
@given(dims=st.lists(small, min_size=1, max_size=4), data=st.data())
def test_softmax(op_type, dims, data):
    x = data.draw(arrays(tuple(dims), np.float32, elements=logit_values))
    axis = data.draw(st.integers(-len(dims), len(dims) - 1))
    op = CreateOperator(op_type, ["X"], ["Y"], axis=axis)
    assert_reference_checks(op, [x], lambda x: _softmax_ref(x, axis, op_type == "LogSoftmax"))


@pytest.mark.parametrize("op_type", ["Softmax", "LogSoftmax"])
def test_softmax_in_place_large_values_and_empty(op_type):
    x = np.array([[1000.0, 1001.0, 999.0], [-1e4, 0.0, 1e4]], np.float32)
    out = assert_reference_checks(
        CreateOperator(op_type, ["X"], ["X"]), [x], lambda x: _softmax_ref(x, 1, op_type == "LogSoftmax")
    )
    assert np.all(np.isfinite(out[0]))
    assert_reference_checks(CreateOperator(op_type, ["X"], ["Y"]), [np.zeros((0, 4), np.float32)], lambda x: x)


@pytest.mark.parametrize("op_type", ["Softmax", "LogSoftmax"])
@pytest.mark.parametrize("in_place", [False, True])
def test_softmax_reruns_on_new_values_and_shapes(op_type, in_place):
    """Later runs of one op (the closure bound to the last run's arrays): values changed in the input's
    own array, a new array of the same shape, a new shape, a column count of zero."""
    rng = np.random.default_rng(3)
    ws = Workspace()
    log = op_type == "LogSoftmax"
    op = create_operator(CreateOperator(op_type, ["X"], ["X" if in_place else "Y"], axis=2), ws)
    out = "X" if in_place else "Y"
    x = None
    for shape in [(2, 3, 4), (2, 3, 4), "same array", (3, 2, 5), (2, 1, 0), (2, 3, 4)]:
        if shape == "same array":
            x = rng.standard_normal(x.shape).astype(np.float32)
            ws.get_blob("X").get(Tensor).data()[...] = x  # new values in the array the op ran on
        else:
            x = rng.standard_normal(shape).astype(np.float32)
            ws.feed_blob("X", x)
        op.run()
        want = _softmax_ref(x, 2, log) if x.size else x
        np.testing.assert_allclose(ws.fetch_blob(out), want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("op_type", ["Softmax", "LogSoftmax"])
@pytest.mark.parametrize("axis", [1, 2])
def test_softmax_gradient(op_type, axis):
    x = np.random.default_rng(0).standard_normal((2, 3, 2))
    op = CreateOperator(op_type, ["X"], ["Y"], axis=axis)
    ops, _ = get_gradient_for_op(op, ["Y_grad"])
    assert ops[0].type == op_type + "Gradient" and list(ops[0].input) == ["Y", "Y_grad"]
    assert_gradient_checks(op, [x], 0)


# -- SoftmaxWithLoss -----------------------------------------------------------------------------


def _swl_ref(scale=1.0, label_prob=False, axis=1, average_by_batch_size=False):
    def reference(x, labels, weights=None):
        ax = axis % x.ndim
        n = int(np.prod(x.shape[:ax]))
        x2 = x.reshape(n, -1).astype(np.float64)
        d = x2.shape[1]
        z = x2 - x2.max(1, keepdims=True)
        logp = z - np.log(np.exp(z).sum(1, keepdims=True))
        if label_prob:
            per_row = -(labels.reshape(n, d) * np.log(np.maximum(np.exp(logp), 1e-20))).sum(1)
        else:
            per_row = -logp[np.arange(n), labels.reshape(n)]
        w = np.ones(n) if weights is None else weights.astype(np.float64)
        total = n if (weights is None or average_by_batch_size) else w.sum()
        loss = scale * (per_row * w).sum() / total if total else 0.0
        return [np.exp(logp).reshape(x.shape).astype(x.dtype), np.array(loss, x.dtype)]

    return reference


@settings(max_examples=25)
@given(n=small, d=small, weighted=st.booleans(), scale=st.sampled_from([1.0, 0.5, 3.0]), data=st.data())
def test_softmax_with_loss_int_labels(n, d, weighted, scale, data):
    x = data.draw(arrays((n, d), np.float32, elements=logit_values))
    labels = data.draw(arrays((n,), np.int32, elements=st.integers(0, d - 1)))
    inputs = [x, labels]
    names = ["X", "labels"]
    if weighted:
        inputs.append(data.draw(arrays((n,), np.float32, elements=st.floats(0.125, 2.0, width=32))))
        names.append("w")
    op = CreateOperator("SoftmaxWithLoss", names, ["P", "loss"], scale=scale)
    assert_reference_checks(op, inputs, _swl_ref(scale))


@settings(max_examples=15)
@given(n=small, d=small, data=st.data())
def test_softmax_with_loss_label_prob(n, d, data):
    x = data.draw(arrays((n, d), np.float64, elements=logit_values))
    raw = data.draw(arrays((n, d), np.float64, elements=st.floats(0.01, 1.0)))
    probs = raw / raw.sum(1, keepdims=True)
    op = CreateOperator("SoftmaxWithLoss", ["X", "T"], ["P", "loss"], label_prob=1)
    assert_reference_checks(op, [x, probs], _swl_ref(label_prob=True))


def test_softmax_with_loss_axis_and_label_shapes():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    labels = rng.integers(0, 4, (2, 3, 1)).astype(np.int32)  # size_from_dim(axis) == 1 form
    op = CreateOperator("SoftmaxWithLoss", ["X", "L"], ["P", "loss"], axis=2)
    out = assert_reference_checks(op, [x, labels], _swl_ref(axis=2))
    assert out[0].shape == (2, 3, 4) and out[1].shape == ()


def test_softmax_with_loss_caffe2_doc_example():
    """The example in Caffe2's operator documentation (scale=5)."""
    x = np.array([[0.1, 0.4, 0.7, 1.5, 0.2]], np.float32)
    ws = Workspace()
    ws.feed_blob("logits", x)
    ws.feed_blob("labels", np.array([4], np.int32))
    create_operator(CreateOperator("SoftmaxWithLoss", ["logits", "labels"], ["sm", "loss"], scale=5.0), ws).run()
    np.testing.assert_allclose(
        ws.fetch_blob("sm"), [[0.10715417, 0.144643, 0.19524762, 0.4345316, 0.11842369]], rtol=1e-5
    )
    np.testing.assert_allclose(ws.fetch_blob("loss"), 10.667433, rtol=1e-5)


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("label_prob", [False, True])
def test_softmax_with_loss_gradient(weighted, label_prob):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((3, 4))
    if label_prob:
        t = rng.uniform(0.1, 1, (3, 4))
        t /= t.sum(1, keepdims=True)
    else:
        t = np.array([0, 3, 1], np.int32)
    ins, names = [x, t], ["X", "T"]
    if weighted:
        ins.append(np.array([0.5, 2.0, 1.0]))
        names.append("W")
    op = CreateOperator("SoftmaxWithLoss", names, ["P", "loss"], scale=2.0, label_prob=int(label_prob))
    ops, gi = get_gradient_for_op(op, [None, "loss_grad"])
    expected = ["X", "T"] + (["W"] if weighted else []) + ["P", "loss_grad"]
    assert list(ops[0].input) == expected and gi[0] == "X_grad"
    assert_gradient_checks(op, ins, 0, outputs_with_grads=(1,))


def test_softmax_with_loss_gradient_only_loss_recomputes_softmax():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 3)).astype(np.float32)
    ws = Workspace()
    ws.feed_blob("X", x)
    ws.feed_blob("T", np.array([1, 2], np.int32))
    ws.feed_blob("P", np.zeros((2, 3), np.float32))  # clobbered softmax buffer
    ws.feed_blob("dl", np.array(1.0, np.float32))
    g = CreateOperator("SoftmaxWithLossGradient", ["X", "T", "P", "dl"], ["dX"], only_loss=True)
    create_operator(g, ws).run()
    p = _softmax_ref(x.astype(np.float64))
    p[[0, 1], [1, 2]] -= 1
    np.testing.assert_allclose(ws.fetch_blob("dX"), p / 2, rtol=1e-5, atol=1e-6)


def test_softmax_with_loss_errors():
    ws = Workspace()
    ws.feed_blob("X", np.zeros((2, 3), np.float32))
    ws.feed_blob("L", np.array([0, 3], np.int32))
    with pytest.raises(ShapeError, match=r'SoftmaxWithLoss "sl".*label 3 in \'L\'.*\[0, 3\)'):
        create_operator(CreateOperator("SoftmaxWithLoss", ["X", "L"], ["P", "l"], name="sl"), ws).run()
    ws.feed_blob("L", np.array([0, 1, 2], np.int32))
    with pytest.raises(ShapeError, match=r"labels 'L' \[3\].*2 values"):
        create_operator(CreateOperator("SoftmaxWithLoss", ["X", "L"], ["P", "l"]), ws).run()
    ws.feed_blob("L", np.array([0.0, 1.0], np.float32))
    with pytest.raises(TypeMismatchError, match="integer class indices"):
        create_operator(CreateOperator("SoftmaxWithLoss", ["X", "L"], ["P", "l"]), ws).run()
    ws.feed_blob("L", np.full((2, 3), 0.5, np.float32))
    with pytest.raises(ShapeError, match="sum to 1"):
        create_operator(CreateOperator("SoftmaxWithLoss", ["X", "L"], ["P", "l"], label_prob=1), ws).run()
    with pytest.raises(ArgumentError, match="scale"):
        create_operator(CreateOperator("SoftmaxWithLoss", ["X", "L"], ["P", "l"], scale=-1.0), ws)
    with pytest.raises(ArgumentError, match="NCHW"):
        create_operator(CreateOperator("SoftmaxWithLoss", ["X", "L"], ["P", "l"], order="NHWC"), ws)
