"""``caffe2.python.optimizer``: Caffe2's builders, bookkeeping and learning-rate modifiers, each update checked
against numpy written from Caffe2's operator semantics."""

import numpy as np
import pytest

from framework import core, workspace
from framework.caffe2.python import brew, optimizer
from framework.caffe2.python.model_helper import ModelHelper
from framework.caffe2.python.modeling.initializers import PseudoFP16Initializer
from framework.caffe2.python.optimizer_context import UseOptimizer
from framework.errors import FrameworkError
from framework.proto.framework_pb2 import TensorProto

X = np.array([[1.0, 2.0, -1.0], [0.5, -1.5, 2.0]], np.float32)
DY = np.array([[1.0, -2.0], [0.5, 1.0]], np.float32)
G = DY.T @ X  # the weight gradient of y = x w^T + b under the fed output gradient DY


@pytest.fixture(autouse=True)
def _fresh():
    workspace.ResetWorkspace()
    optimizer.reset_optimizer_instance_count()
    yield
    workspace.ResetWorkspace()


def _model(initializer=None, w=0.5):
    m = ModelHelper("opt")
    kw = {"WeightInitializer": initializer} if initializer else {}
    y = brew.fc(m, "x", "y", 3, 2, weight_init=("ConstantFill", {"value": w}), **kw)
    m.AddGradientOperators({y: "dy"})
    return m


def _steps(m, n):
    workspace.RunNetOnce(m.param_init_net)
    workspace.FeedBlob("x", X)
    workspace.FeedBlob("dy", DY)
    workspace.CreateNet(m.net)
    workspace.RunNet(m.net.Name(), n)
    return workspace.FetchBlob("y_w")


def test_names_counter_and_auxiliary_parameters():
    m = _model()
    opt = optimizer.build_sgd(m, 0.1, momentum=0.9)
    proto = m.net.Proto()
    assert [op.type for op in m.param_init_net.Proto().op if op.type == "CreateMutex"] == ["CreateMutex"]
    tail = [op.type for op in proto.op if op.type in ("AtomicIter", "LearningRate", "MomentumSGDUpdate")]
    assert tail == ["AtomicIter", "LearningRate", "MomentumSGDUpdate", "MomentumSGDUpdate"]
    assert [op.output[0] for op in proto.op if op.type == "LearningRate"] == ["SgdOptimizer_0_lr_cpu"]
    aux = opt.get_auxiliary_parameters()
    assert [str(b) for b in aux.local] == ["y_w_momentum", "y_b_momentum"] and str(aux.shared[0]) == "ONE_0_0"
    assert opt.get_cpu_blob_name("lr", "n1") == "SgdOptimizer_0_lrn1_cpu"
    assert opt.get_gpu_blob_name("lr", 2, "") == "SgdOptimizer_0_lr_gpu2"
    with core.DeviceScope(core.DeviceOption(1, 3)):
        assert opt.make_unique_blob_name("x") == "SgdOptimizer_0_x_gpu3"
    assert optimizer.SgdOptimizer()._instance_num == 1


def test_momentum_sgd_two_steps_nesterov():
    w = _steps(_model_with(optimizer.build_sgd, 0.1, momentum=0.5), 2)
    ref, mom = np.full((2, 3), 0.5, np.float32), np.zeros((2, 3))
    for _ in range(2):  # Caffe2 MomentumSGDUpdate with nesterov: m' = mu m + lr g; step = (1 + mu) m' - mu m
        new = 0.5 * mom + 0.1 * G
        ref = ref - ((1 + 0.5) * new - 0.5 * mom)
        mom = new
    np.testing.assert_allclose(w, ref, rtol=1e-5)


def _model_with(build, *args, **kw):
    m = _model()
    build(m, *args, **kw)
    return m


def test_rms_prop_follows_caffe2_composition():
    w = _steps(_model_with(optimizer.build_rms_prop, 0.01, epsilon=1e-5), 2)
    ref, ms, mom = np.full((2, 3), 0.5), np.zeros((2, 3)), np.zeros((2, 3))
    for _ in range(2):
        ms = ms + (1 - 0.9) * (G * G - ms)
        mom = 0.0 * mom + 1.0 * G / np.sqrt(1e-5 + ms)  # RmsProp with lr ONE; the step goes to grad_o
        mom = 0.0 * mom + 0.01 * mom  # MomentumSGDUpdate(grad_o=mom, mom, lr) with its default momentum 0
        ref = ref - mom
    np.testing.assert_allclose(w, ref, rtol=1e-4)


