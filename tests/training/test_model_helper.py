"""ModelHelper, brew and the optimizer builders: structure and one-step numbers."""

import numpy as np
import pytest

from framework import workspace
from framework.caffe2.python import brew, optimizer
from framework.caffe2.python.model_helper import ModelHelper, ParameterTags
from framework.errors import FrameworkError
from framework.ops import has_op

pytestmark = pytest.mark.usefixtures("fresh_workspace")


def _types(net):
    return [op.type for op in net.Proto().op]


def _linear(name="lin", dim_in=3, dim_out=2, **kw):
    m = ModelHelper(name, **kw)
    y = brew.fc(m, "x", "y", dim_in=dim_in, dim_out=dim_out)
    return m, y


def test_fc_creates_caffe2_named_params():
    m, y = _linear()
    assert str(y) == "y"
    assert [str(p) for p in m.params] == ["y_w", "y_b"]
    assert [str(p) for p in m.weights] == ["y_w"] and [str(p) for p in m.biases] == ["y_b"]
    init = m.param_init_net.Proto().op
    assert [(o.type, list(o.output)) for o in init] == [("XavierFill", ["y_w"]), ("ConstantFill", ["y_b"])]
    assert list(init[0].arg[0].ints) == [2, 3] and list(init[1].arg[0].ints) == [2]
    op = m.net.Proto().op[0]
    assert op.type == "FC" and list(op.input) == ["x", "y_w", "y_b"]
    assert {a.name for a in op.arg} <= {"axis"}  # scope keys FC does not declare are dropped
    assert m.param_init_net.Proto().name == "lin_init"


def test_init_params_false_declares_without_ops():
    m, _ = _linear(init_params=False)
    assert [str(p) for p in m.params] == ["y_w", "y_b"]
    assert len(m.param_init_net.Proto().op) == 0


def test_custom_initializers_and_get_params():
    m = ModelHelper("m")
    brew.fc(m, "x", "a", 3, 4, weight_init=("GaussianFill", {"std": 0.1}), bias_init=("ConstantFill", {"value": 0.5}))
    ops = m.param_init_net.Proto().op
    assert ops[0].type == "GaussianFill" and ops[1].type == "ConstantFill"
    assert m.GetParams() == m.params and m.GetParams("nope") == []
    assert m.get_param_info("a_w").tags == [ParameterTags.WEIGHT]


def test_arg_scope_priority():
    m = ModelHelper("m", arg_scope={"order": "NHWC"})
    assert m.arg_scope["order"] == "NHWC"
    with brew.arg_scope([brew.fc], axis=1):
        brew.fc(m, "x", "a", 3, 4)
        brew.fc(m, "a", "b", 4, 4, axis=2)
    brew.fc(m, "b", "c", 4, 4)
    axes = [[a.i for a in op.arg if a.name == "axis"] for op in m.net.Proto().op]
    assert axes == [[1], [2], []]


def test_arg_scope_rejects_unknown_helper():
    with pytest.raises(ValueError, match="not a brew helper"):
        with brew.arg_scope(["nope"], x=1):
            pass


def test_helper_needs_a_model():
    with pytest.raises(TypeError, match="ModelHelper"):
        brew.fc("x", "y", "z", 1, 1)


def test_layer_helpers_build_caffe2_ops():
    _need("MaxPool", "AveragePool")
    m = ModelHelper("m")
    c = brew.conv(m, "data", "conv1", dim_in=1, dim_out=4, kernel=3, pad=1)
    assert [str(p) for p in m.params] == ["conv1_w", "conv1_b"]
    assert list(m.param_init_net.Proto().op[0].arg[0].ints) == [4, 1, 3, 3]
    brew.relu(m, c, c)
    brew.max_pool(m, c, "pool1", kernel=2, stride=2)
    brew.average_pool(m, "pool1", "apool", kernel=2)
    brew.leaky_relu(m, "apool", "lr", alpha=0.2)
    brew.sigmoid(m, "lr", "sg")
    brew.tanh(m, "sg", "th")
    brew.sum(m, ["th", "sg"], "s")
    brew.transpose(m, "s", "t", axes=[0, 1, 3, 2])
    brew.concat(m, ["t", "s"], "cc", axis=1)
    brew.iter(m, "it")
    types = _types(m.net)
    assert types == [
        "Conv",
        "Relu",
        "MaxPool",
        "AveragePool",
        "LeakyRelu",
        "Sigmoid",
        "Tanh",
        "Sum",
        "Transpose",
        "Concat",
        "Iter",
    ]
    conv = m.net.Proto().op[0]
    args = {a.name: a for a in conv.arg}
    assert args["kernel"].i == 3 and args["order"].s == b"NCHW" and args["pad"].i == 1
    assert list(m.net.Proto().op[9].output) == ["cc", "_cc_concat_dims"]


