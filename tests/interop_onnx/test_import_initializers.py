"""ONNX initializers reach the workspace as arrays, bit for bit, never through argument lists; the
Caffe2-style NetDef pair (``onnx_graph_to_caffe2_net``) keeps its GivenTensor*Fill ops, also exact."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

from onnx import TensorProto as OnnxType  # noqa: E402
from onnx import helper, numpy_helper  # noqa: E402

from framework.memory.workspace import Workspace  # noqa: E402
from framework.onnx import backend  # noqa: E402
from framework.onnx.importer import OnnxImportError  # noqa: E402
from framework.proto.args import make_argument  # noqa: E402

F32_BITS = np.array(
    [0x7FC00001, 0xFFC12345, 0x80000000, 0x00000001, 0x807FFFFF, 0x00800000, 0x7F800000, 0xFF800000, 0x7F7FFFFF],
    dtype=np.uint32,
)
F16_BITS = np.array([0x7E01, 0x8000, 0x0001, 0x03FF, 0x7C00, 0xFC00, 0x7BFF], dtype=np.uint16)
F64_VALUES = np.array([1 / 3, -0.0, 5e-324, 1e300, -np.inf], dtype=np.float64)
I64_VALUES = np.array([-(2**63), 2**63 - 1, 0, -1, 2**53 + 1], dtype=np.int64)

ARRAYS = {
    "f32": F32_BITS.view(np.float32).reshape(3, 3),
    "f16": F16_BITS.view(np.float16),
    "f64": F64_VALUES,
    "i64": I64_VALUES,
    "i32": np.array([-(2**31), 2**31 - 1], dtype=np.int32),
    "u8": np.array([0, 255, 7], dtype=np.uint8),
    "b": np.array([True, False, True]),
}


def _identity_model() -> onnx.ModelProto:
    """A graph whose outputs are Identity copies of one initializer per dtype in ARRAYS."""
    inits = [numpy_helper.from_array(v, k) for k, v in ARRAYS.items()]
    nodes = [helper.make_node("Identity", [k], [f"{k}_out"]) for k in ARRAYS]
    outs = [
        helper.make_tensor_value_info(f"{k}_out", helper.np_dtype_to_tensor_dtype(v.dtype), list(v.shape))
        for k, v in ARRAYS.items()
    ]
    graph = helper.make_graph(nodes, "inits", [], outs, initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _same_bits(got: np.ndarray, want: np.ndarray) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got.view(np.uint8), np.ascontiguousarray(want).view(np.uint8))


def test_initializers_round_trip_bit_for_bit_through_prepare():
    rep = backend.prepare(_identity_model())
    got = rep.run([])
    for want, value in zip(ARRAYS.values(), got):
        _same_bits(np.asarray(value), want)


def test_prepare_feeds_initializers_as_arrays_not_fill_ops():
    rep = backend.prepare(_identity_model())
    assert len(rep.init_net.op) == 0
    assert set(ARRAYS) <= set(rep.init_net.external_input)  # (the Identity outputs are folded constants too)
    assert not any(a.name == "values" for op in rep.predict_net.op for a in op.arg)


def test_caffe2_net_pair_fill_ops_are_exact():
    init, _ = backend.Caffe2Backend.onnx_graph_to_caffe2_net(_float_model())
    assert [op.type for op in init.op] == ["GivenTensorFill"]
    ws = Workspace()
    ws.run_net_once(init)
    _same_bits(ws.fetch_blob("w"), ARRAYS["f32"])


def _float_model() -> onnx.ModelProto:
    w = numpy_helper.from_array(ARRAYS["f32"], "w")
    node = helper.make_node("Add", ["x", "w"], ["y"])
    x = helper.make_tensor_value_info("x", OnnxType.FLOAT, [3, 3])
    y = helper.make_tensor_value_info("y", OnnxType.FLOAT, [3, 3])
    graph = helper.make_graph([node], "add", [x], [y], initializer=[w])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_initializers_in_the_workspace_are_independent_of_the_model():
    model = _float_model()
    rep = backend.prepare(model)
    x = np.ones((3, 3), np.float32)
    (y,) = rep.run([x])
    with np.errstate(invalid="ignore", over="ignore"):
        want = x + ARRAYS["f32"]
    _same_bits(np.asarray(y), want)
    assert numpy_helper.to_array(model.graph.initializer[0]).view(np.uint32).reshape(-1).tolist() == F32_BITS.tolist()


# -- make_argument on arrays: one conversion, the same Argument as value by value -------------------------------------
def test_make_argument_of_a_float_array_is_float32_exact():
    arg = make_argument("values", ARRAYS["f32"])
    _same_bits(np.array(arg.floats, dtype=np.float32), ARRAYS["f32"].reshape(-1))
    arg64 = make_argument("values", np.array([0.1, 1e300, -1e300]))
    assert list(arg64.floats) == [float(np.float32(0.1)), float("inf"), float("-inf")]


@pytest.mark.parametrize("value", [I64_VALUES, np.array([True, False]), np.array([3, 250], np.uint8), np.zeros(0)])
def test_make_argument_of_int_bool_and_empty_arrays_matches_lists(value):
    assert make_argument("v", value) == make_argument("v", value.tolist())


def test_an_initializer_whose_data_disagrees_with_its_dims_is_named():
    model = _float_model()
    model.graph.initializer[0].dims[:] = [4, 4]
    with pytest.raises(OnnxImportError, match=r"initializer 'w' \(dims \[4, 4\], data_type 1\) cannot be read"):
        backend.prepare(model)
    with pytest.raises(ValueError):  # still a ValueError, as before
        backend.Caffe2Backend.onnx_graph_to_caffe2_net(model)


def test_if_whose_branch_names_its_result_like_the_if_output():
    # a branch result named like the If's output needs no copy (a copy onto itself is no valid op)
    import onnx
    from onnx import TensorProto, helper

    from framework.onnx.backend import prepare

    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    w = np.arange(6, dtype=np.float32).reshape(3, 2) / 10
    then_g = helper.make_graph([helper.make_node("MatMul", ["X", "W"], ["Y"])], "t", [],
                               [helper.make_tensor_value_info("Y", TensorProto.FLOAT, (2, 2))])  # fmt: skip
    else_g = helper.make_graph([helper.make_node("Slice", ["X", "s", "e"], ["Y"])], "f", [],
                               [helper.make_tensor_value_info("Y", TensorProto.FLOAT, (2, 2))])  # fmt: skip
    for cond_value, const in ((True, True), (False, True), (True, False)):
        nodes = [helper.make_node("If", ["c"], ["Y"], then_branch=then_g, else_branch=else_g)]
        inits = [helper.make_tensor("W", TensorProto.FLOAT, [3, 2], w.flatten().tolist()),
                 helper.make_tensor("s", TensorProto.INT64, [2], [0, 0]),
                 helper.make_tensor("e", TensorProto.INT64, [2], [2, 2])]  # fmt: skip
        inputs = [helper.make_tensor_value_info("X", TensorProto.FLOAT, (2, 3))]
        feeds = {"X": x}
        if const:
            inits.append(helper.make_tensor("c", TensorProto.BOOL, [], [cond_value]))
        else:
            inputs.append(helper.make_tensor_value_info("c", TensorProto.BOOL, ()))
            feeds["c"] = np.array(cond_value)
        g = helper.make_graph(nodes, "g", inputs, [helper.make_tensor_value_info("Y", TensorProto.FLOAT, (2, 2))],
                              initializer=inits)  # fmt: skip
        out = prepare(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])).run(feeds)
        np.testing.assert_allclose(out[0], x @ w if cond_value else x[:2, :2], rtol=1e-6)
        onnx.checker.check_model(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]))
