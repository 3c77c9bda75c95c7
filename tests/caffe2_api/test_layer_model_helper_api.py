"""LayerModelHelper, layer_model_instantiator, regularizers and the layer registry: bookkeeping
as Caffe2's (names, constants, losses, output records, optimizers, regularizer terms)."""

from __future__ import annotations

import numpy as np
import pytest

from framework import core, workspace
from framework.caffe2.python import layer_model_helper, layer_model_instantiator, regularizer, schema
from framework.caffe2.python import optimizer as _optimizer
from framework.caffe2.python.layers import layers
from framework.caffe2.python.layers.tags import TagContext, Tags
from framework.caffe2.python.regularizer_context import RegularizerContext, UseRegularizer

SgdOptimizer = _optimizer.SgdOptimizer


def new_model(dims: int = 3) -> layer_model_helper.LayerModelHelper:
    workspace.ResetWorkspace()
    feats = schema.Struct(("x", schema.Scalar((np.float32, (dims,)))))
    return layer_model_helper.LayerModelHelper("m", feats, schema.Struct(("label", schema.Scalar(np.float32))))


def test_every_caffe2_2018_layer_is_registered():
    names = {
        "AdaptiveWeight", "AddBias", "ArcCosineFeatureMap", "BatchDistillLRLoss", "BatchLRLoss", "BatchMSELoss",
        "BatchNormalization", "BatchSigmoidCrossEntropyLoss", "BatchSoftmaxLoss", "MapToRange", "Concat",
        "ConstantWeight", "Conv", "Dropout", "FC", "FCWithoutBias", "FeatureSparseToDense", "Functional",
        "GatherRecord", "HomotopyWeight", "LabelSmooth", "LastNWindowCollector", "MarginRankLoss", "MergeIdLists",
        "PairwiseDotProduct", "PositionWeighted", "RandomFourierFeatures", "ReservoirSampling", "SamplingTrain",
        "SelectRecordByContext", "SemiRandomFeatures", "SparseFeatureHash", "SparseLookup", "Split",
        "UniformSampling",
    }  # fmt: skip
    assert sorted(n for n in names if not layers.layer_exists(n)) == []


def test_global_constants_are_in_every_init_net():
    m = new_model()
    assert set(m.global_constants) == {"ONE", "ZERO", "ZERO_RANGE"}
    two = m.add_global_constant("TWO", [2.0, 2.0])
    assert m.maybe_add_global_constant("TWO", [2.0, 2.0]) == two
    with pytest.raises(AssertionError):
        m.maybe_add_global_constant("TWO", [3.0])
    with pytest.raises(AssertionError):
        m.add_global_constant("TWO", [2.0])
    init = m.create_init_net("init")
    types = {op.output[0]: op.type for op in init.Proto().op}
    assert types[str(m.global_constants["ZERO_RANGE"])] == "GivenTensorIntFill" and types[str(two)] == "GivenTensorFill"
    workspace.RunNetOnce(init)
    np.testing.assert_array_equal(workspace.FetchBlob(str(two)), [2.0, 2.0])
    np.testing.assert_array_equal(workspace.FetchBlob(str(m.global_constants["ONE"])), 1.0)


def test_layer_names_params_and_shared_shapes():
    m = new_model()
    m.FC(m.input_feature_schema.x, 2)
    with core.NameScope("tower"):
        m.FC(m.input_feature_schema.x, 2)
    m.FC(m.input_feature_schema.x, 4)
    assert [layer.name for layer in m.layers] == ["fc", "tower/fc", "fc_auto_0"]
    assert [str(p) for p in m.get_parameter_blobs()] == [
        "fc/w", "fc/b", "tower/fc/w", "tower/fc/b", "fc_auto_0/w", "fc_auto_0/b",
    ]  # fmt: skip
    assert m.layers[2].params[0].shape == [4, 3]
    with core.NameScope("fc", reset=True):
        with pytest.raises(ValueError, match="Got inconsistent shapes"):
            m.create_param("w", [5, 3], ("ConstantFill", {}))
    with pytest.raises(AttributeError, match="non-registered layer"):
        m.NoSuchLayer(m.input_feature_schema.x)


