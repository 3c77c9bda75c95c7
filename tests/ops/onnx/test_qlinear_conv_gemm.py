"""ONNXQLinearConv / ONNXConvInteger / ONNXQLinearMatMul / ONNXMatMulInteger (the exact float32-GEMM integer ops)
against onnx's ReferenceEvaluator, bit
for bit, on hypothesis shapes and codes: groups, strides, pads, dilations, zero points, per-channel scales, uint8
and int8 operands and outputs, 1-D and 2-D images, a bias, and full-range codes that force the K-split."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

onnx = pytest.importorskip("onnx")
from onnx import helper, numpy_helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

from framework.errors import FrameworkError  # noqa: E402
from framework.onnx import backend  # noqa: E402
from framework.ops.onnx.qlinear_kernels import rescale_into, rescale_numpy  # noqa: E402

_T = {np.dtype(np.uint8): onnx.TensorProto.UINT8, np.dtype(np.int8): onnx.TensorProto.INT8}


def _model(op: str, feeds: dict, attrs: dict, out_type: int) -> onnx.ModelProto:
    names = list(feeds)
    inits = [numpy_helper.from_array(v, k) for k, v in feeds.items() if k != "x"]
    node = helper.make_node(op, names, ["y"], **attrs)
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", _T[feeds["x"].dtype], feeds["x"].shape)],
        [helper.make_tensor_value_info("y", out_type, None)],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def _agree(op: str, feeds: dict, attrs: dict, out_type: int) -> np.ndarray:
    model = _model(op, feeds, attrs, out_type)
    (want,) = ReferenceEvaluator(model).run(None, {"x": feeds["x"]})
    (got,) = backend.prepare(model).run({"x": feeds["x"]})
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    return got


def _codes(rng, dtype, shape):
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max + 1, shape).astype(dtype)


@st.composite
def _conv_case(draw):
    rank = draw(st.integers(1, 2))
    g = draw(st.integers(1, 3))
    cg, mg = draw(st.integers(1, 4)), draw(st.integers(1, 3))
    kernel = [draw(st.integers(1, 3)) for _ in range(rank)]
    strides = [draw(st.integers(1, 2)) for _ in range(rank)]
    dil = [draw(st.integers(1, 2)) for _ in range(rank)]
    pads = [draw(st.integers(0, 2)) for _ in range(2 * rank)]
    spatial = [draw(st.integers((k - 1) * d + 1, 7)) for k, d in zip(kernel, dil)]
    n = draw(st.integers(1, 2))
    types = [np.dtype(draw(st.sampled_from([np.uint8, np.int8]))) for _ in range(3)]
    attrs = dict(strides=strides, dilations=dil, pads=pads, group=g, kernel_shape=kernel)
    return (n, g * cg, g * mg, spatial, kernel, attrs, types, draw(st.booleans()), draw(st.booleans()),
            draw(st.integers(0, 2**31 - 1)))  # fmt: skip


@settings(max_examples=40, deadline=None)
@given(_conv_case())
def test_qlinear_conv_matches_the_reference(case):
    n, c, m, spatial, kernel, attrs, (xt, wt, yt), per_channel, with_bias = case[:9]
    rng = np.random.default_rng(case[9])
    x = _codes(rng, xt, (n, c, *spatial))
    w = _codes(rng, wt, (m, c // attrs["group"], *kernel))
    wz = _codes(rng, wt, (m,) if per_channel else ())
    ws = rng.uniform(0.001, 0.05, (m,) if per_channel else ()).astype(np.float32)
    feeds = {
        "x": x, "x_scale": np.float32(rng.uniform(0.01, 0.1)), "x_zero_point": _codes(rng, xt, ()),
        "w": w, "w_scale": ws, "w_zero_point": wz,
        "y_scale": np.float32(rng.uniform(0.05, 2.0)), "y_zero_point": _codes(rng, yt, ()),
    }  # fmt: skip
    feeds = {k: np.asarray(v) for k, v in feeds.items()}
    if with_bias:
        feeds["B"] = rng.integers(-5000, 5000, m).astype(np.int32)
    _agree("QLinearConv", feeds, attrs, _T[yt])


@settings(max_examples=25, deadline=None)
@given(_conv_case())
def test_conv_integer_matches_the_reference(case):
    n, c, m, spatial, kernel, attrs, (xt, wt, _), per_channel, _ = case[:9]
    rng = np.random.default_rng(case[9])
    feeds = {
        "x": _codes(rng, xt, (n, c, *spatial)),
        "w": _codes(rng, wt, (m, c // attrs["group"], *kernel)),
        "x_zero_point": np.asarray(_codes(rng, xt, ())),
        "w_zero_point": np.asarray(_codes(rng, wt, (m,) if per_channel else ())),
    }
    _agree("ConvInteger", feeds, attrs, onnx.TensorProto.INT32)


def test_full_range_codes_split_k_and_stay_exact():
    """K = 96 * 9 full-range taps: partial sums far beyond 2**24, so the GEMM runs in several exact K-slices."""
    rng = np.random.default_rng(3)
    x = np.where(rng.random((1, 96, 6, 6)) < 0.5, 0, 255).astype(np.uint8)
    w = np.where(rng.random((8, 96, 3, 3)) < 0.5, 0, 255).astype(np.uint8)
    x[0, :, 1:5, 1:5], w[0] = 255, 255  # one filter meeting all-255 windows: sums near 96 * 9 * 255 * 127
    feeds = {"x": x, "w": w, "x_zero_point": np.asarray(np.uint8(0)), "w_zero_point": np.asarray(np.uint8(128))}
    y = _agree("ConvInteger", feeds, dict(pads=[1, 1, 1, 1]), onnx.TensorProto.INT32)
    assert np.abs(y).max() > 2**24  # the case the slicing exists for
    q = {"x": x, "x_scale": np.asarray(np.float32(0.02)), "x_zero_point": np.asarray(np.uint8(0)),
         "w": w, "w_scale": np.asarray(np.float32(0.01)), "w_zero_point": np.asarray(np.uint8(128)),
         "y_scale": np.asarray(np.float32(500.0)), "y_zero_point": np.asarray(np.int8(3))}  # fmt: skip
    _agree("QLinearConv", q, dict(pads=[1, 1, 1, 1]), onnx.TensorProto.INT8)


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 3), st.integers(1, 5), st.integers(1, 40), st.integers(0, 2**31 - 1))
def test_compiled_rescale_equals_the_numpy_passes(parts, m, p, seed):
    """Ties included: halves of the float rescale must round to even in both."""
    rng = np.random.default_rng(seed)
    acc = rng.integers(-3000, 3000, (parts, m, p)).astype(np.float32)
    bias = rng.integers(-100, 100, m).astype(np.float64)
    ratio = rng.choice([0.5, 0.25, 1.5, 0.0137], m).astype(np.float64)
    out = np.empty((m, p), np.int8)
    rescale_into(acc, bias, ratio, 1.0, -128, 127, out)
    np.testing.assert_array_equal(out, rescale_numpy(acc, bias, ratio, 1.0, -128, 127))


def test_bad_bias_is_a_clear_error_and_leaves_the_output():
    from framework.caffe2.python import core, workspace

    workspace.ResetWorkspace()
    rng = np.random.default_rng(0)
    blobs = {
        "x": _codes(rng, np.uint8, (1, 2, 4, 4)), "xs": np.float32(0.1), "xz": np.uint8(3),
        "w": _codes(rng, np.uint8, (3, 2, 3, 3)), "ws": np.float32(0.1), "wz": np.uint8(5),
        "ys": np.float32(1.0), "yz": np.uint8(7), "b": np.zeros(3, np.int64),
    }  # fmt: skip
    for k, v in blobs.items():
        workspace.FeedBlob(k, np.asarray(v))
    workspace.FeedBlob("y", np.full((2,), 9, np.uint8))
    op = core.CreateOperator("ONNXQLinearConv", list(blobs), ["y"])
    with pytest.raises(FrameworkError, match="ONNXQLinearConv.*B 'b'"):
        workspace.RunOperatorOnce(op)
    np.testing.assert_array_equal(workspace.FetchBlob("y"), np.full((2,), 9, np.uint8))


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.integers(1, 3), min_size=0, max_size=2),
    st.integers(1, 6),
    st.integers(1, 300),
    st.integers(1, 6),
    st.sampled_from(["scalar", "vector"]),
    st.booleans(),
    st.integers(0, 2**31 - 1),
)
def test_qlinear_matmul_and_matmul_integer_match_the_reference(batch, rows, k, cols, zps, full_range, seed):
    """Batched and 2-D products; per-column zero points (MatMulInteger) and per-column b_scale;
    full-range codes with K up to 300 push the partial sums past 2**24, so the K-split runs."""
    rng = np.random.default_rng(seed)
    types = [np.dtype(rng.choice([np.uint8, np.int8])) for _ in range(3)]

    def codes(dtype, shape):
        if not full_range:
            return _codes(rng, dtype, shape)
        info = np.iinfo(dtype)
        return np.where(rng.random(shape) < 0.5, info.min, info.max).astype(dtype)

    a, b = codes(types[0], (*batch, rows, k)), codes(types[1], (k, cols))
    vec = zps == "vector" and not batch
    az = _codes(rng, types[0], ())  # the reference cannot broadcast a per-row a_zero_point
    bz = _codes(rng, types[1], (cols,) if vec else ())
    _agree("MatMulInteger", {"x": a, "b": b, "az": np.asarray(az), "bz": np.asarray(bz)}, {}, onnx.TensorProto.INT32)
    bs = rng.uniform(0.001, 0.05, (cols,) if zps == "vector" else ()).astype(np.float32)
    feeds = {
        "x": a, "a_scale": np.float32(rng.uniform(0.01, 0.1)), "a_zero_point": _codes(rng, types[0], ()),
        "b": b, "b_scale": bs, "b_zero_point": _codes(rng, types[1], ()),
        "y_scale": np.float32(rng.uniform(0.05, 50.0)), "y_zero_point": _codes(rng, types[2], ()),
    }  # fmt: skip
    _agree("QLinearMatMul", {k: np.asarray(v) for k, v in feeds.items()}, {}, _T[types[2]])


@pytest.mark.parametrize("auto_pad", ["SAME_UPPER", "SAME_LOWER", "VALID"])
def test_qlinear_conv_auto_pad(auto_pad):
    rng = np.random.default_rng(7)
    feeds = {
        "x": _codes(rng, np.uint8, (1, 3, 7, 6)), "x_scale": np.float32(0.05), "x_zero_point": np.uint8(9),
        "w": _codes(rng, np.int8, (4, 3, 3, 2)), "w_scale": np.float32(0.02), "w_zero_point": np.int8(-3),
        "y_scale": np.float32(0.7), "y_zero_point": np.uint8(100),
    }  # fmt: skip
    feeds = {k: np.asarray(v) for k, v in feeds.items()}
    _agree("QLinearConv", feeds, dict(auto_pad=auto_pad, strides=[2, 2]), onnx.TensorProto.UINT8)


def test_conv_integer_op_against_a_loop_and_its_inferred_shape():
    """ONNXConvInteger run as an op (not through the backend): an int64 loop over the window, stride 2, pad 1,
    a per-channel w_zero_point; the inferred shape is the output's."""
    from framework.core import CreateOperator
    from framework.memory.workspace import Workspace
    from framework.ops.inference import infer_op
    from framework.ops.schema import TensorSpec

    rng = np.random.default_rng(3)
    x = rng.integers(0, 256, (1, 2, 5, 4), dtype=np.uint8)
    w = rng.integers(-128, 128, (3, 2, 3, 3), dtype=np.int8)
    xz, wz = np.uint8(7), np.array([1, -2, 0], np.int8)
    ws = Workspace()
    for name, v in dict(x=x, w=w, xz=xz, wz=wz).items():
        ws.feed_blob(name, np.asarray(v))
    op = CreateOperator(
        "ONNXConvInteger", ["x", "w", "xz", "wz"], ["y"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]
    )
    ws.run_operator_once(op)
    y = ws.fetch_blob("y")
    xp = np.pad(x.astype(np.int64) - 7, ((0, 0), (0, 0), (1, 1), (1, 1)))
    wc = w.astype(np.int64) - wz.astype(np.int64)[:, None, None, None]
    ref = np.zeros((1, 3, 3, 2), np.int64)
    for m in range(3):
        for i in range(3):
            for j in range(2):
                ref[0, m, i, j] = (xp[0, :, 2 * i : 2 * i + 3, 2 * j : 2 * j + 3] * wc[m]).sum()
    assert y.dtype == np.int32 and np.array_equal(y, ref)
    specs = [TensorSpec(v.shape, v.dtype) for v in (x, w, np.asarray(xz), wz)]
    assert tuple(infer_op(op, specs)[0].shape) == y.shape