def test_ftrl_dense_step_matches_numpy():
    alpha, beta, l1, l2 = 0.5, 0.1, 0.01, 0.02
    w = _steps(_model_with(optimizer.build_ftrl, engine=None, alpha=alpha, beta=beta, lambda1=l1, lambda2=l2), 1)
    w0, n, z = np.full((2, 3), 0.5), np.zeros((2, 3)), np.zeros((2, 3))
    sigma = (np.sqrt(n + G * G) - np.sqrt(n)) / alpha
    z, n = z + G - sigma * w0, n + G * G
    ref = np.where(np.abs(z) <= l1, 0.0, (np.sign(z) * l1 - z) / ((beta + np.sqrt(n)) / alpha + l2))
    np.testing.assert_allclose(w, ref, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize(
    "build, op, state",
    [
        (lambda m: optimizer.build_adadelta(m, 0.1), "Adadelta", ["y_w_squared_moment", "y_w_squared_moment_update"]),
        (lambda m: optimizer.build_wngrad(m, 0.1), "Wngrad", ["y_w_moment"]),
        (lambda m: optimizer.build_gftrl(m, alpha=0.1), "GFtrl", ["y_w_gftrl_nz"]),
        (lambda m: optimizer.build_yellowfin(m, 0.1), "YellowFin", ["y_w_moment", "y_w_lr_avg", "y_w_mu_avg"]),
        (lambda m: optimizer.build_adam(m, 0.1), "Adam", ["y_w_first_moment", "y_w_second_moment"]),
    ],
)
def test_other_builders_add_their_update_and_state(build, op, state):
    m = _model()
    opt = build(m)
    assert op in [o.type for o in m.net.Proto().op]
    assert [str(b) for b in opt.get_auxiliary_parameters().local][: len(state)] == state
    w = _steps(m, 2)
    assert np.all(np.isfinite(w)) and not np.allclose(w, 0.5)


def test_multi_precision_sgd_updates_the_fp32_master():
    m = _model(PseudoFP16Initializer)
    m.param_init_net.Proto()  # the fp16 weight comes from its fp32 master y_w_fp32
    workspace.RunNetOnce(m.param_init_net)
    assert workspace.FetchBlob("y_w").dtype == np.float16
    info = m.get_param_info("y_w")
    assert str(info.blob_copy[TensorProto.FLOAT]) == "y_w_fp32"
    # A float16 gradient, as an fp16 forward pass would give; fed directly to the update part of the net.
    net = core.Net("update")
    net.Proto().external_input.extend(["y_w_grad"])
    opt = optimizer.MultiPrecisionSgdOptimizer(base_learning_rate=0.1, momentum=0.0)
    opt(net, m.param_init_net, info.__class__(None, info.blob, grad="y_w_grad", blob_copy=info.blob_copy))
    workspace.RunNetOnce(m.param_init_net)
    workspace.FeedBlob("y_w_grad", G.astype(np.float16))
    workspace.RunNetOnce(net)
    ref = 0.5 - 0.1 * G.astype(np.float16).astype(np.float32)
    np.testing.assert_allclose(workspace.FetchBlob("y_w_fp32"), ref, rtol=1e-6)
    np.testing.assert_array_equal(workspace.FetchBlob("y_w"), ref.astype(np.float16))


def test_fp16_sgd_applies_weight_decay_and_momentum_in_fp32():
    init = core.Net("init")
    master = init.ConstantFill([], "p_master", shape=[3], value=1.0)
    p = init.FloatToHalf(master, "p")
    net = core.Net("update")
    net.Proto().external_input.extend(["p_grad"])
    from framework.caffe2.python.modeling.parameter_info import ParameterInfo

    info = ParameterInfo(None, p, grad=core.BlobReference("p_grad"), blob_copy={TensorProto.FLOAT: "p_master"})
    optimizer.FP16SgdOptimizer(base_learning_rate=0.1, momentum=0.9, nesterov=0, weight_decay=0.01)(net, init, info)
    workspace.RunNetOnce(init)
    workspace.FeedBlob("p_grad", np.array([1.0, -2.0, 0.5], np.float16))
    workspace.RunNetOnce(net)
    g = np.array([1.0, -2.0, 0.5]) + 0.01 * 1.0
    np.testing.assert_allclose(workspace.FetchBlob("p").astype(np.float64), 1.0 - 0.1 * g, rtol=1e-3)
    assert workspace.FetchBlob("p").dtype == np.float16 and workspace.FetchBlob("p_momentum").dtype == np.float16


def test_global_norm_clipping_and_lr_injection():
    m = _model()
    opt = optimizer.build_sgd(m, 0.1, max_gradient_norm=1.0, allow_lr_injection=True)
    assert opt._lr_multiplier is not None
    optimizer.set_lr_injection(0.5)  # fed before the init net: the init net's ConstantFill resets it to 1
    w = _steps(m, 1)
    assert optimizer.get_lr_injection() == 1.0
    norm = np.sqrt((G.astype(np.float64) ** 2).sum() + (DY.sum(0).astype(np.float64) ** 2).sum())
    ratio = 1.0 / max(1.0, norm)
    np.testing.assert_allclose(workspace.FetchBlob("norm_clipped_grad_update/norm_ratio"), ratio, rtol=1e-5)
    np.testing.assert_allclose(w, 0.5 - 0.1 * ratio * G, rtol=1e-5)
    optimizer.set_lr_injection(0.0)
    workspace.RunNet(m.net.Name())
    np.testing.assert_allclose(workspace.FetchBlob("y_w"), w, rtol=1e-6)  # injected lr 0 freezes the model


def test_lars_scales_only_its_own_parameter():
    m = _model()
    optimizer.build_sgd(m, 0.1, lars=0.0)
    lars = [op for op in m.net.Proto().op if op.type == "Lars"]
    assert [op.input[0] for op in lars] == ["y_w", "y_b"] and len(lars[0].input) == 5
    w = _steps(m, 1)
    trust = np.linalg.norm(np.full((2, 3), 0.5)) / np.linalg.norm(G)  # Caffe2 Lars: |w| / (|g| + wd |w|)
    np.testing.assert_allclose(w, 0.5 - 0.1 * trust * G, rtol=1e-5)


def test_sparse_dedup_sums_or_averages_repeated_rows():
    for agg, scale in (("sum", 2.0), ("mean", 1.0)):
        workspace.ResetWorkspace()
        m = ModelHelper("emb")
        table = m.create_param("table", [4, 2], ("ConstantFill", {"value": 0.0}), tags="WEIGHT")
        rows = m.net.Gather([table, "ids"], "rows")
        loss = m.net.SumElements([rows], "loss")
        m.AddGradientOperators([loss])
        optimizer.build_sgd(m, 0.5, sparse_dedup_aggregator=agg)
        assert "Unique" in [op.type for op in m.net.Proto().op]
        workspace.RunNetOnce(m.param_init_net)
        workspace.FeedBlob("ids", np.array([1, 1, 3], np.int64))
        workspace.RunNetOnce(m.net)
        expected = np.zeros((4, 2), np.float32)
        expected[1], expected[3] = -0.5 * scale, -0.5
        np.testing.assert_allclose(workspace.FetchBlob("table"), expected, err_msg=agg)
    with pytest.raises(FrameworkError, match="sum"):
        optimizer.Optimizer.dedup(core.Net("n"), "max", core.GradientSlice("i", "v"))


def test_use_optimizer_overrides_the_builder_and_weight_decay_targets_weights():
    m = ModelHelper("ctx")
    special = optimizer.SgdOptimizer(0.3)
    with UseOptimizer({"BIAS": special}):
        y = brew.fc(m, "x", "y", 3, 2)
    m.AddGradientOperators({y: "dy"})
    optimizer.add_weight_decay(m, 1e-3)
    optimizer.build_sgd(m, 0.1)
    lrs = {op.output[0]: op.arg[0].f for op in m.net.Proto().op if op.type == "LearningRate"}
    assert lrs == {"SgdOptimizer_0_lr_cpu": pytest.approx(-0.3), "SgdOptimizer_1_lr_cpu": pytest.approx(-0.1)}
    decayed = [op.output[0] for op in m.net.Proto().op if op.type == "WeightedSum" and "wd_0_0" in op.input]
    assert decayed == ["y_w_grad"]


def test_errors_name_the_parameter():
    m = ModelHelper("e")
    with pytest.raises(FrameworkError, match="AddGradientOperators"):
        optimizer.build_sgd(m, 0.1)
    m = _model()
    with pytest.raises(FrameworkError, match="positive"):
        optimizer.build_sgd(m, -0.1)
    with pytest.raises(FrameworkError, match="no op creates it"):
        optimizer.get_param_device("ghost", "ghost_grad", {})