def test_losses_and_output_records_are_named_as_caffe2():
    m = new_model()
    a = schema.Scalar(np.float32, core.BlobReference("a"))
    m.add_loss(a)
    m.add_loss(a)
    m.add_loss(a, "unnamed")
    assert m.loss.field_names() == ["unnamed", "unnamed_auto_0", "unnamed_auto_1"]
    m.add_output_schema("y", a)
    with pytest.raises(AssertionError):
        m.add_output_schema("y", a)
    with pytest.raises(AssertionError):
        m.output_schema = schema.Struct()
    m.add_metric_field("auc", a)
    with pytest.raises(AssertionError):
        m.add_metric_field("auc", a)


def test_training_nets_apply_each_parameters_optimizer():
    m = new_model()
    fixed = m.FC(m.input_feature_schema.x, 1, weight_optim=m.NoOptim, bias_optim=m.NoOptim)
    m.default_optimizer = SgdOptimizer(base_learning_rate=0.1)
    trained = m.FC(m.input_feature_schema.x, 1)
    label = m.trainer_extra_schema.label
    total = m.Add(schema.Struct(("a", fixed), ("b", trained)), 1)
    m.add_loss(m.BatchMSELoss(schema.Struct(("label", label), ("prediction", total))))
    m.output_schema = schema.Struct()
    init, train = layer_model_instantiator.generate_training_nets(m)
    x = np.ones((4, 3), np.float32)
    schema.FeedRecord(m.input_feature_schema + m.trainer_extra_schema, [x, np.zeros(4, np.float32)])
    workspace.RunNetOnce(init)
    before = {p: workspace.FetchBlob(p).copy() for p in ["fc/w", "fc_auto_0/w"]}
    workspace.RunNetOnce(train)
    np.testing.assert_array_equal(workspace.FetchBlob("fc/w"), before["fc/w"])
    assert not np.array_equal(workspace.FetchBlob("fc_auto_0/w"), before["fc_auto_0/w"])


def test_regularizers_add_loss_terms_and_renormalize_sparse_rows():
    m = new_model()
    m.default_optimizer = m.NoOptim
    out = m.FC(m.input_feature_schema.x, 2, weight_reg=regularizer.L1Norm(0.5), bias_reg=regularizer.L2Norm(2.0))
    m.add_loss(m.AveragedLoss(m.ReduceFrontSum(out, 1), 1))
    m.output_schema = schema.Struct()
    init, train = layer_model_instantiator.generate_training_nets(m)
    assert m.loss.field_names() == ["unnamed", "fc/w_l1_regularization", "fc/b_l2_regularization"]
    schema.FeedRecord(m.input_feature_schema, [np.ones((2, 3), np.float32)])
    workspace.RunNetOnce(init)
    workspace.RunNetOnce(train)
    w, b = workspace.FetchBlob("fc/w"), workspace.FetchBlob("fc/b")
    np.testing.assert_allclose(workspace.FetchBlob("fc/w_l1_regularization"), 0.5 * np.abs(w).sum(), rtol=1e-5)
    np.testing.assert_allclose(workspace.FetchBlob("fc/b_l2_regularization"), 2.0 * (b**2).sum(), rtol=1e-5)
    with pytest.raises(AssertionError):
        regularizer.L1Norm(-1.0)
    with pytest.raises(NotImplementedError):
        regularizer.MaxNorm(1.0)(core.Net("n"), core.Net("i"), core.BlobReference("w"), core.BlobReference("g"))


def test_max_norm_rescales_the_rows_a_sparse_gradient_touched():
    net = core.Net("renorm")
    w = np.array([[3.0, 4.0], [0.3, 0.4], [6.0, 8.0]], np.float32)
    workspace.ResetWorkspace()
    workspace.FeedBlob("w", w)
    workspace.FeedBlob("idx", np.array([0, 1], np.int64))
    workspace.FeedBlob("g", np.zeros((2, 2), np.float32))
    grad = core.GradientSlice(indices=core.BlobReference("idx"), values=core.BlobReference("g"))
    regularizer.MaxNorm(1.0)(net, core.Net("i"), core.BlobReference("w"), grad)
    workspace.RunNetOnce(net)
    np.testing.assert_allclose(workspace.FetchBlob("w"), [[0.6, 0.8], [0.3, 0.4], [6.0, 8.0]], rtol=1e-5)