def _need(*ops):
    missing = [o for o in ops if not has_op(o)]
    if missing:
        pytest.skip(f"ops not registered yet: {missing}")


def test_softmax_and_accuracy_helpers():
    _need("Softmax", "Accuracy")
    m = ModelHelper("m")
    brew.softmax(m, "x", "sm")
    brew.accuracy(m, ["sm", "label"], "acc", top_k=1)
    assert _types(m.net) == ["Softmax", "Accuracy"]


def test_spatial_bn_and_dropout_helpers():
    _need("SpatialBN", "Dropout")
    m = ModelHelper("m")
    brew.spatial_bn(m, "x", "bn", dim_in=3, epsilon=1e-3, momentum=0.9)
    op = m.net.Proto().op[0]
    assert list(op.input) == ["x", "bn_s", "bn_b", "bn_rm", "bn_riv"]
    assert list(op.output) == ["bn", "bn_rm", "bn_riv", "bn_sm", "bn_siv"]
    assert [str(p) for p in m.params] == ["bn_s", "bn_b"]
    assert [str(p) for p in m.GetComputedParams()] == ["bn_rm", "bn_riv"]
    brew.dropout(m, "bn", "d", ratio=0.5, is_test=0)
    assert list(m.net.Proto().op[1].output) == ["d", "_d_mask"]
    with pytest.raises(ValueError, match="is_test"):
        brew.dropout(m, "bn", "d2")


def test_register_custom_helper():
    def double_fc(model, blob_in, blob_out, dim, **kwargs):
        h = brew.fc(model, blob_in, blob_out + "_a", dim, dim)
        return brew.fc(model, h, blob_out, dim, dim)

    brew.Register(double_fc)
    m = ModelHelper("m")
    brew.double_fc(m, "x", "y", 2)
    assert _types(m.net) == ["FC", "FC"] and brew.has_helper("double_fc")


def test_add_gradient_operators_only_once():
    m, y = _linear()
    grads = m.AddGradientOperators({y: "dy"})
    assert {str(k): str(v) for k, v in m.param_to_grad.items()} == {"y_w": "y_w_grad", "y_b": "y_b_grad"}
    assert str(grads["x"]) == "x_grad"
    with pytest.raises(FrameworkError, match="once"):
        m.AddGradientOperators({y: "dy"})


def test_optimizer_needs_gradients():
    m, _ = _linear()
    with pytest.raises(FrameworkError, match="AddGradientOperators"):
        optimizer.build_sgd(m, 0.1)


def _run_steps(m, x, dy, steps):
    workspace.RunNetOnce(m.param_init_net)
    w0, b0 = workspace.FetchBlob("y_w").copy(), workspace.FetchBlob("y_b").copy()
    workspace.FeedBlob("x", x)
    workspace.FeedBlob("dy", dy)
    workspace.CreateNet(m.net)
    workspace.RunNet(m.net.Name(), steps)
    return w0, b0


def _setup(build, **kw):
    m, y = _linear()
    m.AddGradientOperators({y: "dy"})
    opt = build(m, **kw)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((5, 3)).astype(np.float32)
    dy = rng.standard_normal((5, 2)).astype(np.float32)
    return m, opt, x, dy


