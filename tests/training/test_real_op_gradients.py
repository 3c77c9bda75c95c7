"""Gradients and training with the real ops: sparse gradients of Gather through
Concat into the sparse optimizers, Caffe2's single-op registry API on real ops, inheritance of
device/engine/arguments by real gradient ops, brew.lrn and brew.add_weight_decay."""

import numpy as np
import pytest

from framework import core, workspace
from framework.caffe2.python import brew, optimizer
from framework.caffe2.python.model_helper import ModelHelper, ParameterTags
from framework.core import CreateOperator, GradientRegistry, GradientSlice
from framework.errors import GradientError

pytestmark = pytest.mark.usefixtures("fresh_workspace")


def _embedding_model(name):
    """Two lookups of one embedding table, summed: the table's gradient is sparse and concatenated."""
    m = ModelHelper(name)
    emb = m.create_param("emb", [6, 3], ("GaussianFill", {"std": 1.0}), ParameterTags.WEIGHT)
    a = m.net.Gather([emb, "idx_a"], "a")
    b = m.net.Gather([emb, "idx_b"], "b")
    s = m.net.Sum([a, b], "s")
    loss = m.net.SumElements(s, "loss")
    grads = m.AddGradientOperators([loss])
    return m, grads


def test_sparse_gradient_of_two_gathers_is_concatenated():
    m, grads = _embedding_model("sparse_concat")
    g = grads["emb"]
    assert isinstance(g, GradientSlice)
    assert (g.indices, g.values) == ("emb_grad_indices_concat", "emb_grad_values_concat")
    concat = [op for op in m.net.Proto().op if op.type == "Concat"]
    assert sorted(concat[0].input) == ["idx_a", "idx_b"] and list(concat[1].input) == ["s_grad", "s_grad"]
    assert all({a.name: a.i for a in op.arg}["axis"] == 0 for op in concat)
    assert m.param_to_grad[m.params[0]] == g


def test_sparse_sgd_through_scatter_weighted_sum():
    m, _ = _embedding_model("sparse_sgd")
    optimizer.build_sgd(m, base_learning_rate=0.5)
    assert [op.type for op in m.net.Proto().op][-1] == "ScatterWeightedSum"
    workspace.RunNetOnce(m.param_init_net)
    w0 = workspace.FetchBlob("emb").copy()
    workspace.FeedBlob("idx_a", np.array([0, 2], np.int32))
    workspace.FeedBlob("idx_b", np.array([2, 5], np.int32))
    workspace.CreateNet(m.net)
    workspace.RunNet(m.net)
    expected = w0.copy()
    for i in (0, 2, 2, 5):  # d loss / d row = 1 per lookup; duplicates accumulate
        expected[i] -= 0.5
    np.testing.assert_allclose(workspace.FetchBlob("emb"), expected, rtol=1e-6)


def test_sparse_adagrad_through_the_builder():
    m, _ = _embedding_model("sparse_adagrad")
    optimizer.build_adagrad(m, base_learning_rate=0.1, epsilon=1e-4)
    assert "SparseAdagrad" in [op.type for op in m.net.Proto().op]
    workspace.RunNetOnce(m.param_init_net)
    w0 = workspace.FetchBlob("emb").copy()
    workspace.FeedBlob("idx_a", np.array([0, 1], np.int32))
    workspace.FeedBlob("idx_b", np.array([3, 5], np.int32))
    workspace.RunNetOnce(m.net)
    expected = w0.copy()
    expected[[0, 1, 3, 5]] -= 0.1 * 1.0 / (1.0 + 1e-4)  # h = g^2 = 1
    np.testing.assert_allclose(workspace.FetchBlob("emb"), expected, rtol=1e-5)
    np.testing.assert_array_equal(workspace.FetchBlob("emb_squared_sum")[[0, 1, 3, 5]], np.ones((4, 3)))
    assert not workspace.FetchBlob("emb_squared_sum")[[2, 4]].any()


def test_get_gradient_for_op_on_real_ops():
    ops, g_in = GradientRegistry.GetGradientForOp(CreateOperator("FC", ["X", "W", "b"], ["Y"], axis=1), ["Y_grad"])
    assert [op.type for op in ops] == ["FCGradient"] and ops[0].is_gradient_op
    assert list(ops[0].input) == ["X", "W", "Y_grad"]
    assert g_in == ["X_grad", "W_grad", "b_grad"]
    ops, g_in = GradientRegistry.GetGradientForOp(CreateOperator("Gather", ["D", "I"], ["Y"]), ["Y_grad"])
    assert ops == [] and g_in == [GradientSlice("I", "Y_grad"), None]
    with pytest.raises(GradientError, match="gradient of output 'Y' is not provided"):  # as Caffe2's GO(0)
        GradientRegistry.GetGradientForOp(CreateOperator("Relu", ["X"], ["Y"]), [None])


