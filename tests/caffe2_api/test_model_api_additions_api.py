"""Caffe2 API pieces the operator tests use: model_helper.ExtractPredictorNet, Blob.serialize,
Net.AddScopedExternalInputs, brew.conv(use_cudnn=...), timeout_guard, rnn.rnn_cell_test_util."""

import subprocess
import sys
import textwrap

import numpy as np
import pytest

import framework.caffe2 as hook
from framework import core, workspace
from framework.caffe2.python import brew, scope
from framework.caffe2.python.model_helper import ExtractPredictorNet, ModelHelper
from framework.errors import FrameworkError
from framework.memory.blob import Blob
from framework.proto import caffe2_pb2


@pytest.fixture(autouse=True)
def _fresh():
    workspace.ResetWorkspace()
    yield
    workspace.ResetWorkspace()


def _training_net():
    net = core.Net("train")
    net.AddExternalInput("data", "label", "fc_w", "fc_b", "unused_w")
    net.Copy("raw", "data_copy")  # before the first op reading an input: dropped
    net.FC(["data", "fc_w", "fc_b"], "fc")
    net.Relu("fc", "pred")
    net.Mul(["pred", "unused_w"], "side")  # reads a disabled input: dropped
    net.SoftmaxWithLoss(["pred", "label"], ["softmax", "loss"])  # after the last op writing an output
    net.AddExternalOutput("pred")
    return net


def test_extract_predictor_net_keeps_the_inference_ops():
    train = _training_net()
    before = train.Proto().SerializeToString()
    device = core.DeviceOption(1, 0)
    pred_net, params = ExtractPredictorNet(
        train.Proto(), ["data"], ["pred"], device=device, renames={"pred": "out"}, disabled_inputs=["unused_w"]
    )
    proto = pred_net.Proto()
    assert proto.name.startswith("train_predict")
    assert [op.type for op in proto.op] == ["FC", "Relu"]
    assert list(proto.op[1].output) == ["out"]
    assert all(op.device_option.device_type == 1 for op in proto.op)
    assert sorted(params) == ["fc_b", "fc_w"]
    assert set(proto.external_input) == {"data", "fc_w", "fc_b"} and list(proto.external_output) == ["out"]
    assert train.Proto().SerializeToString() == before  # the training net is not touched
    # it runs: FC then Relu
    rng = np.random.default_rng(0)
    x, w, b = rng.standard_normal((2, 3)), rng.standard_normal((4, 3)), rng.standard_normal(4)
    for name, value in dict(data=x, fc_w=w, fc_b=b).items():
        workspace.FeedBlob(name, value.astype(np.float32))
    proto.ClearField("device_option")
    for op in proto.op:
        op.ClearField("device_option")
    workspace.RunNetOnce(proto)
    np.testing.assert_allclose(workspace.FetchBlob("out"), np.maximum(x @ w.T + b, 0), rtol=1e-5)


def test_extract_predictor_net_errors():
    train = _training_net()
    with pytest.raises(FrameworkError, match="no op .* reads"):
        ExtractPredictorNet(train.Proto(), ["nothing"], ["pred"])
    with pytest.raises(FrameworkError, match="no op .* writes"):
        ExtractPredictorNet(train.Proto(), ["data"], ["nothing"])
    bn = core.Net("bn")
    bn.AddExternalInput("x", "s", "b", "m", "v")
    bn.SpatialBN(["x", "s", "b", "m", "v"], ["y", "m", "v", "sm", "siv"], is_test=0)
    with pytest.raises(FrameworkError, match="is_test=0"):
        ExtractPredictorNet(bn.Proto(), ["x"], ["y"])


def test_blob_serialize_round_trip():
    ws = workspace.C.Workspace()
    ws.create_blob("a").feed(np.arange(6, dtype=np.int32).reshape(2, 3))
    data = ws.blobs["a"].serialize("renamed")
    proto = caffe2_pb2.BlobProto.FromString(data)
    assert proto.name == "renamed" and list(proto.tensor.dims) == [2, 3]
    assert proto.tensor.data_type == caffe2_pb2.TensorProto.INT32
    other = Blob("b")
    other.deserialize(data)
    np.testing.assert_array_equal(other.fetch(), np.arange(6).reshape(2, 3))
    ws.create_blob("s").feed(b"text")
    assert caffe2_pb2.BlobProto.FromString(ws.blobs["s"].serialize("s")).content == b"text"