def test_build_sgd_plain_step_matches_numpy():
    m, _, x, dy = _setup(optimizer.build_sgd, base_learning_rate=0.1)
    types = _types(m.net)
    assert types[-4:] == ["AtomicIter", "LearningRate", "WeightedSum", "WeightedSum"]  # Caffe2: a mutex-guarded counter
    lr_op = m.net.Proto().op[-3]
    assert {a.name: a for a in lr_op.arg}["base_lr"].f == pytest.approx(-0.1)
    assert list(lr_op.input) == ["optimizer_iteration"]
    w0, b0 = _run_steps(m, x, dy, 1)
    np.testing.assert_allclose(workspace.FetchBlob("y_w"), w0 - 0.1 * dy.T @ x, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(workspace.FetchBlob("y_b"), b0 - 0.1 * dy.sum(0), rtol=1e-5, atol=1e-6)
    assert workspace.FetchBlob("optimizer_iteration").tolist() == [1]


def test_build_sgd_momentum_two_steps_match_numpy():
    m, _, x, dy = _setup(optimizer.build_sgd, base_learning_rate=0.1, momentum=0.9, nesterov=False)
    assert "MomentumSGDUpdate" in _types(m.net)
    w0, _ = _run_steps(m, x, dy, 2)
    g = dy.T @ x
    w, mom = w0.copy(), np.zeros_like(w0)
    for _ in range(2):
        mom = 0.9 * mom + 0.1 * g  # the gradient is the same each step (it does not depend on w)
        w = w - mom
    np.testing.assert_allclose(workspace.FetchBlob("y_w"), w, rtol=1e-5, atol=1e-6)


def test_build_sgd_step_policy_and_weight_decay():
    m, _, x, dy = _setup(
        optimizer.build_sgd, base_learning_rate=0.1, policy="step", stepsize=1, gamma=0.5, weight_decay=0.01
    )
    types = _types(m.net)
    assert types.count("WeightedSum") == 3  # one decay (weights only) + two updates
    w0, _ = _run_steps(m, x, dy, 2)
    w = w0.copy()
    for it in range(2):
        g = dy.T @ x + 0.01 * w
        w = w - 0.1 * 0.5 ** (it + 1) * g  # Iter runs before LearningRate, as in Caffe2
    np.testing.assert_allclose(workspace.FetchBlob("y_w"), w, rtol=1e-5, atol=1e-6)


def test_build_adagrad_step():
    m, _, x, dy = _setup(optimizer.build_adagrad, base_learning_rate=0.5, epsilon=1e-4)
    assert "Adagrad" in _types(m.net)
    w0, _ = _run_steps(m, x, dy, 1)
    g = dy.T @ x
    np.testing.assert_allclose(workspace.FetchBlob("y_w"), w0 - 0.5 * g / (np.abs(g) + 1e-4), rtol=1e-4, atol=1e-5)


def test_build_adam_step():
    m, _, x, dy = _setup(optimizer.build_adam, base_learning_rate=0.01)
    assert "Adam" in _types(m.net)
    w0, _ = _run_steps(m, x, dy, 1)
    g = dy.T @ x
    m1, m2 = 0.1 * g, 0.001 * g * g
    # Adam reads the iteration after Iter ran once (t = 2), as in Caffe2.
    t = 2
    step = 0.01 * np.sqrt(1 - 0.999**t) / (1 - 0.9**t) * m1 / (np.sqrt(m2) + 1e-8)
    np.testing.assert_allclose(workspace.FetchBlob("y_w"), w0 - step, rtol=1e-4, atol=1e-5)


def test_build_rms_prop_step():
    m, _, x, dy = _setup(optimizer.build_rms_prop, base_learning_rate=0.01)
    assert "RmsProp" in _types(m.net)
    w0, _ = _run_steps(m, x, dy, 1)
    g = dy.T @ x
    ms = 0.1 * g * g
    np.testing.assert_allclose(workspace.FetchBlob("y_w"), w0 - 0.01 * g / np.sqrt(1e-5 + ms), rtol=1e-4, atol=1e-5)


def test_model_proxies_ops_to_net():
    m = ModelHelper("m")
    m.Relu("x", "y")
    assert _types(m.net) == ["Relu"]
    with pytest.raises(AttributeError, match="NoSuchThing"):
        m.NoSuchThing
