"""bench/pool_ops.py: the distinct pooling nodes of a model, each timed as a one-node model against onnxruntime."""

from __future__ import annotations

import pytest

pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")

from onnx import TensorProto, helper  # noqa: E402

from bench import pool_ops  # noqa: E402


def _model():
    nodes = [
        helper.make_node("MaxPool", ["x"], ["a"], kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1),
        helper.make_node("MaxPool", ["a"], ["b"], kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1]),
        helper.make_node("MaxPool", ["b"], ["c"], kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1]),
        helper.make_node("AveragePool", ["c"], ["y"], kernel_shape=[2, 2], strides=[2, 2]),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 13, 13])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_distinct_pools_are_counted_and_timed():
    found = pool_ops.pools(_model())
    assert [(t, s, n) for t, s, _, n in found] == [
        ("MaxPool", [1, 4, 13, 13], 1),
        ("MaxPool", [1, 4, 6, 6], 2),
        ("AveragePool", [1, 4, 6, 6], 1),
    ]
    op_type, shape, attrs, _ = found[0]
    t = pool_ops.measure(op_type, shape, attrs, rounds=1, inner=1)
    assert t["ours"] > 0 and t["onnxruntime"] > 0