def test_add_scoped_external_inputs():
    net = core.Net("scoped")
    with scope.NameScope("outer"):
        refs = net.AddScopedExternalInputs("a", "b")
        one = net.AddScopedExternalInputs("c")
    assert [str(r) for r in refs] == ["outer/a", "outer/b"] and [str(r) for r in one] == ["outer/c"]
    assert list(net.Proto().external_input) == ["outer/a", "outer/b", "outer/c"]


@pytest.mark.parametrize("model_default", [None, True, False])
def test_brew_conv_records_use_cudnn_as_engine(model_default):
    arg_scope = {} if model_default is None else {"use_cudnn": model_default}
    default = True if model_default is None else model_default
    model = ModelHelper(name="m", arg_scope=arg_scope)
    for op_cudnn in (None, True, False):
        for engine in (None, "", "CUDNN"):
            kwargs = {}
            if op_cudnn is not None:
                kwargs["use_cudnn"] = op_cudnn
            if engine is not None:
                kwargs["engine"] = engine
            use = default if op_cudnn is None else op_cudnn
            if (use and engine == "") or (not use and engine == "CUDNN"):
                with pytest.raises(ValueError):
                    brew.conv(model, "x", "y", 2, 2, 3, **kwargs)
                continue
            brew.conv(model, "x", "y", 2, 2, 3, **kwargs)
            op = model.Proto().op[-1]
            assert op.engine == ("CUDNN" if use else (engine or ""))
            assert any(a.name == "exhaustive_search" for a in op.arg) == use


