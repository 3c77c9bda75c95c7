"""The ONNX backend's type and elementwise translators (framework/onnx/import_types.py,
import_elementwise.py) against onnx's ReferenceEvaluator on small graphs of the types Caffe2
lacks: which op each node becomes, and the outputs."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ml_dtypes = pytest.importorskip("ml_dtypes")

from onnx import TensorProto, helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

from framework.onnx import backend  # noqa: E402


def _model(nodes, inputs, outputs, opset=22):
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
        [helper.make_tensor_value_info(n, t, None) for n, t in outputs],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _check(model, feeds, types):
    got = backend.prepare(model).run(feeds)
    exp = ReferenceEvaluator(model).run(None, feeds)
    _, predict = backend.Caffe2Backend.onnx_graph_to_caffe2_net(model)
    assert [op.type for op in predict.op] == types
    for g, e in zip(got, exp):
        assert g.dtype == e.dtype and g.shape == e.shape
        np.testing.assert_array_equal(g.astype(np.float64), e.astype(np.float64))


def test_cast_chain_through_float8_and_bfloat16():
    nodes = [
        helper.make_node("Cast", ["x"], ["f8"], to=TensorProto.FLOAT8E4M3FN),
        helper.make_node("Cast", ["f8"], ["bf"], to=TensorProto.BFLOAT16),
        helper.make_node("CastLike", ["bf", "x"], ["y"]),
    ]
    model = _model(nodes, [("x", TensorProto.FLOAT, [6])], [("y", TensorProto.FLOAT)])
    x = np.array([0.3, 1e4, -1e4, np.inf, -0.0, 17.0], np.float32)
    _check(model, {"x": x}, ["ONNXCast", "ONNXCast", "ONNXCast"])


def test_uint_arithmetic_comparison_and_where_broadcast():
    nodes = [
        helper.make_node("Add", ["a", "b"], ["s"]),
        helper.make_node("Less", ["s", "b"], ["wrapped"]),
        helper.make_node("Where", ["wrapped", "a", "b"], ["y"]),
        helper.make_node("BitShift", ["y", "b"], ["z"], direction="RIGHT"),
    ]
    u8 = TensorProto.UINT8
    model = _model(nodes, [("a", u8, [2, 3]), ("b", u8, [3])], [("z", u8), ("s", u8)])
    a = np.array([[250, 1, 7], [128, 255, 0]], np.uint8)
    b = np.array([10, 2, 1], np.uint8)
    _check(model, {"a": a, "b": b}, ["ONNXAdd", "ONNXLess", "ONNXWhere", "ONNXBitShift"])


def test_float32_nodes_stay_on_caffe2_ops():
    nodes = [helper.make_node("Mul", ["a", "b"], ["m"]), helper.make_node("Max", ["m", "c"], ["y"])]
    f = TensorProto.FLOAT
    model = _model(nodes, [("a", f, [2, 3]), ("b", f, [2, 3]), ("c", f, [2, 3])], [("y", f)])
    rng = np.random.default_rng(0)
    feeds = {k: rng.standard_normal((2, 3)).astype(np.float32) for k in "abc"}
    _check(model, feeds, ["Mul", "Max"])


def test_float16_and_bfloat16_activations_compute_in_float32():
    for elem in (TensorProto.FLOAT16, TensorProto.BFLOAT16):
        nodes = [helper.make_node("Elu", ["x"], ["e"], alpha=0.5), helper.make_node("Swish", ["e"], ["y"], alpha=2.0)]
        model = _model(nodes, [("x", elem, [5])], [("y", elem)], opset=24)
        x = np.array([-3.0, -0.5, 0.0, 0.75, 2.0], np.float32).astype(helper.tensor_dtype_to_np_dtype(elem))
        cast = ["Cast"] if elem == TensorProto.FLOAT16 else ["ONNXCast"]
        got = backend.prepare(model).run({"x": x})[0]
        exp = ReferenceEvaluator(model).run(None, {"x": x})[0]
        assert got.dtype == exp.dtype
        np.testing.assert_allclose(got.astype(np.float32), exp.astype(np.float32), rtol=2**-7)
        _, predict = backend.Caffe2Backend.onnx_graph_to_caffe2_net(model)
        assert [op.type for op in predict.op] == cast + ["Elu"] + cast + ["ONNXSwish"]


def test_low_precision_data_movement_and_bfloat16_matmul_via_float32():
    bf16, f16 = TensorProto.BFLOAT16, TensorProto.FLOAT16
    nodes = [
        helper.make_node("Reshape", ["a", "shape"], ["r"]),
        helper.make_node("MatMul", ["r", "b"], ["y"]),
        helper.make_node("Expand", ["h", "shape2"], ["e"]),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("a", bf16, [6]), helper.make_tensor_value_info("b", bf16, [3, 2]),
         helper.make_tensor_value_info("h", f16, [1, 3])],
        [helper.make_tensor_value_info("y", bf16, None), helper.make_tensor_value_info("e", f16, None)],
        initializer=[onnx.numpy_helper.from_array(np.array([2, 3], np.int64), "shape"),
                     onnx.numpy_helper.from_array(np.array([2, 3], np.int64), "shape2")],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 22)])
    rng = np.random.default_rng(0)
    feeds = {
        "a": rng.standard_normal(6).astype(ml_dtypes.bfloat16),
        "b": rng.standard_normal((3, 2)).astype(ml_dtypes.bfloat16),
        "h": rng.standard_normal((1, 3)).astype(np.float16),
    }
    y, e = backend.prepare(model).run(feeds)
    assert y.dtype == np.dtype(ml_dtypes.bfloat16) and e.dtype == np.float16
    exact = feeds["a"].astype(np.float32).reshape(2, 3) @ feeds["b"].astype(np.float32)
    np.testing.assert_array_equal(y.astype(np.float32), exact.astype(ml_dtypes.bfloat16).astype(np.float32))
    np.testing.assert_array_equal(e, np.broadcast_to(feeds["h"], (2, 3)))  # data movement: exact
