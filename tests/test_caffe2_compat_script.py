"""Caffe2 user code, unchanged but for the imports.

The three classic Caffe2 tutorials (Basics, Toy Regression, MNIST/LeNet) written the way
their users wrote them, against Caffe2's public names only: ``core``, ``workspace``,
``model_helper``, ``brew``, ``optimizer``, ``caffe2_pb2`` and ``predictor.mobile_exporter``.
In Caffe2 the imports read::

    from caffe2.python import core, workspace, model_helper, brew, optimizer
    from caffe2.python.predictor import mobile_exporter
    from caffe2.proto import caffe2_pb2

MNIST data is replaced by a synthetic set (16x16 uint8 images, three classes of bars) fed
with FeedBlob, so the test runs offline in a few seconds.
"""

import os

import numpy as np
import pytest

from framework import core, workspace
from framework.caffe2.python import brew, model_helper, optimizer
from framework.predictor import mobile_exporter
from framework.proto import caffe2_pb2


@pytest.fixture(autouse=True)
def _fresh_workspace(tmp_path):
    workspace.ResetWorkspace(str(tmp_path))
    yield
    workspace.ResetWorkspace()


# -- Basics: workspaces, operators, nets -------------------------------------------------------
def test_basics_tutorial():
    workspace.FeedBlob("my_x", np.random.rand(2, 3).astype(np.float32))
    assert workspace.HasBlob("my_x") and workspace.Blobs() == ["my_x"]
    workspace.SwitchWorkspace("gutentag", True)
    assert workspace.CurrentWorkspace() == "gutentag" and workspace.Blobs() == []
    workspace.SwitchWorkspace("default")
    assert "gutentag" in workspace.Workspaces() and workspace.HasBlob("my_x")

    op = core.CreateOperator("Relu", ["X"], ["Y"])
    assert op.type == "Relu" and list(op.input) == ["X"]
    workspace.FeedBlob("X", np.random.randn(2, 3).astype(np.float32))
    workspace.RunOperatorOnce(op)
    np.testing.assert_array_equal(workspace.FetchBlob("Y"), np.maximum(workspace.FetchBlob("X"), 0))

    op = core.CreateOperator(
        "GaussianFill", [], "Z", shape=[100, 100], mean=1.0, std=1.0, device_option=core.DeviceOption(caffe2_pb2.CPU)
    )
    workspace.RunOperatorOnce(op)
    z = workspace.FetchBlob("Z")
    assert z.shape == (100, 100) and abs(z.mean() - 1.0) < 0.05

    net = core.Net("my_first_net")
    X = net.GaussianFill([], ["X"], mean=0.0, std=1.0, shape=[2, 3])
    W = net.GaussianFill([], ["W"], mean=0.0, std=1.0, shape=[5, 3])
    b = net.ConstantFill([], ["b"], shape=[5], value=1.0)
    Y = X.FC([W, b], ["Y"])
    assert Y == "Y" and [o.type for o in net.Proto().op] == ["GaussianFill", "GaussianFill", "ConstantFill", "FC"]
    workspace.ResetWorkspace()
    workspace.RunNetOnce(net)
    assert sorted(workspace.Blobs()) == ["W", "X", "Y", "b"]
    workspace.CreateNet(net)
    for _ in range(5):
        workspace.RunNet(net.Proto().name)
        x, w = workspace.FetchBlob("X"), workspace.FetchBlob("W")
        np.testing.assert_allclose(workspace.FetchBlob("Y"), x @ w.T + 1.0, rtol=1e-5, atol=1e-5)


