"""The benchmarked models as ONNX graphs (``onnx.helper``), and runners for onnxruntime and
onnx's ``ReferenceEvaluator`` over them.

Each builder takes the same numpy parameters the framework's net uses, so every contender
computes the same numbers. ``onnx`` and ``onnxruntime`` are optional: callers catch
ImportError and leave the column empty.

    model = mlp_model(params)                 # params: [(W0, b0), (W1, b1), (W2, b2)], W as (N, K)
    run, get = ort_runner(model, {"X": x})    # run() does one inference; get() returns the output
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

OPSET = 17


def _onnx():
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    return onnx, TensorProto, helper, numpy_helper


def _model(nodes: list, inputs: list, output: Any, inits: dict[str, np.ndarray], name: str):
    onnx, _, helper, numpy_helper = _onnx()
    graph = helper.make_graph(
        nodes, name, inputs, [output], initializer=[numpy_helper.from_array(v, k) for k, v in inits.items()]
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = min(model.ir_version, 9)  # readable by older onnxruntime builds too
    onnx.checker.check_model(model)
    return model


def _float_input(name: str, shape: tuple):
    _, TensorProto, helper, _ = _onnx()
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, list(shape))


def mlp_model(params: list[tuple[np.ndarray, np.ndarray]], batch: int):
    """Gemm(transB=1)+Relu per hidden layer, Gemm, Softmax(axis=1): the framework's FC/Relu/Softmax net."""
    _, _, helper, _ = _onnx()
    nodes, inits, prev = [], {}, "X"
    for i, (w, b) in enumerate(params):
        inits[f"W{i}"], inits[f"b{i}"] = w, b
        out = f"h{i}"
        nodes.append(helper.make_node("Gemm", [prev, f"W{i}", f"b{i}"], [out], transB=1))
        if i < len(params) - 1:
            nodes.append(helper.make_node("Relu", [out], [f"r{i}"]))
            out = f"r{i}"
        prev = out
    nodes.append(helper.make_node("Softmax", [prev], ["Y"], axis=1))
    n_out = params[-1][0].shape[0]
    return _model(
        nodes, [_float_input("X", (batch, params[0][0].shape[1]))], _float_input("Y", (batch, n_out)), inits, "mlp"
    )


def relu_chain_model(n_ops: int, shape: tuple):
    """``n_ops`` chained Relu nodes (the per-op overhead benchmark)."""
    _, _, helper, _ = _onnx()
    names = ["X"] + [f"x{i}" for i in range(1, n_ops)] + ["Y"]
    nodes = [helper.make_node("Relu", [a], [b]) for a, b in zip(names[:-1], names[1:])]
    return _model(nodes, [_float_input("X", shape)], _float_input("Y", shape), {}, "relu_chain")


def add_chain_model(n_ops: int, shape: tuple, c: np.ndarray):
    """``n_ops`` chained Add nodes, each adding the constant ``c``."""
    _, _, helper, _ = _onnx()
    names = ["X"] + [f"x{i}" for i in range(1, n_ops)] + ["Y"]
    nodes = [helper.make_node("Add", [a, "C"], [b]) for a, b in zip(names[:-1], names[1:])]
    return _model(nodes, [_float_input("X", shape)], _float_input("Y", shape), {"C": c}, "add_chain")


def lenet_model(p: dict[str, np.ndarray], batch: int):
    """bench/lenet.py's net in NCHW: Conv 5x5, MaxPool 2, Conv 5x5, MaxPool 2, Gemm, Relu, Gemm, Softmax."""
    _, _, helper, _ = _onnx()
    nodes = [
        helper.make_node("Conv", ["X", "W1", "b1"], ["c1"], kernel_shape=[5, 5]),
        helper.make_node("MaxPool", ["c1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["p1", "W2", "b2"], ["c2"], kernel_shape=[5, 5]),
        helper.make_node("MaxPool", ["c2"], ["p2"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Flatten", ["p2"], ["f"], axis=1),
        helper.make_node("Gemm", ["f", "W3", "b3"], ["g3"], transB=1),
        helper.make_node("Relu", ["g3"], ["r3"]),
        helper.make_node("Gemm", ["r3", "W4", "b4"], ["g4"], transB=1),
        helper.make_node("Softmax", ["g4"], ["Y"], axis=1),
    ]
    return _model(nodes, [_float_input("X", (batch, 1, 28, 28))], _float_input("Y", (batch, 10)), dict(p), "lenet")


def ort_runner(model, feeds: dict[str, np.ndarray], threads: int = 1) -> tuple[Callable[[], Any], Callable[[], Any]]:
    """(run, get_output) over an onnxruntime CPU session with ``threads`` intra-op threads."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    out_name = sess.get_outputs()[0].name
    res: list = [None]
    run_inner = sess.run

    def run() -> None:
        res[0] = run_inner([out_name], feeds)

    run()
    return run, lambda: res[0][0]


def reference_runner(model, feeds: dict[str, np.ndarray]) -> tuple[Callable[[], Any], Callable[[], Any]]:
    """(run, get_output) over ``onnx.reference.ReferenceEvaluator``."""
    from onnx.reference import ReferenceEvaluator

    ref = ReferenceEvaluator(model)
    res: list = [None]
    run_inner = ref.run

    def run() -> None:
        res[0] = run_inner(None, feeds)

    run()
    return run, lambda: res[0][0]
