"""SpatialBN, LRN, InstanceNorm, LayerNorm (and C10LayerNorm_DontUseThisOpYet) and Dropout against loop-based
numpy references."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator, DeviceOption
from framework.errors import ArgumentError, GradientError, SchemaError, ShapeError
from framework.memory.workspace import Workspace
from framework.ops import create_operator, get_gradient_for_op
from framework.ops.testing import assert_gradient_checks, assert_reference_checks, feed_inputs

orders = st.sampled_from(["NCHW", "NHWC"])


def channel_axis(order, ndim):
    return 1 if order == "NCHW" else ndim - 1


@st.composite
def bn_inputs(draw, min_ndim=2):
    order = draw(orders)
    ndim = draw(st.integers(min_ndim, 4))
    shape = [draw(st.integers(1, 4)) for _ in range(ndim)]
    shape[0] = draw(st.integers(2, 3))
    seed = draw(st.integers(0, 2**31 - 1))
    return order, tuple(shape), np.random.default_rng(seed)


@given(data=bn_inputs())
@settings(max_examples=30)
def test_spatial_bn_test_mode(data):
    order, shape, rng = data
    ca = channel_axis(order, len(shape))
    c = shape[ca]
    x = rng.standard_normal(shape).astype(np.float32)
    scale, bias, mean = (rng.standard_normal(c).astype(np.float32) for _ in range(3))
    var = rng.uniform(0.5, 2, c).astype(np.float32)

    def ref(x, scale, bias, mean, var):
        y = np.empty_like(x)
        for k in range(c):
            sl = tuple(k if a == ca else slice(None) for a in range(x.ndim))
            y[sl] = (x[sl] - mean[k]) / np.sqrt(var[k] + 1e-5) * scale[k] + bias[k]
        return y

    op = CreateOperator("SpatialBN", ["X", "s", "b", "m", "v"], ["Y"], is_test=1, order=order)
    ins = [x, scale, bias, mean, var]
    assert_reference_checks(op, ins, ref)
    for i in range(3):
        assert_gradient_checks(op, ins, i, stepsize=1e-3, threshold=1e-3)


@given(data=bn_inputs(), momentum=st.sampled_from([0.9, 0.5]))
@settings(max_examples=30)
def test_spatial_bn_training(data, momentum):
    order, shape, rng = data
    ca = channel_axis(order, len(shape))
    c = shape[ca]
    x = rng.standard_normal(shape).astype(np.float32)
    scale, bias, rm = (rng.standard_normal(c).astype(np.float32) for _ in range(3))
    rv = rng.uniform(0.5, 2, c).astype(np.float32)

    def ref(x, scale, bias, rm, rv):
        y = np.empty_like(x)
        outs = [np.empty(c, np.float32) for _ in range(4)]
        for k in range(c):
            sl = tuple(k if a == ca else slice(None) for a in range(x.ndim))
            xs = x[sl].astype(np.float64)
            mu, var = xs.mean(), xs.var()
            n = xs.size
            y[sl] = (xs - mu) / np.sqrt(var + 1e-5) * scale[k] + bias[k]
            outs[0][k] = rm[k] * momentum + mu * (1 - momentum)
            outs[1][k] = rv[k] * momentum + var * n / max(n - 1, 1) * (1 - momentum)
            outs[2][k] = mu
            outs[3][k] = 1 / np.sqrt(var + 1e-5)
        return [y] + outs

    op = CreateOperator(
        "SpatialBN", ["X", "s", "b", "rm", "rv"], ["Y", "rm", "rv", "sm", "siv"], order=order, momentum=momentum
    )
    ins = [x, scale, bias, rm, rv]
    assert_reference_checks(op, ins, ref, threshold=1e-3)
    for i in range(3):
        assert_gradient_checks(op, ins, i, stepsize=1e-5, threshold=2e-3)


def test_spatial_bn_in_place_and_gradient_maker():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 3, 2, 2)).astype(np.float32)
    op = CreateOperator("SpatialBN", ["X", "s", "b", "rm", "rv"], ["X", "rm", "rv", "sm", "siv"])
    ws = Workspace()
    feed_inputs(
        ws, op, [x, np.ones(3, np.float32), np.zeros(3, np.float32), np.zeros(3, np.float32), np.ones(3, np.float32)]
    )
    create_operator(op, ws).run()
    y = ws.fetch_blob("X")
    np.testing.assert_allclose(y.mean(axis=(0, 2, 3)), 0, atol=1e-5)
    ops, g_in = get_gradient_for_op(op, ["X_grad", None, None, None, None])
    assert list(ops[0].input) == ["X", "s", "X_grad", "sm", "siv"]
    assert list(ops[0].output) == ["X_grad", "s_grad", "b_grad"]
    test_op = CreateOperator("SpatialBN", ["X", "s", "b", "m", "v"], ["Y"], is_test=1)
    ops, _ = get_gradient_for_op(test_op, ["Y_grad"])
    assert list(ops[0].input) == ["X", "s", "Y_grad", "m", "v"]


def test_spatial_bn_errors():
    x = np.zeros((2, 3, 2, 2), np.float32)
    v = np.ones(3, np.float32)
    with pytest.raises(SchemaError, match="same blob"):
        CreateOperator("SpatialBN", ["X", "s", "b", "rm", "rv"], ["Y", "a", "b2", "c", "d"]) and create_operator(
            CreateOperator("SpatialBN", ["X", "s", "b", "rm", "rv"], ["Y", "a", "b2", "c", "d"]), Workspace()
        )
    with pytest.raises(ArgumentError, match="is_test"):
        create_operator(CreateOperator("SpatialBN", ["X", "s", "b", "m", "v"], ["Y"]), Workspace())
    ws = Workspace()
    op = CreateOperator("SpatialBN", ["X", "s", "b", "m", "v"], ["Y"], is_test=1, name="bn")
    feed_inputs(ws, op, [x, v, v, v, np.ones(4, np.float32)])
    with pytest.raises(ShapeError, match=r"bn.*'v'.*\(3,\)"):
        create_operator(op, ws).run()


@pytest.mark.parametrize("n", [1, 3])
@pytest.mark.parametrize("op_type", ["SpatialBN", "SpatialBNRelu"])
def test_spatial_bn_reads_a_channel_prefix_with_in_channels(n, op_type):
    """in_channels (this framework's, test mode): the op normalizes X's first in_channels channels (a
    DenseNet block's buffer, strided over images when N > 1) as it would that slice copied out."""
    from framework.ops.inference import infer_op
    from framework.ops.schema import TensorSpec

    rng = np.random.default_rng(n)
    x = rng.standard_normal((n, 7, 5, 6)).astype(np.float32)
    c = 4
    scale, bias, mean = (rng.standard_normal(c).astype(np.float32) for _ in range(3))
    var = rng.uniform(0.5, 2, c).astype(np.float32)
    want = (x[:, :c] - mean[:, None, None]) / np.sqrt(var[:, None, None] + 1e-5) * scale[:, None, None]
    want += bias[:, None, None]
    if op_type == "SpatialBNRelu":
        want = np.maximum(want, 0)
    op = CreateOperator(op_type, ["X", "s", "b", "m", "v"], ["Y"], is_test=1, in_channels=c)
    ws = Workspace()
    feed_inputs(ws, op, [x, scale, bias, mean, var])
    create_operator(op, ws).run()
    got = ws.fetch_blob("Y")
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    spec = infer_op(op, [TensorSpec(x.shape, np.float32)] + [TensorSpec((c,), np.float32)] * 4)
    assert tuple(spec[0].shape) == got.shape
    np.testing.assert_array_equal(ws.fetch_blob("X"), x)  # X itself untouched
    with pytest.raises(GradientError, match="in_channels" if op_type == "SpatialBN" else "not be differentiated"):
        get_gradient_for_op(op, ["Y_grad"])


def test_spatial_bn_in_channels_errors():
    v = np.ones(4, np.float32)
    training = CreateOperator("SpatialBN", ["X", "s", "b", "m", "v"], ["Y", "m", "v", "sm", "siv"], in_channels=4)
    nhwc = CreateOperator("SpatialBN", ["X", "s", "b", "m", "v"], ["Y"], is_test=1, order="NHWC", in_channels=4)
    for op in (training, nhwc):
        with pytest.raises(ArgumentError, match="needs is_test=1, order NCHW"):
            create_operator(op, Workspace())
    with pytest.raises(ArgumentError, match="in place"):
        op = CreateOperator("SpatialBN", ["X", "s", "b", "m", "v"], ["X"], is_test=1, in_channels=4)
        create_operator(op, Workspace())
    ws = Workspace()
    op = CreateOperator("SpatialBN", ["X", "s", "b", "m", "v"], ["Y"], is_test=1, in_channels=4, name="bn")
    feed_inputs(ws, op, [np.zeros((1, 3, 2, 2), np.float32), v, v, v, v])
    with pytest.raises(ShapeError, match=r"bn.*in_channels 4 exceeds the channels of 'X' \(1, 3, 2, 2\)"):
        create_operator(op, ws).run()


# -- LRN ---------------------------------------------------------------------------------------
@given(data=bn_inputs(min_ndim=3), size=st.sampled_from([1, 3, 5]), with_scale=st.booleans())
@settings(max_examples=30)
def test_lrn(data, size, with_scale):
    order, shape, rng = data
    ca = channel_axis(order, len(shape))
    c = shape[ca]
    alpha, beta, bias = 0.3, 0.75, 1.5
    x = rng.standard_normal(shape).astype(np.float32)
    pre = (size - 1) // 2

    def ref(x):
        sc = np.zeros_like(x, dtype=np.float64)
        for k in range(c):
            out = tuple(k if a == ca else slice(None) for a in range(x.ndim))
            for j in range(k - pre, k - pre + size):
                if 0 <= j < c:
                    src = tuple(j if a == ca else slice(None) for a in range(x.ndim))
                    sc[out] += x[src].astype(np.float64) ** 2
        sc = bias + alpha / size * sc
        y = x * sc ** (-beta)
        return [y.astype(np.float32), sc.astype(np.float32)] if with_scale else y.astype(np.float32)

    outs = ["Y", "scale"] if with_scale else ["Y"]
    op = CreateOperator("LRN", ["X"], outs, size=size, alpha=alpha, beta=beta, bias=bias, order=order)
    assert_reference_checks(op, [x], ref)
    assert_gradient_checks(op, [x], 0, stepsize=1e-3, threshold=1e-3)


def test_lrn_errors():
    with pytest.raises(ArgumentError, match="size"):
        create_operator(CreateOperator("LRN", ["X"], ["Y"]), Workspace())
    with pytest.raises(ArgumentError, match="odd"):
        create_operator(CreateOperator("LRN", ["X"], ["Y"], size=4), Workspace())


# -- InstanceNorm ------------------------------------------------------------------------------
@given(data=bn_inputs(min_ndim=3), n_out=st.sampled_from([1, 3]))
@settings(max_examples=30)
def test_instance_norm(data, n_out):
    order, shape, rng = data
    ca = channel_axis(order, len(shape))
    c = shape[ca]
    x = rng.standard_normal(shape).astype(np.float32)
    scale, bias = (rng.standard_normal(c).astype(np.float32) for _ in range(2))

    def ref(x, scale, bias):
        y = np.empty_like(x)
        mean = np.empty((shape[0], c), np.float32)
        inv = np.empty((shape[0], c), np.float32)
        for n in range(shape[0]):
            for k in range(c):
                xs = np.take(x[n], k, axis=ca - 1).astype(np.float64)
                mu, var = xs.mean(), xs.var()
                sl = (n,) + tuple(k if a == ca else slice(None) for a in range(1, x.ndim))
                y[sl] = (xs - mu) / np.sqrt(var + 1e-5) * scale[k] + bias[k]
                mean[n, k], inv[n, k] = mu, 1 / np.sqrt(var + 1e-5)
        return [y, mean, inv][:n_out]

    op = CreateOperator("InstanceNorm", ["X", "s", "b"], ["Y", "mean", "inv"][:n_out], order=order)
    assert_reference_checks(op, [x, scale, bias], ref, threshold=1e-3)
    for i in range(3):
        assert_gradient_checks(op, [x, scale, bias], i, stepsize=1e-5, threshold=2e-3)


# -- LayerNorm ---------------------------------------------------------------------------------
@given(shape=st.lists(st.integers(1, 4), min_size=2, max_size=4), data=st.data(), affine=st.booleans())
@settings(max_examples=30)
def test_layer_norm(shape, data, affine):
    axis = data.draw(st.integers(-len(shape) + 1, len(shape) - 1))
    a = axis % len(shape)
    rng = np.random.default_rng(data.draw(st.integers(0, 100)))
    x = rng.standard_normal(shape).astype(np.float32)
    inner = shape[a:]
    gamma = rng.standard_normal(inner).astype(np.float32)
    beta = rng.standard_normal(inner).astype(np.float32)

    def ref(x, *gb):
        rows = int(np.prod(shape[:a]))
        x2 = x.reshape(rows, -1).astype(np.float64)
        y = np.empty_like(x2)
        mean, std = np.empty((rows, 1)), np.empty((rows, 1))
        for r in range(rows):
            mean[r], std[r] = x2[r].mean(), np.sqrt(x2[r].var() + 1e-5)
            y[r] = (x2[r] - mean[r]) / std[r]
        y = y.reshape(shape)
        if gb:
            y = y * gb[0] + gb[1]
        st_shape = tuple(shape[:a]) + (1,)
        return [
            y.astype(np.float32),
            mean.reshape(st_shape).astype(np.float32),
            std.reshape(st_shape).astype(np.float32),
        ]

    ins = [x, gamma, beta] if affine else [x]
    op = CreateOperator(
        "LayerNorm", ["X", "g", "b"][: len(ins)], ["Y", "mean", "std"], axis=axis, elementwise_affine=int(affine)
    )
    assert_reference_checks(op, ins, ref, threshold=1e-3)
    for i in range(len(ins)):
        assert_gradient_checks(op, ins, i, stepsize=1e-5, threshold=2e-3)
    # Caffe2 2020's c10 registration of LayerNorm: the same numbers, no gradient
    c10 = CreateOperator(
        "C10LayerNorm_DontUseThisOpYet",
        ["X", "g", "b"][: len(ins)],
        ["Y", "mean", "std"],
        axis=axis,
        elementwise_affine=int(affine),
    )
    assert_reference_checks(c10, ins, ref, threshold=1e-3)
    with pytest.raises(GradientError):
        get_gradient_for_op(c10, ["Y_grad", None, None])


# -- Dropout -----------------------------------------------------------------------------------
def test_dropout_training_mask_and_scale():
    x = np.random.default_rng(0).standard_normal((50, 40)).astype(np.float32) + 3
    op = CreateOperator("Dropout", ["X"], ["Y", "mask"], ratio=0.3, device_option=DeviceOption(random_seed=7))
    ws = Workspace()
    ws.feed_blob("X", x)
    o = create_operator(op, ws)
    o.run()
    y, mask = ws.fetch_blob("Y"), ws.fetch_blob("mask")
    assert mask.dtype == bool and abs(mask.mean() - 0.7) < 0.05
    np.testing.assert_allclose(y, x * mask / 0.7, rtol=1e-6)
    o2 = create_operator(op, Workspace())
    o2.workspace.feed_blob("X", x)
    o2.run()
    np.testing.assert_array_equal(o2.workspace.fetch_blob("mask"), mask)  # seeded: reproducible
    ops, _ = get_gradient_for_op(op, ["Y_grad", None])
    assert ops[0].type == "DropoutGrad" and list(ops[0].input) == ["Y_grad", "mask"]
    dy = np.ones_like(x)
    assert_reference_checks(ops[0], [dy, mask], lambda dy, m: dy * m / 0.7)


@given(shape=st.lists(st.integers(0, 4), max_size=3), is_test=st.booleans())
def test_dropout_test_mode_identity_and_ratio_zero_gradient(shape, is_test):
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    kw = dict(is_test=1) if is_test else dict(ratio=0.0)
    op = CreateOperator("Dropout", ["X"], ["Y", "mask"], **kw)
    assert_reference_checks(op, [x], lambda x: [x, np.ones(x.shape, bool)])
    assert_gradient_checks(op, [x], 0)
    inplace = CreateOperator("Dropout", ["X"], ["X"], is_test=1)
    assert_reference_checks(inplace, [x], lambda x: x)


def test_dropout_errors():
    with pytest.raises(ArgumentError, match="ratio"):
        create_operator(CreateOperator("Dropout", ["X"], ["Y"], ratio=1.5), Workspace())