def test_real_gradient_ops_inherit_device_engine_and_arguments():
    net = core.Net("inherit")
    with core.DeviceScope(core.DeviceOption(1, 0)):
        y = net.FC(["X", "W", "b"], "Y", axis=1, engine="CUDNN")
        loss = net.AveragedLoss(y, "loss")
    net.AddGradientOperators([loss])
    fcg = next(op for op in net.Proto().op if op.type == "FCGradient")
    assert fcg.device_option.device_type == 1 and fcg.engine == "CUDNN"
    assert {a.name: a.i for a in fcg.arg}["axis"] == 1
    seed = next(op for op in net.Proto().op if op.type == "ConstantFill")
    assert list(seed.output) == ["loss_autogen_grad"] and {a.name: a.f for a in seed.arg}["value"] == 1.0


def test_brew_lrn_builds_and_runs():
    m = ModelHelper("lrn")
    y = brew.lrn(m, "x", "y", size=3, alpha=1e-3, beta=0.75, bias=1.0)
    op = m.net.Proto().op[0]
    assert y == "y" and op.type == "LRN" and list(op.output) == ["y", "_y_scale"]
    assert {a.name for a in op.arg} >= {"size", "alpha", "beta", "bias", "order"}
    x = np.random.default_rng(0).standard_normal((2, 4, 3, 3)).astype(np.float32)
    workspace.FeedBlob("x", x)
    workspace.RunNetOnce(m.net)
    sq = np.pad(x.astype(np.float64) ** 2, ((0, 0), (1, 1), (0, 0), (0, 0)))
    scale = 1.0 + 1e-3 / 3 * (sq[:, :-2] + sq[:, 1:-1] + sq[:, 2:])
    np.testing.assert_allclose(workspace.FetchBlob("y"), x * scale**-0.75, rtol=1e-5)


def test_brew_add_weight_decay_touches_weights_only():
    m = ModelHelper("wd")
    y = brew.fc(m, "x", "y", dim_in=3, dim_out=2)
    m.AddGradientOperators({y: "dy"})
    n_before = len(m.net.Proto().op)
    brew.add_weight_decay(m, 0.1)
    added = m.net.Proto().op[n_before:]
    assert [op.type for op in added] == ["WeightedSum"] and list(added[0].output) == ["y_w_grad"]
    optimizer.build_sgd(m, base_learning_rate=0.5)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 3)).astype(np.float32)
    dy = rng.standard_normal((4, 2)).astype(np.float32)
    workspace.RunNetOnce(m.param_init_net)
    w0, b0 = workspace.FetchBlob("y_w").copy(), workspace.FetchBlob("y_b").copy()
    workspace.FeedBlob("x", x)
    workspace.FeedBlob("dy", dy)
    workspace.RunNetOnce(m.net)
    np.testing.assert_allclose(workspace.FetchBlob("y_w"), w0 - 0.5 * (dy.T @ x + 0.1 * w0), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(workspace.FetchBlob("y_b"), b0 - 0.5 * dy.sum(0), rtol=1e-5, atol=1e-6)


def test_run_error_in_a_gradient_op_points_at_the_forward_op():
    m = ModelHelper("grad_site")
    y = brew.fc(m, "x", "y", dim_in=3, dim_out=2)  # the line the error must show
    m.AddGradientOperators({y: "dy"})
    fcg = m.net.Proto().op[-1]
    assert fcg.type == "FCGradient" and "brew.fc(m" in fcg.debug_info and "AddGradientOperators" in fcg.debug_info
    workspace.RunNetOnce(m.param_init_net)
    workspace.FeedBlob("x", np.ones((4, 3), np.float32))
    workspace.FeedBlob("dy", np.ones((4, 5), np.float32))  # should be (4, 2)
    with pytest.raises(Exception) as e:
        workspace.RunNetOnce(m.net)
    msg = str(e.value)
    assert "FCGradient" in msg and "'dy'" in msg
    assert 'brew.fc(m, "x", "y", dim_in=3, dim_out=2)' in msg
