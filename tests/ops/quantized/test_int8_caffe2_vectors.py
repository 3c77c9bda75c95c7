"""Caffe2's own int8 tests (caffe2/operators/quantized/int8_test.cc), ported: each int8 op against the float
op on dequantized inputs with Caffe2's tolerances, and the TFLite test vectors Caffe2 checks bit for bit
(Int8Conv, Int8FC)."""

from __future__ import annotations

import numpy as np
import pytest

from framework.core import CreateOperator
from framework.memory.int8_tensor import Int8TensorCPU
from framework.memory.workspace import Workspace

f32 = np.float32


def q(shape, seed=0):
    """Caffe2's q(): random uint8 codes, scale 0.01, zero point 127."""
    codes = np.random.default_rng(seed).integers(0, 256, shape).astype(np.uint8)
    return Int8TensorCPU.from_numpy(codes, 0.01, 127)


def dq(t):
    return ((t.numpy().astype(np.int32) - t.zero_point) * f32(t.scale)).astype(f32)


def setq(values, shape, scale=0.5, zp=127):
    """Caffe2's setq: uint8(nearbyint(float(zp + v / scale)))."""
    v = np.array([np.rint(f32(zp + f32(x) / f32(scale))) for x in values]).astype(np.uint8).reshape(shape)
    return Int8TensorCPU.from_numpy(v, scale, zp)


def biasq(values, scale):
    v = np.array([np.rint(f32(x / f32(scale))) for x in values]).astype(np.int32)
    return Int8TensorCPU.from_numpy(v, scale, 0)


def run_both(feeds, int8_op, float_ops, out_q="YQ", out_f="Y"):
    ws = Workspace()
    for k, v in feeds.items():
        ws.feed_blob(k, v)
    ws.run_operator_once(int8_op)
    for op in float_ops:
        ws.run_operator_once(op)
    return ws.get_blob(out_q)._obj, ws.fetch_blob(out_f) if out_f else None


def keep(t):
    return dict(Y_zero_point=t.zero_point, Y_scale=t.scale)


def test_relu_equals_float_relu():
    xq = q((1, 224, 224, 3))
    yq, y = run_both({"XQ": xq, "X": dq(xq)}, CreateOperator("Int8Relu", ["XQ"], ["YQ"], **keep(xq)),
                     [CreateOperator("Relu", ["X"], ["Y"])])  # fmt: skip
    np.testing.assert_array_equal(dq(yq), y)


def test_leaky_relu_within_two_steps():
    xq = q((1, 224, 224, 3))
    yq, y = run_both({"XQ": xq, "X": dq(xq)}, CreateOperator("Int8LeakyRelu", ["XQ"], ["YQ"], alpha=0.1, **keep(xq)),
                     [CreateOperator("LeakyRelu", ["X"], ["Y"], alpha=0.1)])  # fmt: skip
    np.testing.assert_allclose(dq(yq), y, atol=2 * yq.scale)


def test_softmax_within_two_steps():
    xq = q((1, 2, 1, 3))
    yq, y = run_both({"XQ": xq, "X": dq(xq)},
                     CreateOperator("Int8Softmax", ["XQ"], ["YQ"], Y_zero_point=0, Y_scale=1 / 256),
                     [CreateOperator("Softmax", ["X"], ["Y"])])  # fmt: skip
    assert yq.scale == 1 / 256 and yq.zero_point == 0
    np.testing.assert_allclose(dq(yq), y, atol=2 / 256)


@pytest.mark.parametrize("kind,tol", [("MaxPool", 0.0), ("AveragePool", 2 * 0.01)])
def test_pools(kind, tol):
    xq = q((1, 25, 25, 16))
    yq, y = run_both({"XQ": xq, "X": dq(xq)},
                     CreateOperator(f"Int8{kind}", ["XQ"], ["YQ"], kernel=2, order="NHWC", **keep(xq)),
                     [CreateOperator(kind, ["X"], ["Y"], kernel=2, order="NHWC")])  # fmt: skip
    np.testing.assert_allclose(dq(yq), y, atol=tol + 1e-6)


