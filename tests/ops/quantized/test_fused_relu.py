"""ConvRelu, SpatialBNRelu and SumRelu (Caffe2's float ops with a fused Relu) against numpy references
written here: the base computation, then std::max(0, y) (a NaN becomes 0, unlike the Relu op)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.errors import GradientError, TypeMismatchError
from framework.kernels import window_jit
from framework.memory.workspace import Workspace
from framework.ops import create_operator, get_gradient_for_op
from framework.ops.testing import arrays, assert_reference_checks, shapes
from tests.ops.nn.test_conv_fusion import ref_conv


def caffe2_max0(y):
    """std::max(0.0f, y): y if 0 < y else 0 (NaN -> 0)."""
    y = np.asarray(y)
    return np.where(y > 0, y, 0).astype(y.dtype)


@given(
    n=st.integers(0, 3),
    c=st.integers(1, 4),
    m=st.integers(1, 5),
    size=st.integers(3, 8),
    k=st.sampled_from([1, 3]),
    stride=st.sampled_from([1, 2]),
    bias=st.booleans(),
    seed=st.integers(0, 2**31 - 1),
)
@settings(max_examples=30, deadline=None)
def test_conv_relu_matches_reference(n, c, m, size, k, stride, bias, seed):
    rng = np.random.default_rng(seed)
    pad = k // 2
    x = rng.standard_normal((n, c, size, size)).astype(np.float32)
    w = rng.standard_normal((m, c, k, k)).astype(np.float32)
    b = rng.standard_normal(m).astype(np.float32)
    ins = [x, w, b] if bias else [x, w]
    names = ["X", "W", "b"][: len(ins)]
    op = CreateOperator("ConvRelu", names, ["Y"], kernel=k, stride=stride, pad=pad)

    def ref(x, w, b=None):
        y = ref_conv(x, w, b if b is not None else np.zeros(m, np.float32), stride, pad, 1)
        return caffe2_max0(y.astype(np.float32))

    assert_reference_checks(op, ins, ref, threshold=1e-4, atol=1e-4)


def test_conv_relu_nhwc_and_nan():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 5, 5, 3)).astype(np.float32)
    x[0, 0, 0, 0] = np.nan
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)  # NHWC filter (M, kh, kw, C)

    def ref(x, w):
        y = ref_conv(x.transpose(0, 3, 1, 2), w.transpose(0, 3, 1, 2), np.zeros(4), 1, 1, 1)
        return caffe2_max0(y.transpose(0, 2, 3, 1).astype(np.float32))

    op = CreateOperator("ConvRelu", ["X", "W"], ["Y"], kernel=3, pad=1, order="NHWC")
    (y,) = assert_reference_checks(op, [x, w], ref, threshold=1e-4, atol=1e-4)
    assert not np.isnan(y).any()  # the NaN's windows come out 0, as Caffe2's std::max(0, y)


def _bn_ref(x, scale, bias, mean, var, eps=1e-5, keep_nan=False):
    b = (1, -1) + (1,) * (x.ndim - 2)
    y = (x.astype(np.float64) - mean.reshape(b)) / np.sqrt(var.reshape(b) + eps) * scale.reshape(b) + bias.reshape(b)
    y = y.astype(x.dtype)
    return np.where(y < 0, 0, y).astype(x.dtype) if keep_nan else caffe2_max0(y)


@pytest.mark.parametrize("jit", [True, False])
@given(shape=shapes(2, 4, 1, 5), inplace=st.booleans(), keep_nan=st.booleans(), seed=st.integers(0, 2**31 - 1))
@settings(max_examples=25, deadline=None)
def test_spatial_bn_relu_test_mode(jit, shape, inplace, keep_nan, seed):
    """Caffe2's std::max(0, y) (NaN -> 0), or with keep_nan=1 (set by the inference pass when it fuses
    SpatialBN + Relu) a separate Relu's "0 if y < 0 else y" (NaN stays), compiled and numpy paths."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape).astype(np.float32)
    if x.size:
        x.flat[0] = np.nan
    c = shape[1]
    scale, bias, mean = (rng.standard_normal(c).astype(np.float32) for _ in range(3))
    var = rng.uniform(0.1, 2.0, c).astype(np.float32)
    out = "X" if inplace else "Y"
    kw = dict(keep_nan=1) if keep_nan else {}
    op = CreateOperator("SpatialBNRelu", ["X", "s", "b", "m", "v"], [out], is_test=1, epsilon=1e-5, **kw)

    def ref(*ins):
        return _bn_ref(*ins, keep_nan=keep_nan)

    with pytest.MonkeyPatch.context() as mp:
        if not jit:
            mp.setattr(window_jit, "_kernels", None)
        (y,) = assert_reference_checks(op, [x, scale, bias, mean, var], ref, threshold=1e-4, atol=1e-5)
    assert np.isnan(y).any() == (keep_nan and x.size > 0)
    assert not (y < 0).any()