# -- Toy regression: a hand-built training net ---------------------------------------------------
def test_toy_regression_tutorial():
    init_net = core.Net("init")
    W_gt = init_net.GivenTensorFill([], "W_gt", shape=[1, 2], values=[2.0, 1.5])
    B_gt = init_net.GivenTensorFill([], "B_gt", shape=[1], values=[0.5])
    ONE = init_net.ConstantFill([], "ONE", shape=[1], value=1.0)
    ITER = init_net.ConstantFill([], "ITER", shape=[1], value=0, dtype=core.DataType.INT64)
    W = init_net.UniformFill([], "W", shape=[1, 2], min=-1.0, max=1.0)
    B = init_net.ConstantFill([], "B", shape=[1], value=0.0)

    train_net = core.Net("train")
    X = train_net.GaussianFill([], "X", shape=[64, 2], mean=0.0, std=1.0)
    Y_gt = X.FC([W_gt, B_gt], "Y_gt")
    noise = train_net.GaussianFill([], "noise", shape=[64, 1], mean=0.0, std=1.0)
    Y_noise = Y_gt.Add(noise, "Y_noise")
    Y_noise = Y_noise.StopGradient([], "Y_noise")
    Y_pred = X.FC([W, B], "Y_pred")
    dist = train_net.SquaredL2Distance([Y_noise, Y_pred], "dist")
    loss = dist.AveragedLoss([], ["loss"])
    gradient_map = train_net.AddGradientOperators([loss])
    assert gradient_map[W] == "W_grad" and gradient_map["B"] == "B_grad" and gradient_map[Y_pred] == "Y_pred_grad"
    train_net.Iter(ITER, ITER)
    LR = train_net.LearningRate(ITER, "LR", base_lr=-0.1, policy="step", stepsize=20, gamma=0.9)
    train_net.WeightedSum([W, ONE, gradient_map[W], LR], W)
    train_net.WeightedSum([B, ONE, gradient_map[B], LR], B)

    workspace.RunNetOnce(init_net)
    workspace.CreateNet(train_net)
    for _ in range(150):
        workspace.RunNet(train_net.Proto().name)
    np.testing.assert_allclose(workspace.FetchBlob("W"), [[2.0, 1.5]], atol=0.15)
    np.testing.assert_allclose(workspace.FetchBlob("B"), [0.5], atol=0.15)
    assert int(workspace.FetchBlob("ITER")[0]) == 150


# -- MNIST: LeNet with brew, SGD, test model, deploy model, predictor ------------------------------
def AddInput(model, batch_size):
    # In the tutorial the uint8 images come from a DB (TensorProtosDBInput); here from FeedBlob.
    data_uint8, label = "data_uint8", "label"
    data = model.Cast(data_uint8, "data", to=core.DataType.FLOAT)
    data = model.Scale(data, data, scale=float(1.0 / 256))
    data = model.StopGradient(data, data)
    return data, label


def AddLeNetModel(model, data):
    conv1 = brew.conv(model, data, "conv1", dim_in=1, dim_out=8, kernel=5)
    pool1 = brew.max_pool(model, conv1, "pool1", kernel=2, stride=2)
    conv2 = brew.conv(model, pool1, "conv2", dim_in=8, dim_out=16, kernel=3)
    pool2 = brew.max_pool(model, conv2, "pool2", kernel=2, stride=2)
    fc3 = brew.fc(model, pool2, "fc3", dim_in=16 * 2 * 2, dim_out=64)
    relu = brew.relu(model, fc3, fc3)
    pred = brew.fc(model, relu, "pred", 64, 3)
    softmax = brew.softmax(model, pred, "softmax")
    return softmax


def AddAccuracy(model, softmax, label):
    accuracy = brew.accuracy(model, [softmax, label], "accuracy")
    return accuracy


def AddTrainingOperators(model, softmax, label):
    xent = model.LabelCrossEntropy([softmax, label], "xent")
    loss = model.AveragedLoss(xent, "loss")
    AddAccuracy(model, softmax, label)
    model.AddGradientOperators([loss])
    optimizer.build_sgd(model, base_learning_rate=0.1, policy="step", stepsize=1, gamma=0.999)


def AddBookkeepingOperators(model):
    model.Print("accuracy", [], to_file=1)
    model.Print("loss", [], to_file=1)


def synthetic_batch(rng, n):
    """Class k: a bright horizontal bar in rows 5k..5k+3 over uint8 noise."""
    label = rng.integers(0, 3, n).astype(np.int32)
    data = rng.integers(0, 80, (n, 1, 16, 16)).astype(np.uint8)
    for i, k in enumerate(label):
        data[i, 0, 5 * k : 5 * k + 4, 2:14] += 150
    return data, label


