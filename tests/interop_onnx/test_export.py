"""Export of whole nets: the model zoo, in-place nets, NHWC chains, errors, the frontend API, the CLI."""

from __future__ import annotations

import os

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from framework.cli import main as cli_main  # noqa: E402
from framework.core import CreateOperator  # noqa: E402
from framework.memory.workspace import Workspace  # noqa: E402
from framework.net.graph import load_net_def  # noqa: E402
from framework.onnx import OnnxExportError, export  # noqa: E402
from framework.onnx.exporter import needed_init_ops  # noqa: E402
from framework.proto.framework_pb2 import NetDef  # noqa: E402
from tests.interop_onnx.helpers import check_export, run_onnx  # noqa: E402

MODELS = os.path.join(os.path.dirname(__file__), "..", "..", "models")
ZOO = {"logreg_digits": (5, 64), "mlp_digits": (5, 64), "cnn_digits": (5, 1, 8, 8)}


def _model(name):
    init = load_net_def(os.path.join(MODELS, name, "init_net.pbtxt"))
    pred = load_net_def(os.path.join(MODELS, name, "predict_net.pbtxt"))
    ws = Workspace()
    for op in needed_init_ops(init, pred):
        ws.run_operator_once(op)
    return init, pred, ws


@pytest.mark.parametrize("name", sorted(ZOO))
def test_model_zoo_exports_and_agrees(name):
    _, pred, ws = _model(name)
    x = np.random.default_rng(3).standard_normal(ZOO[name]).astype(np.float32)
    model = check_export(pred, ws, {"data": x})
    assert [o.name for o in model.graph.output] == list(pred.external_output)
    assert {i.name for i in model.graph.initializer} >= set(pred.external_input[1:])


@pytest.mark.parametrize("opset", [13, 17, 21])
def test_lower_opsets(opset):
    _, pred, ws = _model("cnn_digits")
    x = np.random.default_rng(4).standard_normal((2, 1, 8, 8)).astype(np.float32)
    model = check_export(pred, ws, {"data": x}, opset=opset)
    assert model.opset_import[0].version == opset


def test_init_net_becomes_initializers():
    init, pred, _ = _model("mlp_digits")
    model = export(pred, init, input_shapes={"data": (2, 64)})
    names = {i.name for i in model.graph.initializer}
    assert names == set(pred.external_input[1:])
    assert [i.name for i in model.graph.input] == ["data"]


def _net(ops, inputs, outputs, name="n"):
    return NetDef(name=name, op=ops, external_input=inputs, external_output=outputs)


def test_in_place_blobs_get_ssa_names_and_outputs_keep_caffe2_names():
    ops = [
        CreateOperator("Relu", ["x"], ["y"]),
        CreateOperator("Scale", ["y"], ["y"], scale=2.0),
        CreateOperator("Add", ["y", "x"], ["y"]),
        CreateOperator("Sigmoid", ["y"], ["y"]),
    ]
    net = _net(ops, ["x"], ["y"])
    x = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    model = check_export(net, Workspace(), {"x": x})
    outs = [o for n in model.graph.node for o in n.output]
    assert len(outs) == len(set(outs)) == 4 and model.graph.output[0].name == "y"


def test_nhwc_chain_cancels_adjacent_transposes():
    rng = np.random.default_rng(1)
    ws = Workspace()
    ws.feed_blob("w", rng.standard_normal((4, 3, 3, 2)).astype(np.float32))
    ws.feed_blob("b", rng.standard_normal(4).astype(np.float32))
    ops = [
        CreateOperator("Conv", ["x", "w", "b"], ["c"], kernel=3, pad=1, order="NHWC"),
        CreateOperator("MaxPool", ["c"], ["p"], kernel=2, stride=2, order="NHWC"),
        CreateOperator("AveragePool", ["p"], ["q"], kernel=2, order="NHWC", legacy_pad=2),
    ]
    net = _net(ops, ["x", "w", "b"], ["q"])
    model = check_export(net, ws, {"x": rng.standard_normal((2, 8, 8, 2)).astype(np.float32)})
    kinds = [n.op_type for n in model.graph.node]
    assert kinds.count("Transpose") == 3, kinds  # x in, w in, q out: none between the three ops


