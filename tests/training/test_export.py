"""Exporting an inference net and its init net from a trained model."""

import numpy as np
import pytest

from framework import workspace
from framework.caffe2.python import brew, optimizer
from framework.caffe2.python.model_helper import ModelHelper
from framework.core import CreateOperator
from framework.errors import FrameworkError
from framework.predictor.export_pair import export_model, extract_predict_net, init_net_from_workspace
from framework.proto.framework_pb2 import NetDef
from framework.proto.io import read_net

pytestmark = pytest.mark.usefixtures("fresh_workspace")


def _trained_model():
    m = ModelHelper("mlp")
    h = brew.fc(m, "data", "fc1", 4, 5)
    h = brew.relu(m, h, h)
    y = brew.fc(m, h, "fc2", 5, 3)
    # A stand-in loss reading the labels: L = y - label (gradient fed as dL).
    m.net.Sub([y, "label"], "loss")
    m.AddGradientOperators({"loss": "dloss"})
    optimizer.build_sgd(m, 0.1, momentum=0.9)
    return m


def test_extract_drops_gradient_loss_and_optimizer_ops():
    m = _trained_model()
    predict, params = extract_predict_net(m, ["data"], ["fc2"])
    assert [op.type for op in predict.op] == ["FC", "Relu", "FC"]
    assert params == ["fc1_w", "fc1_b", "fc2_w", "fc2_b"]
    assert list(predict.external_input) == ["data"] + params
    assert list(predict.external_output) == ["fc2"]
    assert not any(op.is_gradient_op for op in predict.op)


def test_export_round_trip_gives_the_same_predictions(tmp_path):
    m = _trained_model()
    rng = np.random.default_rng(0)
    x = rng.standard_normal((6, 4)).astype(np.float32)
    workspace.RunNetOnce(m.param_init_net)
    workspace.FeedBlob("data", x)
    workspace.FeedBlob("label", np.zeros((6, 3), np.float32))
    workspace.FeedBlob("dloss", rng.standard_normal((6, 3)).astype(np.float32))
    workspace.CreateNet(m.net)
    workspace.RunNet(m.net.Name(), 3)
    predict, init = export_model(workspace.C(), m, ["data"], ["fc2"], tmp_path)
    # The training run's own forward output is of the pre-update weights: recompute.
    workspace.RunNetOnce(predict)
    expected = workspace.FetchBlob("fc2").copy()
    for name in ("predict_net.pb", "predict_net.pbtxt", "init_net.pb", "init_net.pbtxt"):
        assert (tmp_path / name).exists()
    assert read_net(tmp_path / "predict_net.pbtxt") == predict
    assert read_net(tmp_path / "init_net.pb") == init
    assert {op.type for op in init.op} == {"GivenTensorFill"}

    workspace.ResetWorkspace()
    workspace.RunNetOnce(read_net(tmp_path / "init_net.pb"))
    workspace.FeedBlob("data", x)
    workspace.RunNetOnce(read_net(tmp_path / "predict_net.pb"))
    np.testing.assert_array_equal(workspace.FetchBlob("fc2"), expected)


def test_spatial_bn_and_dropout_switch_to_test_mode():
    net = NetDef(name="train")
    net.op.extend(
        [
            CreateOperator("SpatialBN", ["x", "s", "b", "rm", "riv"], ["y", "rm", "riv", "sm", "siv"], is_test=0),
            CreateOperator("Dropout", ["y"], ["z", "_z_mask"], ratio=0.5, is_test=0),
        ]
    )
    predict, params = extract_predict_net(net, ["x"], ["z"])
    bn, drop = predict.op
    assert list(bn.output) == ["y"] and list(drop.output) == ["z"]
    for op in (bn, drop):
        assert [(a.name, a.i) for a in op.arg if a.name == "is_test"] == [("is_test", 1)]
    assert params == ["s", "b", "rm", "riv"]


def test_export_errors_name_the_blobs():
    net = NetDef(name="n")
    net.op.extend([CreateOperator("Relu", ["x"], ["y"])])
    with pytest.raises(FrameworkError, match=r"reads the inputs \['q'\]"):
        extract_predict_net(net, ["q"], ["y"])
    with pytest.raises(FrameworkError, match=r"writes the outputs \['q'\]"):
        extract_predict_net(net, ["x"], ["q"])
    with pytest.raises(FrameworkError, match="'w' is not in the workspace"):
        init_net_from_workspace(workspace.C(), ["w"])


def test_init_net_keeps_dtypes():
    workspace.FeedBlob("a", np.arange(3, dtype=np.int64))
    workspace.FeedBlob("b", np.ones((2, 2), np.float32))
    init = init_net_from_workspace(workspace.C(), ["a", "b"])
    assert [op.type for op in init.op] == ["GivenTensorInt64Fill", "GivenTensorFill"]
    workspace.ResetWorkspace()
    workspace.RunNetOnce(init)
    assert workspace.FetchBlob("a").dtype == np.int64
    np.testing.assert_array_equal(workspace.FetchBlob("b"), np.ones((2, 2), np.float32))


def test_init_net_uses_mobile_exporters_fills():
    """One implementation of "weights to GivenTensor*Fill ops": export's init net is add_tensor's."""
    from framework.predictor.mobile_exporter import add_tensor

    values = {"f": np.ones((2, 3), np.float32), "b": np.array([True, False]), "s": np.array([b"ab", b"c"], object)}
    expected = NetDef()
    for name, arr in values.items():
        workspace.FeedBlob(name, arr)
        add_tensor(expected, name, arr)
    init = init_net_from_workspace(workspace.C(), list(values))
    assert list(init.op) == list(expected.op)
    workspace.FeedBlob("h", np.ones(2, np.float16))
    with pytest.raises(FrameworkError, match="parameter 'h' cannot go into the init net.*float16"):
        init_net_from_workspace(workspace.C(), ["h"])
