"""Deployment as Caffe2 does it: mobile_exporter.Export -> (init_net, predict_net) -> Predictor."""

import numpy as np
import pytest

from framework import workspace
from framework.caffe2.python import brew
from framework.caffe2.python.model_helper import ModelHelper
from framework.errors import FrameworkError
from framework.predictor import Predictor, mobile_exporter
from framework.proto.framework_pb2 import NetDef

pytestmark = pytest.mark.usefixtures("fresh_workspace")


def _mlp(name, init_params=True):
    m = ModelHelper(name, init_params=init_params)
    h = brew.fc(m, "data", "fc1", dim_in=4, dim_out=5)
    h = brew.relu(m, h, h)
    y = brew.fc(m, h, "fc2", dim_in=5, dim_out=3)
    brew.softmax(m, y, "prob")
    return m


def _reference(x):
    w1, b1, w2, b2 = (workspace.FetchBlob(n) for n in ("fc1_w", "fc1_b", "fc2_w", "fc2_b"))
    z = np.maximum(x @ w1.T + b1, 0) @ w2.T + b2
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def test_export_layout_matches_caffe2():
    train = _mlp("exp_train")
    workspace.RunNetOnce(train.param_init_net)
    deploy = _mlp("exp_deploy", init_params=False)
    assert len(deploy.param_init_net.Proto().op) == 0
    init_net, predict_net = mobile_exporter.Export(workspace, deploy.net, deploy.params)
    assert [op.type for op in init_net.op] == ["GivenTensorFill"] * 5
    assert [op.output[0] for op in init_net.op] == ["fc1_w", "fc1_b", "fc2_w", "fc2_b", "data"]
    dummy = {a.name: a for a in init_net.op[-1].arg}
    assert list(dummy["shape"].ints) == [1, 1]  # the input gets a dummy [1, 1] fill
    w = {a.name: a for a in init_net.op[0].arg}
    assert list(w["shape"].ints) == [5, 4]
    np.testing.assert_array_equal(np.array(w["values"].floats, np.float32), workspace.FetchBlob("fc1_w").ravel())
    assert list(predict_net.external_input) == ["data", "fc1_w", "fc1_b", "fc2_w", "fc2_b"]
    assert list(predict_net.external_output) == ["prob"]  # written and never read
    assert [op.type for op in predict_net.op] == ["FC", "Relu", "FC", "Softmax"]
    assert not any(op.debug_info for op in predict_net.op)


def test_exported_nets_run_in_a_fresh_workspace_and_predictor():
    train = _mlp("run_train")
    workspace.RunNetOnce(train.param_init_net)
    x = np.random.default_rng(0).standard_normal((6, 4)).astype(np.float32)
    expected = _reference(x)
    deploy = _mlp("run_deploy", init_params=False)
    init_net, predict_net = mobile_exporter.Export(workspace, deploy.net, deploy.params)

    workspace.ResetWorkspace()
    workspace.RunNetOnce(init_net)
    workspace.CreateNet(predict_net)
    workspace.FeedBlob("data", x)
    workspace.RunNet(predict_net.name)
    np.testing.assert_allclose(workspace.FetchBlob("prob"), expected, rtol=1e-5, atol=1e-6)

    workspace.ResetWorkspace()
    workspace.FeedBlob("data", np.zeros((1, 1), np.float32))  # the parent's blob must stay untouched
    p = workspace.Predictor(init_net.SerializeToString(), predict_net.SerializeToString())
    (prob,) = p.run([x])
    np.testing.assert_allclose(prob, expected, rtol=1e-5, atol=1e-6)
    (prob2,) = p.run({"data": x[:2]})
    np.testing.assert_allclose(prob2, expected[:2], rtol=1e-5, atol=1e-6)
    assert workspace.Blobs() == ["data"] and workspace.FetchBlob("data").shape == (1, 1)
    assert p.input_names[0] == "data" and p.output_names == ["prob"]


def test_predictor_errors_name_the_inputs():
    train = _mlp("err_train")
    workspace.RunNetOnce(train.param_init_net)
    init_net, predict_net = mobile_exporter.Export(workspace, train.net, train.params)
    p = Predictor(init_net, predict_net)
    with pytest.raises(FrameworkError, match=r"\['datta'\] are not inputs"):
        p.run({"datta": np.ones((1, 4), np.float32)})
    with pytest.raises(FrameworkError, match="6 inputs given"):
        p.run([np.ones((1, 4), np.float32)] * 6)
    with pytest.raises(FrameworkError, match="'nowhere' cannot be fetched"):
        mobile_exporter.Export(workspace, train.net, ["nowhere"])


def test_add_tensor_keeps_dtypes():
    net = NetDef(name="dtypes")
    values = {
        "f": np.arange(6, dtype=np.float32).reshape(2, 3),
        "d": np.array([0.5, -0.25]),  # values travel as float32 (Argument.floats), as in Caffe2
        "i": np.array([[1, -2]], np.int32),
        "l": np.array([2**40], np.int64),
        "b": np.array([True, False]),
    }
    for name, arr in values.items():
        mobile_exporter.add_tensor(net, name, arr)
    workspace.RunNetOnce(net)
    for name, arr in values.items():
        got = workspace.FetchBlob(name)
        assert got.dtype == arr.dtype and got.shape == arr.shape
        np.testing.assert_array_equal(got, arr)
    with pytest.raises(FrameworkError, match="float16"):
        mobile_exporter.add_tensor(net, "h", np.ones(2, np.float16))