def test_spatial_bn_relu_training_rectifies_only_y():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 3, 2, 2)).astype(np.float32)
    scale, bias = rng.standard_normal(3).astype(np.float32), rng.standard_normal(3).astype(np.float32)
    rm, rv = np.zeros(3, np.float32), np.ones(3, np.float32)
    outs = ["Y", "rm", "rv", "sm", "siv"]
    ws = Workspace()
    for k, v in {"X": x, "s": scale, "b": bias, "rm": rm, "rv": rv}.items():
        ws.feed_blob(k, v)
    create_operator(CreateOperator("SpatialBNRelu", ["X", "s", "b", "rm", "rv"], outs, momentum=0.5), ws).run()
    mu = x.astype(np.float64).mean(axis=(0, 2, 3))
    var = x.astype(np.float64).var(axis=(0, 2, 3))
    b = (1, 3, 1, 1)
    want_y = caffe2_max0((x - mu.reshape(b)) / np.sqrt(var.reshape(b) + 1e-5) * scale.reshape(b) + bias.reshape(b))
    np.testing.assert_allclose(ws.fetch_blob("Y"), want_y, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(ws.fetch_blob("sm"), mu, rtol=1e-5, atol=1e-6)  # not rectified
    np.testing.assert_allclose(ws.fetch_blob("rm"), 0.5 * mu, rtol=1e-5, atol=1e-6)
    n = x.size / 3
    np.testing.assert_allclose(ws.fetch_blob("rv"), 0.5 + 0.5 * var * n / (n - 1), rtol=1e-5)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
@given(data=st.data())
@settings(max_examples=15, deadline=None)
def test_sum_relu(dtype, data):
    k = data.draw(st.integers(1, 4))
    shape = data.draw(shapes(0, 3, 0, 4))
    xs = [data.draw(arrays(shape, dtype)) for _ in range(k)]
    names = [f"X{i}" for i in range(k)]

    def ref(*xs):
        return caffe2_max0(np.sum(np.stack(xs), axis=0).astype(dtype))

    assert_reference_checks(CreateOperator("SumRelu", names, ["Y"]), xs, ref)
    assert_reference_checks(CreateOperator("SumRelu", names, ["X0"]), xs, ref)


def test_sum_relu_nan_and_types():
    x = np.array([np.nan, -1.0, 2.0], np.float32)
    ws = Workspace()
    ws.feed_blob("A", x)
    ws.feed_blob("B", np.zeros(3, np.float32))
    net_op = create_operator(CreateOperator("SumRelu", ["A", "B"], ["Y"]), ws)
    net_op.run()
    np.testing.assert_array_equal(ws.fetch_blob("Y"), [0.0, 0.0, 2.0])
    ws.feed_blob("I", np.ones(3, np.int64))
    with pytest.raises(TypeMismatchError, match=r"SumRelu.*'I'.*int64"):
        create_operator(CreateOperator("SumRelu", ["I", "I"], ["Z"]), ws).run()


def test_sum_relu_runs_its_relu_inside_a_net():
    """Sum's compiled fast path must not carry the Relu off (SumRelu has none)."""
    from framework.proto.framework_pb2 import NetDef

    ws = Workspace()
    ws.feed_blob("A", np.array([-3.0, 1.0], np.float32))
    ws.feed_blob("B", np.array([1.0, 1.0], np.float32))
    net = NetDef(name="n")
    net.op.extend([CreateOperator("SumRelu", ["A", "B"], ["Y"])])
    ws.create_net(net)
    for _ in range(3):
        ws.run_net("n")
        np.testing.assert_array_equal(ws.fetch_blob("Y"), [0.0, 2.0])


@pytest.mark.parametrize("op_type", ["ConvRelu", "SpatialBNRelu", "SumRelu"])
def test_no_gradient(op_type):
    op = CreateOperator(op_type, ["X", "W"], ["Y"])
    with pytest.raises(GradientError, match=rf"{op_type} should not be differentiated"):
        get_gradient_for_op(op, ["dY"])