def test_timeout_guard_is_disarmed_by_an_exception_in_the_block():
    code = textwrap.dedent(
        """
        import time
        from framework.caffe2.python import timeout_guard
        try:
            with timeout_guard.CompleteInTimeOrDie(0.3):
                raise ValueError("inside")
        except ValueError:
            pass
        time.sleep(1.0)  # past the timeout: no SIGINT may come
        print("survived")
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "survived" in done.stdout, done.stderr


def test_rnn_cell_test_util_prepares_the_net():
    hook.install()
    from caffe2.python.rnn import rnn_cell_test_util as util

    x = np.array([-2.0, 0.0, 3.0])
    np.testing.assert_allclose(util.sigmoid(x), 1 / (1 + np.exp(-x)))
    np.testing.assert_allclose(util.tanh(x), np.tanh(x), atol=1e-12)
    seen = {}

    def create_rnn(model, input_blob, seq_lengths, states, **kwargs):
        seen.update(kwargs, scope_now=scope.CurrentNameScope(), states=[str(s) for s in states])
        model.param_init_net.ConstantFill([], "w", shape=[1], value=2.0)
        return [model.net.Relu(input_blob, "out")]

    np.random.seed(0)
    outputs, net, inputs = util._prepare_rnn(
        3, 2, 4, create_rnn, outputs_with_grads=[0], forget_bias=0.5, T=3, two_d_initial_states=False, dim_out=[4, 5]
    )
    names = [str(b) for b in inputs]
    assert names[:-1] == ["state_0/layer_0", "state_1/layer_0", "state_0/layer_1", "state_1/layer_1"]
    assert names[-1] == "test_name_scope/input_blob" and seen["states"] == names[:-1]
    assert seen["scope_now"] == "test_name_scope/" and seen["scope"] == "external/recurrent"
    assert seen["static_rnn_unroll_size"] == 3 and seen["forget_bias"] == 0.5 and seen["dim_out"] == [4, 5]
    assert workspace.FetchBlob("state_1/layer_1").shape == (1, 2, 5)
    assert workspace.FetchBlob("test_name_scope/w")[0] == 2.0  # the param init net ran
    lengths = workspace.FetchBlob("test_name_scope/seq_lengths")
    assert lengths.dtype == np.int32 and lengths.shape == (2,) and 1 <= lengths.min() <= lengths.max() <= 3
    _, _, two_d = util._prepare_rnn(2, 3, 4, create_rnn, [0], 0.0, two_d_initial_states=True)
    assert workspace.FetchBlob(str(two_d[0])).shape == (3, 4)
    assert str(outputs[0]) == "test_name_scope/out" and net.Proto().op[-1].type == "Relu"


def test_lstm_inside_a_name_scope_names_its_outputs_once():
    from framework.caffe2.python import rnn_cell

    hook.install()
    from caffe2.python.rnn import rnn_cell_test_util as util

    np.random.seed(1)
    outputs, net, inputs = util._prepare_rnn(
        3, 2, 4, rnn_cell.LSTM, outputs_with_grads=[0], forget_bias=0.0, two_d_initial_states=False
    )
    names = [str(o) for o in outputs]
    assert names[0] == "test_name_scope/external/recurrent/hidden_state_all"
    rnn = next(op for op in net.Proto().op if op.type == "RecurrentNetwork")
    alias_dst = next(a.strings for a in rnn.arg if a.name == "alias_dst")
    assert [s.decode() for s in alias_dst] == list(rnn.output[: len(alias_dst)])
    workspace.FeedBlob(str(inputs[-1]), np.random.randn(3, 2, 4).astype(np.float32))
    workspace.RunNetOnce(net)
    hidden_all = workspace.FetchBlob(names[0])
    lengths = workspace.FetchBlob("test_name_scope/seq_lengths")
    assert hidden_all.shape == (3, 2, 4)
    for b in range(2):  # the last output is the hidden state at each sequence's last step
        np.testing.assert_allclose(workspace.FetchBlob(names[1])[0, b], hidden_all[lengths[b] - 1, b], rtol=1e-6)


def test_extract_predictor_net_of_an_lstm_runs():
    from framework.caffe2.python import rnn_cell

    model = ModelHelper(name="lstm_extract")
    output, *_ = rnn_cell.LSTM(
        model=model,
        input_blob="input",
        seq_lengths="seqlengths",
        initial_states=("hidden_init", "cell_init"),
        dim_in=3,
        dim_out=4,
        scope="test",
        drop_states=True,
        return_last_layer_only=True,
    )
    workspace.RunNetOnce(model.param_init_net)
    params = {b: workspace.FetchBlob(b) for b in workspace.Blobs()}
    pred, exported = ExtractPredictorNet(model.net.Proto(), ["input"], [output], device=core.DeviceOption(0, 1))
    proto = pred.Proto()
    rnn = next(op for op in proto.op if op.type == "RecurrentNetwork")
    assert not any(a.name == "backward_step_net" for a in rnn.arg)
    step = next(a.n for a in rnn.arg if a.name == "step_net")
    assert all(op.device_option.device_id == 1 for op in step.op)
    assert "seqlengths" in proto.external_input and set(params) & set(exported)
    workspace.ResetWorkspace()
    for name in proto.external_input:
        if name == "seqlengths":
            workspace.FeedBlob(name, np.array([5, 5], np.int32))
        elif name == "input":
            workspace.FeedBlob(name, np.random.randn(5, 2, 3).astype(np.float32))
        elif name in params:
            workspace.FeedBlob(name, params[name])
        else:
            workspace.FeedBlob(name, np.zeros((1, 2, 4), np.float32))
    for op in proto.op:
        op.ClearField("device_option")
    workspace.RunNetOnce(proto)
    assert workspace.FetchBlob(str(output)).shape == (5, 2, 4)


def test_gradient_checker_get_loss_and_grad():
    from framework.caffe2.python import gradient_checker

    checker = gradient_checker.GradientChecker(stepsize=0.01, threshold=0.01)
    x = np.array([[1.0, -2.0], [3.0, 0.5]], np.float32)
    w = np.array([[0.5, 1.0], [-1.0, 2.0], [0.0, 1.0]], np.float32)
    b = np.array([0.1, 0.2, 0.3], np.float32)
    op = core.CreateOperator("FC", ["X", "W", "b"], ["Y"])
    grad_ops, g_in = core.GradientRegistry.GetGradientForOp(op, ["Y_grad"])
    loss, grad = checker.GetLossAndGrad(op, grad_ops, [x, w, b], op.input, 1, g_in[1], [0])
    y = x @ w.T + b
    np.testing.assert_allclose(loss, 0.5 * np.sum(y**2), rtol=1e-5)
    np.testing.assert_allclose(grad, y.T @ x, rtol=1e-5)  # dL/dW with dL/dY = Y
    # a sparse gradient comes back dense
    table = np.arange(8, dtype=np.float32).reshape(4, 2)
    idx = np.array([2, 0, 2], np.int64)
    gather = core.CreateOperator("Gather", ["T", "I"], ["G"])
    grad_ops, g_in = core.GradientRegistry.GetGradientForOp(gather, ["G_grad"])
    loss, grad = checker.GetLossAndGrad(gather, grad_ops, [table, idx], gather.input, 0, g_in[0], [0])
    expected = np.zeros_like(table)
    np.add.at(expected, idx, table[idx])
    np.testing.assert_allclose(grad, expected)
    np.testing.assert_allclose(loss, 0.5 * np.sum(table[idx] ** 2))


def test_initializer_pair_with_extra_items():
    # Caffe2 reads (op, kwargs) from the first two items of the tuple (crf_test passes three)
    model = ModelHelper(name="init_extra")
    brew.fc(model, "x", "y", 3, 2, ("UniformFill", {"min": -1.0}, {"max": 1.0}), ("ConstantFill", {"value": 0.5}))
    ops = {op.output[0]: op for op in model.param_init_net.Proto().op}
    assert ops["y_w"].type == "UniformFill" and {a.name: a.f for a in ops["y_w"].arg}["min"] == -1.0
    assert not any(a.name == "max" for a in ops["y_w"].arg)
    workspace.RunNetOnce(model.param_init_net)
    w = workspace.FetchBlob("y_w")
    assert w.shape == (2, 3) and w.min() >= -1.0 and w.max() <= 1.0
    np.testing.assert_array_equal(workspace.FetchBlob("y_b"), [0.5, 0.5])


def test_gradient_checker_get_loss_and_grad_2018_form():
    from framework.caffe2.python import gradient_checker

    checker = gradient_checker.GradientChecker(stepsize=0.01, threshold=0.01)
    x = np.array([[1.0, -2.0]], np.float32)
    w = np.array([[0.5, 1.0]], np.float32)
    workspace.FeedBlob("W", w)
    workspace.FeedBlob("b", np.zeros(1, np.float32))
    op = core.CreateOperator("FC", ["X", "W", "b"], ["Y"])
    grad_ops, g_in = core.GradientRegistry.GetGradientForOp(op, ["Y_grad"])
    # (x, input_name, grad_name, outputs_with_grads): the other inputs are already in the workspace
    loss, grad = checker.GetLossAndGrad(op, grad_ops, x, "X", g_in[0], [0])
    y = x @ w.T
    np.testing.assert_allclose(loss, 0.5 * np.sum(y**2), rtol=1e-6)
    np.testing.assert_allclose(grad, y @ w, rtol=1e-6)


def test_gradient_checker_with_fewer_values_than_inputs_fails_to_run():
    # Caffe2's CheckSimple feeds the values given, in order, into a workspace of its own: an input left
    # without a value is missing when the op runs, a RuntimeError (tests catch that, e.g. NanCheck's).
    from framework.caffe2.python import gradient_checker
    from framework.errors import BlobNotFoundError

    checker = gradient_checker.GradientChecker(stepsize=0.01, threshold=0.01)
    op = core.CreateOperator("NanCheck", ["X", "other"], ["Y"])
    with pytest.raises(RuntimeError, match="'other' has no value") as info:
        checker.CheckSimple(op, [np.ones((2, 3), np.float32)], 0, [0])
    assert isinstance(info.value, BlobNotFoundError)
    ok, grad, estimate = checker.CheckSimple(op, [np.ones((2, 3), np.float32), np.ones(3, np.float32)], 0, [0])
    assert ok and grad.shape == (2, 3)