def test_resize_nearest_and_channel_shuffle_equal_the_float_ops():
    xq = q((1, 25, 25, 16))
    yq, y = run_both({"XQ": xq, "X": dq(xq)},
                     CreateOperator("Int8ResizeNearest", ["XQ"], ["YQ"], width_scale=2.0, height_scale=2.0, **keep(xq)),
                     [CreateOperator("NHWC2NCHW", ["X"], ["XT"]),
                      CreateOperator("ResizeNearest", ["XT"], ["YT"], width_scale=2.0, height_scale=2.0),
                      CreateOperator("NCHW2NHWC", ["YT"], ["Y"])])  # fmt: skip
    np.testing.assert_array_equal(dq(yq), y)
    xq = q((2, 25, 25, 32))
    yq, y = run_both({"XQ": xq, "X": dq(xq)},
                     CreateOperator("Int8ChannelShuffle", ["XQ"], ["YQ"], group=4, order="NHWC", **keep(xq)),
                     [CreateOperator("NHWC2NCHW", ["X"], ["XT"]),
                      CreateOperator("ChannelShuffle", ["XT"], ["YT"], group=4, order="NCHW"),
                      CreateOperator("NCHW2NHWC", ["YT"], ["Y"])])  # fmt: skip
    np.testing.assert_array_equal(dq(yq), y)


def test_concat_equals_the_float_concat():
    x0, x1 = q((2, 25, 25, 16), 0), q((2, 25, 25, 24), 1)
    yq, y = run_both({"XQ0": x0, "XQ1": x1, "X0": dq(x0), "X1": dq(x1)},
                     CreateOperator("Int8Concat", ["XQ0", "XQ1"], ["YQ", "_"], order="NHWC", **keep(x0)),
                     [CreateOperator("Concat", ["X0", "X1"], ["Y", "_s"], order="NHWC")])  # fmt: skip
    np.testing.assert_array_equal(dq(yq), y)


@pytest.mark.parametrize("int8_type,relu", [("Int8Add", False), ("Int8SumRelu", True)])
def test_add_within_two_steps(int8_type, relu):
    x0, x1 = q((1, 10, 10, 20), 0), q((1, 10, 10, 20), 1)
    y_scale = 2 * max(x0.scale, x1.scale)
    ops = [CreateOperator("Add", ["X0", "X1"], ["Y"])] + ([CreateOperator("Relu", ["Y"], ["Y"])] if relu else [])
    yq, y = run_both({"XQ0": x0, "XQ1": x1, "X0": dq(x0), "X1": dq(x1)},
                     CreateOperator(int8_type, ["XQ0", "XQ1"], ["YQ"], Y_zero_point=x0.zero_point, Y_scale=y_scale),
                     ops)  # fmt: skip
    np.testing.assert_allclose(dq(yq), y, atol=2 * y_scale)


def _conv_case(x_vals, x_shape, w_vals, w_shape, b_vals, int8_type, float_type, **args):
    xq, wq = setq(x_vals, x_shape), setq(w_vals, w_shape)
    bq = biasq(b_vals, xq.scale * wq.scale)
    feeds = {"XQ": xq, "WQ": wq, "BQ": bq, "X": dq(xq), "W": dq(wq),
             "B": (bq.numpy() * f32(bq.scale)).astype(f32)}  # fmt: skip
    int8_op = CreateOperator(int8_type, ["XQ", "WQ", "BQ"], ["YQ"], Y_zero_point=127, Y_scale=1.0, **args)
    return run_both(feeds, int8_op, [CreateOperator(float_type, ["X", "W", "B"], ["Y"], **args)])


def test_conv_tflite_vector():
    yq, y = _conv_case([1, 1, 1, 1, 2, 2, 2, 2, 1, 2, 3, 4, 1, 2, 3, 4], (2, 2, 4, 1),
                       [1, 2, 3, 4, -1, 1, -1, 1, -1, -1, 1, 1], (3, 2, 2, 1), [1, 2, 3],
                       "Int8Conv", "Conv", kernel=2, order="NHWC", stride=2)  # fmt: skip
    assert yq.numpy().reshape(-1).tolist() == [145, 129, 132, 145, 129, 132, 144, 131, 130, 164, 131, 130]
    np.testing.assert_allclose(dq(yq), y, atol=1e-5)