def test_mnist_tutorial():
    rng = np.random.default_rng(0)
    arg_scope = {"order": "NCHW"}
    train_model = model_helper.ModelHelper(name="mnist_train", arg_scope=arg_scope)
    data, label = AddInput(train_model, batch_size=32)
    softmax = AddLeNetModel(train_model, data)
    AddTrainingOperators(train_model, softmax, label)
    AddBookkeepingOperators(train_model)
    assert [str(p) for p in train_model.params] == [
        "conv1_w",
        "conv1_b",
        "conv2_w",
        "conv2_b",
        "fc3_w",
        "fc3_b",
        "pred_w",
        "pred_b",
    ]
    assert all(str(train_model.param_to_grad[p]) == f"{p}_grad" for p in train_model.params)

    test_model = model_helper.ModelHelper(name="mnist_test", arg_scope=arg_scope, init_params=False)
    data, label = AddInput(test_model, batch_size=100)
    softmax = AddLeNetModel(test_model, data)
    AddAccuracy(test_model, softmax, label)

    deploy_model = model_helper.ModelHelper(name="mnist_deploy", arg_scope=arg_scope, init_params=False)
    AddLeNetModel(deploy_model, "data")

    # Training.
    workspace.RunNetOnce(train_model.param_init_net)
    x, y = synthetic_batch(rng, 32)
    workspace.FeedBlob("data_uint8", x)
    workspace.FeedBlob("label", y)
    workspace.CreateNet(train_model.net, overwrite=True)
    total_iters = 80
    accuracy = np.zeros(total_iters)
    loss = np.zeros(total_iters)
    for i in range(total_iters):
        x, y = synthetic_batch(rng, 32)
        workspace.FeedBlob("data_uint8", x)
        workspace.FeedBlob("label", y)
        workspace.RunNet(train_model.net)
        accuracy[i] = workspace.blobs["accuracy"]
        loss[i] = workspace.blobs["loss"]
    assert loss[-10:].mean() < 0.3 * loss[:5].mean(), (loss[:5], loss[-10:])
    assert accuracy[-10:].mean() > 0.9
    assert int(workspace.FetchBlob("optimizer_iteration")[0]) == total_iters
    with open(os.path.join(workspace.RootFolder(), "loss.log")) as f:
        assert len(f.read().splitlines()) == total_iters  # the bookkeeping ops wrote one line per run

    # Testing: the test net shares the trained parameters (init_params=False).
    workspace.RunNetOnce(test_model.param_init_net)
    x_test, y_test = synthetic_batch(rng, 100)
    workspace.FeedBlob("data_uint8", x_test)
    workspace.FeedBlob("label", y_test)
    workspace.CreateNet(test_model.net, overwrite=True)
    workspace.RunNet(test_model.net.Proto().name)
    test_accuracy = float(workspace.FetchBlob("accuracy"))
    assert test_accuracy > 0.9
    test_softmax = workspace.FetchBlob("softmax")

    # Deployment: bake the parameters into an init net and run it in a fresh workspace.
    init_net, predict_net = mobile_exporter.Export(workspace, deploy_model.net, deploy_model.params)
    images = x_test.astype(np.float32) / 256
    workspace.ResetWorkspace()
    workspace.RunNetOnce(init_net)
    workspace.CreateNet(predict_net, overwrite=True)
    workspace.FeedBlob("data", images)
    workspace.RunNet(predict_net.name)
    np.testing.assert_allclose(workspace.FetchBlob("softmax"), test_softmax, rtol=1e-4, atol=1e-6)

    # ... and through the Predictor, from the serialized nets.
    workspace.ResetWorkspace()
    predictor = workspace.Predictor(init_net.SerializeToString(), predict_net.SerializeToString())
    (probs,) = predictor.run([images])
    np.testing.assert_allclose(probs, test_softmax, rtol=1e-4, atol=1e-6)
    assert (probs.argmax(axis=1) == y_test).mean() == pytest.approx(test_accuracy)
    assert workspace.Blobs() == []  # the predictor keeps its blobs to itself