def test_regularizer_context_and_tag_context_nest():
    reg = regularizer.L1Norm(0.1)
    with UseRegularizer({"r": reg}):
        with UseRegularizer({"r": None, "s": reg}):
            assert RegularizerContext.current().get_regularizer("r") is None
        assert RegularizerContext.current().get_regularizer("r") is reg
        assert not RegularizerContext.current().has_regularizer("s")
    with Tags(["a", "b"]):
        with Tags("c"):
            assert TagContext.current().tags == ["a", "b", "c"]
    assert TagContext.current().tags == []


def _run_penalty(reg, w):
    workspace.ResetWorkspace()
    workspace.FeedBlob("w", w)
    net, init = core.Net("pen"), core.Net("pen_init")
    out = reg(net, init, core.BlobReference("w"), by=regularizer.RegularizationBy.ON_LOSS)
    workspace.RunNetOnce(init)
    workspace.RunNetOnce(net)
    return float(np.asarray(workspace.FetchBlob(str(out))).reshape(-1)[0])


W = np.array([[1.0, -2.0, 0.5, 3.0], [0.0, 1.0, -1.0, 2.0]], np.float32)


@pytest.mark.parametrize(
    "reg, expected",
    [
        (regularizer.ElasticNet(0.1, 0.2), 0.1 * np.abs(W).sum() + 0.2 * (W**2).sum()),
        # TopK works on the last axis: the k largest of each row are trimmed
        (regularizer.L1NormTrimmed(0.5, 3), 0.5 * (np.abs(W).sum() - np.sort(np.abs(W), axis=1)[:, -3:].sum())),
        (
            regularizer.FCInputLpNorm(2.0, p_value=0.5),
            2.0 * (np.sqrt((W**2).sum(0)) ** 0.5).sum() ** 2,
        ),
        (
            regularizer.GroupL1Norm(0.3, [1, 3]),
            0.3 * (np.sqrt(1) * np.linalg.norm(W[:, :1]) + np.sqrt(3) * np.linalg.norm(W[:, 1:])),
        ),
    ],
    ids=["elastic_net", "l1_trimmed", "fc_input_lp", "group_l1"],
)
def test_later_tree_penalties_match_numpy(reg, expected):
    np.testing.assert_allclose(_run_penalty(reg, W), expected, rtol=1e-5)


def test_bounded_gradient_projection_clips_after_the_update():
    workspace.ResetWorkspace()
    workspace.FeedBlob("w", W.copy())
    net = core.Net("bgp")
    reg = regularizer.BoundedGradientProjection(lb=0.0, ub=1.0, left_open=True)
    assert reg(net, core.Net("i"), core.BlobReference("w"), by="on_loss") is None
    reg(net, core.Net("i"), core.BlobReference("w"), by="after_optimizer")
    workspace.RunNetOnce(net)
    np.testing.assert_allclose(workspace.FetchBlob("w"), np.clip(W, 1e-9, 1.0))
    with pytest.raises(AssertionError):
        regularizer.BoundedGradientProjection(lb=1.0, ub=0.0)
    with pytest.raises(AssertionError, match="invalid by"):
        reg(net, core.Net("i"), core.BlobReference("w"), by="later")


def test_an_older_tree_regularizer_subclass_runs_in_its_own_stage():
    class Doubling(regularizer.Regularizer):
        def _run(self, net, param_init_net, param, grad):
            return net.Scale([param], [net.NextScopedBlob("doubled")], scale=2.0)

    reg = Doubling()
    net = core.Net("old")
    assert reg(net, core.Net("i"), core.BlobReference("w"), by="after_optimizer") is None
    assert str(reg(net, core.Net("i"), core.BlobReference("w"))) == "doubled"