def test_conv2_tflite_vector():
    yq, y = _conv_case([3, 2, 1, -1, -2, -3, 4, 3, 2, -2, -3, -4, 5, 4, 3, -3, -4, -5], (1, 3, 6, 1),
                       [1, 2, 3, 4], (1, 2, 2, 1), [-1], "Int8Conv", "Conv",
                       kernel=2, order="NHWC", stride_w=3, stride_h=1)  # fmt: skip
    assert yq.numpy().reshape(-1).tolist() == [157, 103, 167, 93]
    np.testing.assert_allclose(dq(yq), y, atol=1e-5)


def test_grouped_and_depthwise_conv_equal_the_float_conv():
    for x_vals, x_shape, w_vals, w_shape, b_vals, k in (
        ([1, 4, 3, 2, 9, 3, 8, 2, 6, 7, 8, 2, 3, 8, 1, 7, 4, 2, 1, 3, 8, 5, 3, 1], (1, 3, 2, 4),
         [1, 2, 3, 4, -1, -2, -3, -4], (4, 1, 1, 2), [1, 2, 3, 4], 1),
        ([1, 4, 3, 2, 9, 3, 8, 2, 6, 7, 8, 2], (1, 3, 2, 2), [1, 2, 3, 4, -9, 10, -11, 12], (2, 2, 2, 1), [1, 2], 2),
    ):  # fmt: skip
        yq, y = _conv_case(x_vals, x_shape, w_vals, w_shape, b_vals, "Int8Conv", "Conv", kernel=k, order="NHWC",
                           group=2)  # fmt: skip
        np.testing.assert_allclose(dq(yq), y, atol=1e-5)


def test_conv_transpose_equals_the_float_one():
    yq, y = _conv_case([3, 2, 1, -1, -2, -3, 4, 3, 2, -2, -3, -4, 5, 4, 3, -3, -4, -5], (1, 3, 6, 1),
                       [1, 2, 3, 4], (1, 2, 2, 1), [-1], "Int8ConvTranspose", "ConvTranspose",
                       kernel=2, order="NHWC", stride_w=1, stride_h=2)  # fmt: skip
    np.testing.assert_allclose(dq(yq), y, atol=1e-5)


def test_fc_tflite_vector():
    yq, y = _conv_case([1, 2, 3, 4, 5, 6, 7, 8, -9, -10, 1, 2, 3, 4, 5, 6, 7, -8, 9, -10], (2, 10),
                       list(range(1, 11)) * 3, (3, 10), [1, 2, 3], "Int8FC", "FC")  # fmt: skip
    assert yq.numpy().reshape(-1).tolist() == [151, 152, 153, 185, 186, 187]


def test_fills_quantize_and_shape_ops():
    xq = q((1, 25, 25, 16))
    ws = Workspace()
    ws.run_operator_once(CreateOperator("Int8GivenTensorFill", [], ["YQ"], shape=[1, 25, 25, 16],
                                        values=xq.numpy().tobytes(), **keep(xq)))  # fmt: skip
    np.testing.assert_array_equal(dq(ws.get_blob("YQ")._obj), dq(xq))
    ws.feed_blob("X", dq(xq))
    ws.run_operator_once(CreateOperator("Int8Quantize", ["X"], ["XQ"], **keep(xq)))
    ws.run_operator_once(CreateOperator("Int8Dequantize", ["XQ"], ["X_x"]))
    np.testing.assert_allclose(ws.fetch_blob("X_x"), dq(xq), atol=xq.scale)
    ws.feed_blob("Q", xq)
    ws.run_operator_once(CreateOperator("Int8Reshape", ["Q"], ["R", "old"], shape=[0, -1, 2000], **keep(xq)))
    assert ws.get_blob("R")._obj.shape == (1, 5, 2000)
    ws.run_operator_once(CreateOperator("Int8Flatten", ["Q"], ["F"], axis=2, **keep(xq)))
    assert ws.get_blob("F")._obj.shape == (25, 400)
    ws.run_operator_once(CreateOperator("Int8Slice", ["Q"], ["S"], starts=[0, 3, 0, 0], ends=[-1, 5, -1, -1],
                                        **keep(xq)))  # fmt: skip
    ws.run_operator_once(CreateOperator("Slice", ["X"], ["SF"], starts=[0, 3, 0, 0], ends=[-1, 5, -1, -1]))
    s = ws.get_blob("S")._obj
    assert s.shape == (1, 2, 25, 16) and s.scale == xq.scale and s.zero_point == xq.zero_point
    np.testing.assert_array_equal(dq(s), ws.fetch_blob("SF"))