def test_unsupported_ops_listed_together_and_nothing_written(tmp_path):
    ops = [
        CreateOperator("Relu", ["x"], ["y"]),
        CreateOperator("LengthsToRanges", ["l"], ["r"], name="ranges"),
        CreateOperator("Print", ["y"], []),
        CreateOperator("Dropout", ["y"], ["z"], is_test=0, name="drop"),
    ]
    net = _net(ops, ["x", "l"], ["z"])
    with pytest.raises(OnnxExportError) as e:
        export(net, value_info={"x": (1, (2, 2)), "l": (6, (2,))}, opset=17)
    msg = str(e.value)
    assert "op 1 LengthsToRanges 'ranges'" in msg and "op 2 Print" in msg and "opset 17" in msg
    assert "op 3 Dropout 'drop'" in msg and "3 op(s)" in msg
    net = _net([ops[0], ops[3]], ["x"], ["z"])
    with pytest.raises(OnnxExportError, match="op 1 Dropout 'drop'.*is_test"):
        export(net, input_shapes={"x": (2, 2)})


def test_frontend_api_matches_caffe2():
    from framework.onnx.frontend import Caffe2Frontend

    init, pred, _ = _model("logreg_digits")
    model = Caffe2Frontend.caffe2_net_to_onnx_model(pred, init, {"data": (onnx.TensorProto.FLOAT, (3, 64))})
    onnx.checker.check_model(model)
    assert model.graph.input[0].type.tensor_type.shape.dim[0].dim_value == 3
    graph = Caffe2Frontend.caffe2_net_to_onnx_graph(pred, init, {"data": (onnx.TensorProto.FLOAT, (3, 64))})
    assert [n.op_type for n in graph.node] == ["Gemm", "Softmax"]


def test_cli_convert_model_folder_with_check(tmp_path, capsys):
    out = str(tmp_path / "cnn.onnx")
    argv = ["convert", os.path.join(MODELS, "cnn_digits"), "--to", "onnx", "-o", out, "--check", "--untrained"]
    assert cli_main(argv) == 0
    text = capsys.readouterr().out
    assert "shape [1, 1, 8, 8] (from the net" in text and "largest difference" in text
    worst = float(text.strip().splitlines()[-1].split()[-1])
    assert worst < 1e-4
    model = onnx.load(out)
    x = np.zeros((1, 1, 8, 8), np.float32)
    got, _ = run_onnx(model, {"data": x})
    assert got[0].shape == (1, 10)
    assert cli_main(["convert", os.path.join(MODELS, "cnn_digits"), "--to", "onnx", "-o", out]) == 2


def test_cli_convert_net_file_with_shape_and_init(tmp_path):
    out = str(tmp_path / "mlp.onnx")
    d = os.path.join(MODELS, "mlp_digits")
    argv = ["convert", os.path.join(d, "predict_net.pbtxt"), "--init", os.path.join(d, "init_net.pbtxt")]
    assert cli_main(argv + ["--to", "onnx", "-o", out, "--shape", "data=7,64", "--opset", "15"]) == 0
    model = onnx.load(out)
    assert model.opset_import[0].version == 15
    assert [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim] == [7, 64]


def test_cli_convert_refusal_writes_nothing(tmp_path):
    net = _net([CreateOperator("LengthsToRanges", ["l"], ["r"])], ["l"], ["r"])
    path = tmp_path / "net.pbtxt"
    path.write_text(str(net))
    out = tmp_path / "x.onnx"
    assert cli_main(["convert", str(path), "--to", "onnx", "-o", str(out), "--shape", "l=3"]) == 2
    assert not out.exists() and not (tmp_path / "x.onnx.tmp").exists()
