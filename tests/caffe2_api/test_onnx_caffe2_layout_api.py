"""Caffe2's ONNX modules under Caffe2's layout: the C++ backend's node rules (C.Caffe2Backend,
C.DummyName), Caffe2 ops inside ONNX graphs, onnx.helper / onnx.workspace, the SSA rewrite,
models.download without a network. References are numpy written from Caffe2's semantics."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto as OT  # noqa: E402
from onnx import helper as oh  # noqa: E402

import framework.caffe2 as hook  # noqa: E402

hook.install()

import caffe2.python._import_c_extension as C  # noqa: E402
from caffe2.proto import caffe2_pb2  # noqa: E402
from caffe2.python import core, workspace  # noqa: E402
from caffe2.python.models.download import ModelDownloader, ModelNotFoundError  # noqa: E402
from caffe2.python.onnx import backend as c2  # noqa: E402
from caffe2.python.onnx.frontend import Caffe2Frontend  # noqa: E402
from caffe2.python.onnx.helper import c2_native_run_net, c2_native_run_op  # noqa: E402
from caffe2.python.onnx.workspace import Workspace  # noqa: E402


@pytest.fixture(autouse=True)
def _hook_installed():
    """The hook installed for each test: some import Caffe2's modules lazily, and another module's test may
    have uninstalled it since this one was imported (a worker runs tests of several modules)."""
    hook.install()


def _types(strs):
    out = []
    for s in strs:
        op = caffe2_pb2.OperatorDef()
        op.ParseFromString(s)
        out.append(op)
    return out


def test_dummy_name_skips_used_names_and_resets():
    g = C.DummyName()
    g.reset({"OC2_DUMMY_1"})
    assert [g.new_dummy_name() for _ in range(3)] == ["OC2_DUMMY_0", "OC2_DUMMY_2", "OC2_DUMMY_3"]
    g.reset()
    assert g.new_dummy_name() == "OC2_DUMMY_0"


def _run_ops(ops, feeds):
    ws = workspace.C.Workspace()
    for k, v in feeds.items():
        ws.feed_blob(k, v)
    for op in ops:
        ws.run_operator_once(op)
    return ws


@pytest.mark.parametrize("trans_b", [0, 1])
def test_gemm_rule_op_sequence_and_values(trans_b):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((3, 2)).astype(np.float32)
    b = rng.standard_normal((4, 2) if trans_b else (2, 4)).astype(np.float32)
    c = rng.standard_normal(4).astype(np.float32)
    node = oh.make_node("Gemm", ["A", "B", "C"], ["Y"], alpha=2.0, beta=3.0, transB=trans_b)
    backend = C.Caffe2Backend()
    # no shapes: MatMul + Add after the two scalings
    _, plain = backend.convert_node(node.SerializeToString())
    assert [op.type for op in _types(plain)] == ["Scale", "Scale", "MatMul", "Add"]
    # C known 1-D, opset 7: FC (B as [N, K]) or FCTransposed (B as [K, N])
    vi = [oh.make_tensor_value_info("C", OT.FLOAT, (4,)).SerializeToString()]
    _, fc = backend.convert_node(node.SerializeToString(), vi, 7)
    ops = _types(fc)
    assert [op.type for op in ops] == ["Scale", "Scale", "FC" if trans_b else "FCTransposed"]
    bm = b.T if trans_b else b
    expected = 2.0 * (a @ bm) + 3.0 * c
    for seq in (_types(plain), ops):
        ws = _run_ops(seq, {"A": a, "B": b, "C": c})
        np.testing.assert_allclose(ws.fetch_blob("Y"), expected, rtol=1e-5)


def test_unexpected_argument_is_refused():
    node = oh.make_node("Add", ["X", "Y"], ["Z"], foo=42)
    with pytest.raises(RuntimeError, match="Don't know how to map unexpected argument foo"):
        C.Caffe2Backend().convert_node(node.SerializeToString())


def test_unknown_op_type_is_refused():
    node = oh.make_node("NoSuchOpAnywhere", ["X"], ["Z"])
    with pytest.raises(RuntimeError, match="Don't know how to translate op NoSuchOpAnywhere"):
        C.Caffe2Backend().convert_node(node.SerializeToString())


@pytest.mark.parametrize(
    "elem, fill, out_dtype",
    [(OT.FLOAT, "GivenTensorFill", np.float32), (OT.DOUBLE, "GivenTensorDoubleFill", np.float64),
     (OT.INT8, "GivenTensorIntFill", np.int32), (OT.UINT32, "GivenTensorInt64Fill", np.int64),
     (OT.BOOL, "GivenTensorBoolFill", np.bool_)],
)  # fmt: skip
def test_tensor_filling_op_by_type(elem, fill, out_dtype):
    vals = np.array([[1, 0, 3], [4, 5, 0]]).astype(oh.tensor_dtype_to_np_dtype(elem))
    tensor = oh.make_tensor("t", elem, [2, 3], vals.flatten().tolist())
    op = c2.Caffe2Backend._create_tensor_filling_op(tensor)
    assert op.type == fill and list(op.output) == ["t"] and not op.input
    op2 = caffe2_pb2.OperatorDef()
    op2.ParseFromString(C.Caffe2Backend()._build_tensor_filling_op(tensor.SerializeToString(), "u"))
    assert op2.type == fill and list(op2.output) == ["u"]
    _, out = c2_native_run_op(op, inputs=[])
    assert out[0].dtype == out_dtype
    np.testing.assert_array_equal(out.t, vals.astype(out_dtype))


def test_caffe2_op_inside_onnx_graph_runs_as_that_op():
    x = np.arange(6, dtype=np.float32).reshape(2, 3) - 2
    graph = oh.make_graph(
        [oh.make_node("Relu", ["X"], ["R"]), oh.make_node("Scale", ["R"], ["Y"], scale=-1.5)],
        "g", [oh.make_tensor_value_info("X", OT.FLOAT, (2, 3))], [oh.make_tensor_value_info("Y", OT.FLOAT, (2, 3))],
    )  # fmt: skip
    out = c2.prepare(oh.make_model(graph)).run({"X": x})
    np.testing.assert_allclose(out["Y"], -1.5 * np.maximum(x, 0))
    np.testing.assert_allclose(out.Y, out[0])


@pytest.mark.parametrize(
    "starts, ends, axes, expected",
    [([0, 0], [-1, 4], None, (slice(0, -1), slice(0, 4))), ([0, 1], [4, 5], [1, 0], (slice(1, 5), slice(0, 4)))],
)
def test_dynamic_slice(starts, ends, axes, expected):
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    names = ["X", "S", "E"] + (["A"] if axes is not None else [])
    infos = [oh.make_tensor_value_info("X", OT.FLOAT, (2, 4))] + [
        oh.make_tensor_value_info(n, OT.INT64, (2,)) for n in names[1:]
    ]
    graph = oh.make_graph([oh.make_node("DynamicSlice", names, ["Y"])], "g", infos,
                          [oh.make_tensor_value_info("Y", OT.FLOAT, None)])  # fmt: skip
    feeds = [x, np.array(starts), np.array(ends)] + ([np.array(axes)] if axes is not None else [])
    out = c2.prepare(oh.make_model(graph)).run(feeds)
    np.testing.assert_array_equal(out[0], x[expected])


def test_onnx_workspace_is_private_and_switches_back():
    before = workspace.CurrentWorkspace()
    ws = Workspace()
    ws.FeedBlob("only_here", np.ones(2, np.float32))
    assert ws.HasBlob("only_here") and not workspace.HasBlob("only_here")
    assert workspace.CurrentWorkspace() == before
    with pytest.raises(RuntimeError, match="missing_blob"):
        ws.FetchBlob("missing_blob")
    assert workspace.CurrentWorkspace() == before


def test_native_run_net_feeds_unset_inputs():
    init = caffe2_pb2.NetDef()
    init.op.extend([core.CreateOperator("GivenTensorFill", [], ["W"], values=[2.0, 3.0], shape=[2])])
    net = caffe2_pb2.NetDef()
    net.external_input[:] = ["W", "X"]
    net.external_output[:] = ["Y"]
    net.op.extend([core.CreateOperator("Mul", ["X", "W"], ["Y"])])
    _, out = c2_native_run_net(init, net, [np.array([1.0, 4.0], np.float32)])
    np.testing.assert_allclose(out.Y, [2.0, 12.0])


def test_ssa_rewrite_renames_rewritten_blobs_only():
    net = caffe2_pb2.NetDef()
    net.external_input[:] = ["X", "s"]
    net.op.extend([core.CreateOperator("Relu", ["X"], ["Y"]), core.CreateOperator("Add", ["Y", "s"], ["Y"]),
                   core.CreateOperator("Relu", ["Y"], ["Z"])])  # fmt: skip
    net.external_output[:] = ["Y", "Z"]
    Caffe2Frontend.ssa_rewrite(net, None, {})
    assert [list(op.input) for op in net.op] == [["X"], ["Y_1", "s"], ["Y_2"]]
    assert [list(op.output) for op in net.op] == [["Y_1"], ["Y_2"], ["Z"]]
    assert list(net.external_output) == ["Y_2", "Z"]
    ssa, versions = core.get_ssa(net)
    assert versions == {"X": 0, "s": 0, "Y_1": 1, "Y_2": 1, "Z": 1}
    assert core.get_undefined_blobs(ssa) == {"X", "s"}


def test_model_downloader_reads_a_local_folder_and_never_downloads(tmp_path, monkeypatch):
    monkeypatch.setenv("MY_MODELS", str(tmp_path))
    d = ModelDownloader("MY_MODELS")
    with pytest.raises(ModelNotFoundError, match="downloads nothing"):
        d.get_c2_model("tiny")
    folder = tmp_path / "tiny"
    folder.mkdir()
    net = caffe2_pb2.NetDef(name="whatever")
    net.op.extend([core.CreateOperator("Relu", ["data"], ["out"])])
    (folder / "predict_net.pb").write_bytes(net.SerializeToString())
    (folder / "init_net.pb").write_bytes(caffe2_pb2.NetDef().SerializeToString())
    (folder / "value_info.json").write_text('{"data": [1, [1, 3]]}')
    init, predict, info = d.get_c2_model("tiny")
    assert (init.name, predict.name, predict.op[0].type) == ("tiny_init", "tiny", "Relu")
    assert info == {"data": [1, [1, 3]]}


def test_2018_dummy_name_and_no_download(tmp_path):
    from caffe2.python.models.download import deleteDirectory, downloadFromURLToFile, getURLFromName
    from caffe2.python.onnx.helper import dummy_name

    assert dummy_name({"OC2_DUMMY_0"}) is None
    assert (dummy_name(), dummy_name()) == ("OC2_DUMMY_1", "OC2_DUMMY_2")
    url = getURLFromName("squeezenet", "init_net.pb")
    assert url.endswith("/squeezenet/init_net.pb")
    with pytest.raises(ModelNotFoundError, match="downloads nothing"):
        downloadFromURLToFile(url, str(tmp_path / "x.pb"), show_progress=False)
    (tmp_path / "d" / "e").mkdir(parents=True)
    (tmp_path / "d" / "e" / "f").write_text("x")
    deleteDirectory(str(tmp_path / "d"))
    assert not (tmp_path / "d").exists()
