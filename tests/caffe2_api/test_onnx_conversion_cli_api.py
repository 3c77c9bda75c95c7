"""caffe2.python.onnx.bin.conversion (click commands), the Caffe2-interface frontend (value info required,
initializers listed as inputs) and Caffe2's zip archives with external values."""

from __future__ import annotations

import io
import json
import zipfile

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("click")
from click.testing import CliRunner  # noqa: E402
from onnx import TensorProto as OT  # noqa: E402
from onnx import helper as oh  # noqa: E402

import framework.caffe2 as hook  # noqa: E402

hook.install()

from caffe2.proto import caffe2_pb2  # noqa: E402
from caffe2.python import core  # noqa: E402
from caffe2.python.onnx import backend as c2  # noqa: E402
from caffe2.python.onnx import frontend  # noqa: E402
from caffe2.python.onnx.bin.conversion import caffe2_to_onnx, onnx_to_caffe2  # noqa: E402

from framework.onnx.importer import OnnxImportError  # noqa: E402


def _relu_net(name="relu_net"):
    net = caffe2_pb2.NetDef(name=name)
    net.op.extend([core.CreateOperator("Relu", ["X"], ["Y"])])
    net.external_input[:] = ["X"]
    net.external_output[:] = ["Y"]
    return net


def test_caffe2_to_onnx_with_an_init_net_and_with_value_info(tmp_path):
    (tmp_path / "net.pb").write_bytes(_relu_net().SerializeToString())
    init = caffe2_pb2.NetDef(name="init")
    init.op.extend([core.CreateOperator("GivenTensorFill", [], ["X"], shape=[2, 2], values=[-1.0, 2.0, -3.0, 4.0])])
    (tmp_path / "init.pb").write_bytes(init.SerializeToString())
    out = tmp_path / "m.onnx"
    res = CliRunner().invoke(caffe2_to_onnx, [str(tmp_path / "net.pb"), "--caffe2-init-net", str(tmp_path / "init.pb"),
                                              "-o", str(out)], catch_exceptions=False)  # fmt: skip
    assert res.exit_code == 0, res.output
    model = onnx.load(str(out))
    assert [n.op_type for n in model.graph.node] == ["Relu"]
    assert [t.name for t in model.graph.initializer] == ["X"] and [i.name for i in model.graph.input] == ["X"]
    onnx.checker.check_model(model)
    np.testing.assert_allclose(c2.prepare(model).run({})[0], [[0, 2], [0, 4]])
    res = CliRunner().invoke(caffe2_to_onnx, [str(tmp_path / "net.pb"), "-o", str(out)])
    assert res.exit_code != 0 and "Could not find value info of inputs: X" in str(res.exception)
    res = CliRunner().invoke(caffe2_to_onnx, [str(tmp_path / "net.pb"), "-o", str(out),
                                              "--value-info", json.dumps({"X": [OT.FLOAT, [3]]})])  # fmt: skip
    assert res.exit_code == 0 and not onnx.load(str(out)).graph.initializer


def test_onnx_to_caffe2_writes_both_nets(tmp_path):
    g = oh.make_graph([oh.make_node("Mul", ["X", "W"], ["Y"])], "g", [oh.make_tensor_value_info("X", OT.FLOAT, (2, 3))],
                      [oh.make_tensor_value_info("Y", OT.FLOAT, (2, 3))],
                      initializer=[oh.make_tensor("W", OT.FLOAT, [2, 3], [1.0] * 6)])  # fmt: skip
    (tmp_path / "m.onnx").write_bytes(oh.make_model(g).SerializeToString())
    args = [str(tmp_path / "m.onnx"), "-o", str(tmp_path / "p.pb"), "--init-net-output", str(tmp_path / "i.pb")]
    res = CliRunner().invoke(onnx_to_caffe2, args, catch_exceptions=False)
    assert res.exit_code == 0
    init, pred = caffe2_pb2.NetDef(), caffe2_pb2.NetDef()
    init.ParseFromString((tmp_path / "i.pb").read_bytes())
    pred.ParseFromString((tmp_path / "p.pb").read_bytes())
    assert [o for op in init.op for o in op.output] == ["W"] and [op.type for op in pred.op] == ["Mul"]


def _zip(model, members):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("__MODEL_PROTO", model.SerializeToString())
        for k, v in members.items():
            z.writestr(k, v)
    buf.seek(0)
    return buf


def _external_model():
    w = onnx.TensorProto(name="W", data_type=OT.FLOAT, dims=[3, 2], raw_data=b"__EXTERNAL")
    x_info = oh.make_tensor_value_info("X", OT.FLOAT, (2, 3))
    y_info = oh.make_tensor_value_info("Y", OT.FLOAT, (2, 2))
    g = oh.make_graph([oh.make_node("MatMul", ["X", "W"], ["Y"])], "g", [x_info], [y_info], initializer=[w])
    return oh.make_model(g)


def test_zip_archive_external_values():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    w = np.arange(6, dtype=np.float32).reshape(3, 2) / 7
    rep = c2.prepare_zip_archive(_zip(_external_model(), {"W": w.tobytes()}))
    np.testing.assert_allclose(rep.run(x).Y, x @ w, rtol=1e-6)
    with pytest.raises(OnnxImportError, match="has 8 bytes; dims \\[3, 2\\] need 24"):
        c2.prepare_zip_archive(_zip(_external_model(), {"W": b"12345678"}))
    with pytest.raises(OnnxImportError, match="no member for it"):
        c2.prepare_zip_archive(_zip(_external_model(), {}))
    with pytest.raises(OnnxImportError, match="not a zip archive"):
        c2.prepare_zip_archive(io.BytesIO(b"plain bytes"))


def test_frontend_requires_value_info_for_inputs():
    with pytest.raises(RuntimeError, match="Could not find value info of inputs: X"):
        frontend.caffe2_net_to_onnx_model(_relu_net(), None, {})
