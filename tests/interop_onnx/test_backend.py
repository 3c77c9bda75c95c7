"""The ONNX backend's API (onnx.backend.base.Backend and Caffe2's names) and the CLI on .onnx files."""

from __future__ import annotations

import unittest

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from framework.cli import main as cli_main  # noqa: E402
from framework.onnx import backend  # noqa: E402
from framework.onnx.importer import OnnxImportError  # noqa: E402


def _mlp(opset=17):
    rng = np.random.default_rng(0)
    w = rng.standard_normal((3, 4)).astype(np.float32)
    b = rng.standard_normal(3).astype(np.float32)
    nodes = [
        helper.make_node("Gemm", ["x", "w", "b"], ["h"], transB=1),
        helper.make_node("Relu", ["h"], ["r"]),
        helper.make_node("Softmax", ["r"], ["y"], axis=0),
    ]
    graph = helper.make_graph(
        nodes,
        "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
        initializer=[numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]), w, b


def _ref(x, w, b):
    h = np.maximum(x @ w.T + b, 0)
    e = np.exp(h - h.max(axis=0, keepdims=True))
    return e / e.sum(axis=0, keepdims=True)


def test_prepare_run_and_run_model():
    model, w, b = _mlp()
    x = np.random.default_rng(1).standard_normal((2, 4)).astype(np.float32)
    rep = backend.prepare(model)
    (y,) = rep.run([x])
    np.testing.assert_allclose(y, _ref(x, w, b), rtol=1e-5, atol=1e-6)
    (y2,) = backend.run_model(model, {"x": x})
    np.testing.assert_allclose(y2, y)
    assert backend.supports_device("CPU") and not backend.supports_device("CUDA")


def test_onnx_graph_to_caffe2_net_gives_init_and_predict_nets():
    model, _, _ = _mlp()
    init, predict = backend.Caffe2Backend.onnx_graph_to_caffe2_net(model)
    assert sorted(op.output[0] for op in init.op) == ["b", "w"]
    assert {op.type for op in init.op} == {"GivenTensorFill"}
    # the Gemm of a linear layer (transB=1, a bias of N values) is Caffe2's FC
    assert [op.type for op in predict.op] == ["FC", "Relu", "Transpose", "Softmax", "Transpose"]
    assert list(predict.external_output) == ["y"]


def test_run_node():
    node = helper.make_node("LeakyRelu", ["x"], ["y"], alpha=0.3)
    x = np.array([[-1.0, 2.0]], np.float32)
    (y,) = backend.run_node(node, [x])
    np.testing.assert_allclose(y, [[-0.3, 2.0]])


def test_unsupported_nodes_skip_with_every_node_listed():
    nodes = [
        helper.make_node("Relu", ["x"], ["a"]),
        helper.make_node("Frobnicate", ["a", "a"], ["b"], domain="com.example"),
        helper.make_node("NoSuchOp", ["x"], ["c"]),
    ]
    vi = helper.make_tensor_value_info
    graph = helper.make_graph(
        nodes, "g", [vi("x", TensorProto.FLOAT, [2, 2])], [vi("b", TensorProto.FLOAT, None), vi("c", 1, None)]
    )
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("com.example", 1)]
    model = helper.make_model(graph, opset_imports=opsets)
    with pytest.raises(unittest.SkipTest) as e:
        backend.prepare(model)
    msg = str(e.value)
    assert "node 1 Frobnicate (domain com.example)" in msg and "node 2 NoSuchOp (opset 17)" in msg
    assert "ai.onnx 17" in msg and "Relu" not in msg
    with pytest.raises(OnnxImportError):
        backend.Caffe2Backend.onnx_graph_to_caffe2_net(model)


def test_unsupported_types_skip_rather_than_guess():
    vi = helper.make_tensor_value_info
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "x"], ["y"])], "g", [vi("x", TensorProto.BOOL, [2])], [vi("y", 9, [2])]
    )
    with pytest.raises(unittest.SkipTest, match="bool"):
        backend.prepare(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))


def test_cli_run_and_convert_onnx(tmp_path, capsys):
    model, w, b = _mlp()
    path = tmp_path / "mlp.onnx"
    onnx.save(model, str(path))
    x = np.random.default_rng(2).standard_normal((2, 4)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    out = tmp_path / "y.npy"
    assert cli_main(["run", str(path), "--input", f"x={tmp_path / 'x.npy'}", "--save", str(out)]) == 0
    np.testing.assert_allclose(np.load(out), _ref(x, w, b), rtol=1e-5, atol=1e-6)
    folder = tmp_path / "pair"
    assert cli_main(["convert", str(path), "--to", "caffe2", "-o", str(folder)]) == 0
    assert (folder / "init_net.pb").exists() and (folder / "predict_net.pb").exists()
    out2 = tmp_path / "y2.npy"
    assert cli_main(["run", str(folder), "--input", f"x={tmp_path / 'x.npy'}", "--save", str(out2)]) == 0
    np.testing.assert_allclose(np.load(out2), np.load(out))


def test_exported_models_come_back():
    """framework.onnx.export then the backend: the round trip gives our engine's numbers."""
    import os

    from framework.memory.workspace import Workspace
    from framework.net.graph import load_net_def
    from framework.onnx import export
    from framework.onnx.exporter import needed_init_ops

    d = os.path.join(os.path.dirname(__file__), "..", "..", "models", "cnn_digits")
    init, pred = load_net_def(os.path.join(d, "init_net.pbtxt")), load_net_def(os.path.join(d, "predict_net.pbtxt"))
    ws = Workspace()
    for op in needed_init_ops(init, pred):
        ws.run_operator_once(op)
    x = np.random.default_rng(5).standard_normal((3, 1, 8, 8)).astype(np.float32)
    model = export(pred, input_shapes={"data": x.shape}, workspace=ws)
    (y,) = backend.prepare(model).run([x])
    ws.feed_blob("data", x)
    ws.run_net_once(pred)
    np.testing.assert_allclose(y, ws.fetch_blob("softmax"), rtol=1e-5, atol=1e-6)


def test_run_checks_fed_names_on_every_run():
    # the feedable names are read from the model once; an unknown name is still refused at each run
    model, w, b = _mlp()
    x = np.random.default_rng(2).standard_normal((2, 4)).astype(np.float32)
    rep = backend.prepare(model)
    np.testing.assert_allclose(rep.run({"x": x})[0], _ref(x, w, b), rtol=1e-5, atol=1e-6)
    with pytest.raises(OnnxImportError, match=r"inputs \['z'\] are not inputs of the model"):
        rep.run({"x": x, "z": x})
    np.testing.assert_allclose(rep.run({"x": x})[0], _ref(x, w, b), rtol=1e-5, atol=1e-6)
