"""ONNX backend: computed shape tensors (Shape -> arithmetic -> Reshape) fold at translation and
stay exact when other shapes are fed; index/scatter/pad/selection nodes run on the ONNX family ops."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

from onnx import TensorProto, helper  # noqa: E402

from framework.onnx import backend  # noqa: E402


def _model(nodes, inputs, outputs, opset=18):
    graph = helper.make_graph(nodes, "g", inputs, outputs)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def test_computed_shape_folds_and_follows_fed_shapes():
    # y = Reshape(x, [-1, last dim * 2]) with the shape computed from Shape(x) inside the graph
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Constant", [], ["i"], value=helper.make_tensor("i", TensorProto.INT64, [1], [-1])),
        helper.make_node("Gather", ["s", "i"], ["last"], axis=0),
        helper.make_node("Constant", [], ["two"], value=helper.make_tensor("two", TensorProto.INT64, [1], [2])),
        helper.make_node("Mul", ["last", "two"], ["w"]),
        helper.make_node("Constant", [], ["m1"], value=helper.make_tensor("m1", TensorProto.INT64, [1], [-1])),
        helper.make_node("Concat", ["m1", "w"], ["shape"], axis=0),
        helper.make_node("Reshape", ["x", "shape"], ["y"]),
    ]
    model = _model(
        nodes,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    )
    init, predict = backend.Caffe2Backend.onnx_graph_to_caffe2_net(model)
    assert [op.type for op in predict.op] == ["Reshape"]  # the shape arithmetic folded away
    rep = backend.prepare(model)
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    np.testing.assert_array_equal(rep.run([x])[0], x.reshape(-1, 6))
    x2 = np.arange(40, dtype=np.float32).reshape(4, 10)  # not the declared shape: translated again
    np.testing.assert_array_equal(rep.run([x2])[0], x2.reshape(-1, 20))


def test_dynamic_shape_input_is_specialized_at_run_time():
    nodes = [helper.make_node("Pad", ["x", "pads"], ["y"], mode="wrap")]
    model = _model(
        nodes,
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 2]),
            helper.make_tensor_value_info("pads", TensorProto.INT64, [6]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    )
    x = np.arange(12, dtype=np.float32).reshape(2, 3, 2)
    rep = backend.prepare(model)
    for pads in ([1, 0, 2, 0, 1, 1], [0, 2, 0, 1, 0, 0]):
        p = np.array(pads, np.int64)
        want = np.pad(x, list(zip(pads[:3], pads[3:])), mode="wrap")
        np.testing.assert_array_equal(rep.run([x, p])[0], want)


def test_topk_smallest_and_largest_with_ties():
    x = np.array([[3, 1, 3, 1, 2]], np.float32)
    for largest, want_idx in ((1, [[0, 2, 4]]), (0, [[1, 3, 4]])):
        node = helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=1, largest=largest)
        v, i = backend.run_node(node, [x, np.array([3], np.int64)])
        np.testing.assert_array_equal(i, want_idx)
        np.testing.assert_array_equal(v, x[:, want_idx[0]])


def test_scatter_elements_reduction_and_gather_nd_batch_dims():
    data = np.zeros((2, 3), np.float32)
    idx = np.array([[1, 1], [0, 2]], np.int64)
    upd = np.array([[1, 2], [3, 4]], np.float32)
    node = helper.make_node("ScatterElements", ["d", "i", "u"], ["y"], axis=1, reduction="add")
    (y,) = backend.run_node(node, [data, idx, upd], opset_version=18)
    np.testing.assert_array_equal(y, [[0, 3, 0], [3, 0, 4]])
    g = helper.make_node("GatherND", ["d", "i"], ["y"], batch_dims=1)
    d = np.arange(12, dtype=np.int32).reshape(2, 3, 2)
    (y,) = backend.run_node(g, [d, np.array([[1], [2]], np.int64)])
    np.testing.assert_array_equal(y, [[2, 3], [10, 11]])


@pytest.mark.parametrize("mode", ["DCR", "CRD"])
def test_depth_to_space_and_back(mode):
    x = np.arange(2 * 8 * 2 * 3, dtype=np.float32).reshape(2, 8, 2, 3)
    (y,) = backend.run_node(helper.make_node("DepthToSpace", ["x"], ["y"], blocksize=2, mode=mode), [x])
    want = np.zeros((2, 2, 4, 6), np.float32)  # element-wise definition of the two channel orders
    for n, c, h, w in np.ndindex(*want.shape):
        bh, bw = h % 2, w % 2
        src_c = (bh * 2 + bw) * 2 + c if mode == "DCR" else c * 4 + bh * 2 + bw
        want[n, c, h, w] = x[n, src_c, h // 2, w // 2]
    np.testing.assert_array_equal(y, want)
    back = helper.make_node("SpaceToDepth", ["y"], ["z"], blocksize=2, mode=mode)
    (z,) = backend.run_node(back, [y], opset_version=25 if mode == "CRD" else None)
    np.testing.assert_array_equal(z, x)


def test_center_crop_pad_and_reverse_sequence():
    x = np.arange(20, dtype=np.int32).reshape(4, 5)
    node = helper.make_node("CenterCropPad", ["x", "s"], ["y"])
    (y,) = backend.run_node(node, [x, np.array([7, 2], np.int64)])
    want = np.zeros((7, 2), np.int32)
    want[1:5] = x[:, 1:3]  # rows padded 1 before / 2 after, columns 5 -> 2 cropped from 1
    np.testing.assert_array_equal(y, want)
    rs = helper.make_node("ReverseSequence", ["x", "l"], ["y"], time_axis=1, batch_axis=0)
    (y,) = backend.run_node(rs, [x, np.array([5, 0, 2, 1], np.int64)])
    want = x.copy()
    want[0] = x[0, ::-1]
    want[2, :2] = x[2, 1::-1]
    np.testing.assert_array_equal(y, want)


def test_slice_with_steps_matches_python_slicing():
    x = np.arange(60, dtype=np.float32).reshape(3, 4, 5)
    node = helper.make_node("Slice", ["x", "s", "e", "a", "k"], ["y"])
    cases = [  # (starts, ends, axes, steps) -> numpy's equivalent
        (([0, 4], [3, -100], [0, 2], [2, -2]), x[0:3:2, :, 4::-2]),
        (([-1, 1], [-5, 100], [1, 2], [-1, 3]), x[:, -1:-5:-1, 1::3]),
        (([10], [-10], [2], [-1]), x[:, :, ::-1]),
    ]
    for (s, e, a, k), want in cases:
        ins = [x] + [np.array(v, np.int64) for v in (s, e, a, k)]
        (y,) = backend.run_node(node, ins)
        np.testing.assert_array_equal(y, want)


def test_range_low_precision_and_reshape_allowzero():
    node = helper.make_node("Range", ["s", "l", "d"], ["y"])
    ins = [np.array(v, np.float16) for v in (1.0, 2.0, 0.25)]
    (y,) = backend.run_node(node, ins)
    assert y.dtype == np.float16
    np.testing.assert_array_equal(y, [1.0, 1.25, 1.5, 1.75])
    r = helper.make_node("Reshape", ["x", "shape"], ["y"], allowzero=1)
    x = np.zeros((0, 3), np.float32)
    (y,) = backend.run_node(r, [x, np.array([3, 0], np.int64)])
    assert y.shape == (3, 0)


def test_matmul_with_1d_operands_follows_numpy():
    rng = np.random.default_rng(0)
    node = helper.make_node("MatMul", ["a", "b"], ["y"])
    for sa, sb in (((4,), (4,)), ((4,), (2, 4, 3)), ((2, 3, 4), (4,)), ((4,), (4, 5))):
        a, b = rng.standard_normal(sa).astype(np.float32), rng.standard_normal(sb).astype(np.float32)
        (y,) = backend.run_node(node, [a, b])
        assert y.shape == np.matmul(a, b).shape
        np.testing.assert_allclose(y, np.matmul(a.astype(np.float64), b), rtol=1e-5, atol=1e-5)


def test_slice_of_run_time_values_runs_on_onnx_slice():
    node = helper.make_node("Slice", ["x", "s", "e", "a", "k"], ["y"])
    vi = helper.make_tensor_value_info
    ints = [vi(n, TensorProto.INT64, [1]) for n in "seak"]
    model = _model([node], [vi("x", TensorProto.FLOAT, [3, 4])] + ints, [vi("y", TensorProto.FLOAT, None)])
    _, predict = backend.Caffe2Backend.onnx_graph_to_caffe2_net(model)
    assert [op.type for op in predict.op] == ["ONNXSlice"]  # no constants at prepare: read at run time
    rep = backend.prepare(model)
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    for s, e, a, k in ((3, 0, 1, -2), (0, 9, 0, 2)):
        ins = [x] + [np.array([v], np.int64) for v in (s, e, a, k)]
        want = x[:, 3:0:-2] if a == 1 else x[0:9:2]
        np.testing.assert_array_equal(rep.run(ins)[0], want)


def test_if_on_a_constant_condition_inlines_the_taken_branch():
    vi = helper.make_tensor_value_info
    then_g = helper.make_graph(
        [helper.make_node("Split", ["x"], ["a", "b"], axis=0, num_outputs=2)], "then", [],
        [vi("a", TensorProto.FLOAT, None), vi("b", TensorProto.FLOAT, None)],
    )  # fmt: skip
    else_g = helper.make_graph(
        [helper.make_node("Neg", ["x"], ["c"]), helper.make_node("Identity", ["x"], ["d"])], "else", [],
        [vi("c", TensorProto.FLOAT, None), vi("d", TensorProto.FLOAT, None)],
    )  # fmt: skip
    nodes = [
        helper.make_node("Size", ["x"], ["n"]),
        helper.make_node("Constant", [], ["four"], value=helper.make_tensor("four", TensorProto.INT64, [], [4])),
        helper.make_node("Equal", ["n", "four"], ["is4"]),
        helper.make_node("If", ["is4"], ["p", "q"], then_branch=then_g, else_branch=else_g),
        helper.make_node("Concat", ["q", "p"], ["y"], axis=0),
    ]
    model = _model(nodes, [vi("x", TensorProto.FLOAT, [4])], [vi("y", TensorProto.FLOAT, None)], opset=18)
    _, predict = backend.Caffe2Backend.onnx_graph_to_caffe2_net(model)
    assert "If" not in [op.type for op in predict.op]  # Size(x) == 4 is known: the then branch runs inline
    x = np.array([1, 2, 3, 4], np.float32)
    np.testing.assert_array_equal(backend.prepare(model).run([x])[0], [3, 4, 1, 2])
    x6 = np.arange(6, dtype=np.float32)  # another shape: translated again, the else branch this time
    np.testing.assert_array_equal(backend.prepare(model).run([x6])[0], np.concatenate([x6, -x6]))
