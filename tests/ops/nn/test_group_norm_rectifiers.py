"""GroupNorm, AffineChannel, ChannelStats, ChannelBackpropStats, ReluN, ThresholdedRelu, Mish
and Glu against numpy references, with gradient checks."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.errors import FrameworkError, GradientError
from framework.ops import get_gradient_for_op
from framework.ops.testing import arrays, assert_gradient_checks, assert_reference_checks, run_op_on, shapes


@st.composite
def nchw(draw, min_c=1):
    g = draw(st.integers(1, 3))
    c = g * draw(st.integers(1, 2))
    shape = (draw(st.integers(1, 2)), max(c, min_c)) + tuple(draw(st.lists(st.integers(1, 3), max_size=2)))
    return g, draw(arrays(shape, np.float64, elements=st.floats(-2, 2)))


def ref_group_norm(x, gamma, beta, g, eps, order):
    if order == "NHWC":
        x = np.moveaxis(x, -1, 1)
    n, c = x.shape[:2]
    xr = x.reshape(n, g, -1)
    mu, var = xr.mean(axis=2), xr.var(axis=2)
    inv_std = 1 / np.sqrt(var + eps)
    y = ((xr - mu[..., None]) * inv_std[..., None]).reshape(x.shape)
    y = y * gamma.reshape((1, c) + (1,) * (x.ndim - 2)) + beta.reshape((1, c) + (1,) * (x.ndim - 2))
    if order == "NHWC":
        y = np.moveaxis(y, 1, -1)
    return [y, mu, inv_std]


@pytest.mark.parametrize("order", ["NCHW", "NHWC"])
@given(case=nchw(), data=st.data())
@settings(max_examples=15, deadline=None)
def test_group_norm(order, case, data):
    g, x = case
    if order == "NHWC":
        x = np.moveaxis(x, 1, -1).copy()
    c = x.shape[1] if order == "NCHW" else x.shape[-1]
    gamma = data.draw(arrays((c,), np.float64, elements=st.floats(0.5, 2)))
    beta = data.draw(arrays((c,), np.float64))
    op = CreateOperator("GroupNorm", ["X", "gamma", "beta"], ["Y", "mu", "sig"], group=g, epsilon=1e-3, order=order)
    assert_reference_checks(op, [x, gamma, beta], lambda x, ga, be: ref_group_norm(x, ga, be, g, 1e-3, order))
    for i in range(3):
        assert_gradient_checks(op, [x, gamma, beta], i, threshold=2e-3)


def test_group_norm_matches_caffe2_golden_output():
    """Caffe2's recorded output for group_norm_op_test.test_group_norm_2d: the third output is the inverse std."""
    x = np.array([[[[0.8793073, 1.3300678], [0.9959529, 0.16048086]]]], np.float32)
    gamma, beta = np.array([0.891247], np.float32), np.array([0.29722074], np.float32)
    op = CreateOperator("GroupNorm", ["X", "gamma", "beta"], ["Y", "mean", "inv_std"], group=1, epsilon=1e-5)
    y, mean, inv_std = run_op_on(op, [x, gamma, beta])
    golden_y = np.array([[[[0.37631467, 1.3181276], [0.6200324, -1.1255921]]]], np.float32)
    np.testing.assert_allclose(y, golden_y, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(mean, [[0.84145224]], rtol=1e-6)
    np.testing.assert_allclose(inv_std, [[2.3443413]], rtol=1e-5)


def test_group_norm_one_output_form_has_no_gradient():
    x, gamma, beta = np.ones((1, 2, 2), np.float32), np.ones(2, np.float32), np.zeros(2, np.float32)
    op = CreateOperator("GroupNorm", ["X", "gamma", "beta"], ["Y"], group=1)
    np.testing.assert_allclose(run_op_on(op, [x, gamma, beta])[0], np.zeros_like(x), atol=1e-6)
    with pytest.raises(FrameworkError, match="GroupNorm.*inv_std"):
        get_gradient_for_op(op, ["Y_grad"])


def test_group_norm_errors():
    with pytest.raises(FrameworkError, match="GroupNorm.*group 3"):
        run_op_on(
            CreateOperator("GroupNorm", ["X", "g", "b"], ["Y", "m", "s"], group=3),
            [np.ones((1, 4, 2, 2), np.float32), np.ones(4, np.float32), np.ones(4, np.float32)],
        )


@pytest.mark.parametrize("order", ["NCHW", "NHWC"])
@pytest.mark.parametrize("learnable", [0, 1])
@given(case=nchw(), data=st.data())
@settings(max_examples=10, deadline=None)
def test_affine_channel(order, learnable, case, data):
    _, x = case
    if order == "NHWC":
        x = np.moveaxis(x, 1, -1).copy()
    ca = 1 if order == "NCHW" else x.ndim - 1
    c = x.shape[ca]
    s, b = data.draw(arrays((c,), np.float64)), data.draw(arrays((c,), np.float64))
    shape = [1] * x.ndim
    shape[ca] = c
    op = CreateOperator("AffineChannel", ["X", "s", "b"], ["Y"], order=order, is_learnable=learnable)
    assert_reference_checks(op, [x, s, b], lambda x, s, b: x * s.reshape(shape) + b.reshape(shape))
    assert_reference_checks(
        CreateOperator("AffineChannel", ["X", "s", "b"], ["X"], order=order),
        [x, s, b],
        lambda x, s, b: x * s.reshape(shape) + b.reshape(shape),
    )
    assert_gradient_checks(op, [x, s, b], 0)
    if learnable:
        assert_gradient_checks(op, [x, s, b], 1)
        assert_gradient_checks(op, [x, s, b], 2)
    ops, gi = get_gradient_for_op(op, ["Y_grad"])
    assert list(ops[0].input) == (["Y_grad", "X", "s"] if learnable else ["Y_grad", "s"])


@pytest.mark.parametrize("order", ["NCHW", "NHWC"])
@given(case=nchw())
@settings(max_examples=10, deadline=None)
def test_channel_stats(order, case):
    _, x = case
    if order == "NHWC":
        x = np.moveaxis(x, 1, -1).copy()
    ca = 1 if order == "NCHW" else x.ndim - 1
    axes = tuple(a for a in range(x.ndim) if a != ca)
    op = CreateOperator("ChannelStats", ["X"], ["sum", "sumsq"], order=order)
    assert_reference_checks(op, [x], lambda x: [x.sum(axis=axes), (x * x).sum(axis=axes)])


@given(case=nchw(), data=st.data())
@settings(max_examples=10, deadline=None)
def test_channel_backprop_stats(case, data):
    _, x = case
    c = x.shape[1]
    mean, inv = data.draw(arrays((c,), np.float64)), data.draw(arrays((c,), np.float64, elements=st.floats(0.5, 2)))
    dy = data.draw(arrays(x.shape, np.float64))
    shape = (1, c) + (1,) * (x.ndim - 2)
    axes = tuple(a for a in range(x.ndim) if a != 1)

    def ref(x, m, i, dy):
        return [(dy * (x - m.reshape(shape)) * i.reshape(shape)).sum(axis=axes), dy.sum(axis=axes)]

    op = CreateOperator("ChannelBackpropStats", ["X", "m", "i", "dY"], ["ds", "db"])
    assert_reference_checks(op, [x, mean, inv, dy], ref)


# values kept off the kinks (0, and the thresholds n and alpha tested below) so central differences hold
AWAY = st.floats(-3, 3).filter(lambda v: min(abs(v), abs(v - 1.5), abs(v - 6), abs(v - 0.5), abs(v - 1.0)) > 0.05)


@given(data=st.data(), n=st.sampled_from([1.5, 6.0]))
@settings(max_examples=15, deadline=None)
def test_relu_n(data, n):
    x = data.draw(arrays(data.draw(shapes(0, 3, 0, 4)), np.float64, elements=AWAY))
    op = CreateOperator("ReluN", ["X"], ["Y"], n=n)
    assert_reference_checks(op, [x], lambda x: np.minimum(np.maximum(x, 0), n))
    assert_reference_checks(CreateOperator("ReluN", ["X"], ["X"], n=n), [x], lambda x: np.minimum(np.maximum(x, 0), n))
    if x.size:
        assert_gradient_checks(op, [x], 0)


@given(data=st.data(), alpha=st.sampled_from([0.5, 1.0]))
@settings(max_examples=15, deadline=None)
def test_thresholded_relu(data, alpha):
    x = data.draw(arrays(data.draw(shapes(1, 3, 1, 4)), np.float64, elements=AWAY))
    op = CreateOperator("ThresholdedRelu", ["X"], ["Y"], alpha=alpha)
    assert_reference_checks(op, [x], lambda x: np.where(x > alpha, x, 0))
    assert_gradient_checks(op, [x], 0)


@given(data=st.data())
@settings(max_examples=15, deadline=None)
def test_mish(data):
    x = data.draw(arrays(data.draw(shapes(0, 3, 0, 4)), np.float64, elements=st.floats(-30, 30)))
    op = CreateOperator("Mish", ["X"], ["Y"])
    assert_reference_checks(op, [x], lambda x: x * np.tanh(np.logaddexp(0, x)))
    if x.size:
        assert_gradient_checks(op, [np.clip(x, -4, 4)], 0, threshold=1e-3)
    ops, _ = get_gradient_for_op(op, ["Y_grad"])
    assert [(o.type, list(o.input)) for o in ops] == [("MishGradient", ["X", "Y", "Y_grad"])]
    with pytest.raises(GradientError):
        get_gradient_for_op(CreateOperator("Mish", ["X"], ["X"]), ["X_grad"])


@given(data=st.data())
@settings(max_examples=15, deadline=None)
def test_glu(data):
    shape = list(data.draw(shapes(1, 3, 1, 3)))
    dim = data.draw(st.integers(-1, len(shape) - 1))
    d = dim if dim >= 0 else len(shape) - 1
    shape[d] *= 2
    x = data.draw(arrays(tuple(shape), np.float32))

    def ref(x):
        a, b = np.split(x.astype(np.float64), 2, axis=d)
        return (a / (1 + np.exp(-b))).astype(np.float32)

    assert_reference_checks(CreateOperator("Glu", ["X"], ["Y"], dim=dim), [x], ref)


def test_glu_odd_dim_and_no_gradient():
    with pytest.raises(FrameworkError, match="Glu.*odd"):
        run_op_on(CreateOperator("Glu", ["X"], ["Y"]), [np.ones((2, 3), np.float32)])
    with pytest.raises(GradientError):
        get_gradient_for_op(CreateOperator("Glu", ["X"], ["Y"]), ["Y_grad"])
