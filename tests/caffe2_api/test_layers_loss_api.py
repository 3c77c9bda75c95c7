"""Loss and weighting layers of the layers API (BatchLRLoss, BatchMSELoss,
BatchSigmoidCrossEntropyLoss, BatchSoftmaxLoss, MarginRankLoss, BatchDistillLRLoss, LabelSmooth,
ConstantWeight, AdaptiveWeight, HomotopyWeight) against numpy written from Caffe2's definitions."""

from __future__ import annotations

import numpy as np
import pytest

from framework import workspace
from framework.caffe2.python import layer_model_helper, layer_model_instantiator, schema


def new_model(**fields) -> layer_model_helper.LayerModelHelper:
    workspace.ResetWorkspace()
    feats = schema.Struct(*[(k, schema.Scalar(v) if not isinstance(v, schema.Field) else v) for k, v in fields.items()])
    return layer_model_helper.LayerModelHelper("m", feats, schema.Struct())


def run(model, feeds, iterations=1):
    model.output_schema = schema.Struct()
    schema.FeedRecord(model.input_feature_schema, feeds)
    init, train = layer_model_instantiator.generate_training_nets_forward_only(model)
    workspace.RunNetOnce(init)
    workspace.CreateNet(train)
    workspace.RunNet(train.Proto().name, num_iter=iterations)


def fetch(blob):
    return workspace.FetchBlob(str(blob))


def xent(logit, label):
    return np.maximum(logit, 0) - logit * label + np.log1p(np.exp(-np.abs(logit)))


RNG = np.random.RandomState(7)
LOGIT = RNG.randn(6, 1).astype(np.float32)
LABEL = (RNG.rand(6) > 0.5).astype(np.float32)


def test_batch_lr_loss_plain_weighted_and_smoothed():
    m = new_model(label=np.float32, logit=(np.float32, (1,)), weight=np.float32)
    x = m.input_feature_schema
    plain = m.BatchLRLoss(schema.Struct(("label", x.label), ("logit", x.logit)))
    summed = m.BatchLRLoss(schema.Struct(("label", x.label), ("logit", x.logit)), average_loss=False)
    weighted = m.BatchLRLoss(x)
    smoothed = m.BatchLRLoss(
        schema.Struct(("label", x.label), ("logit", x.logit)), pos_label_target=0.9, neg_label_target=0.2
    )
    weight = RNG.rand(6).astype(np.float32)
    run(m, [LABEL, LOGIT, weight])
    per_example = xent(LOGIT[:, 0], LABEL)
    np.testing.assert_allclose(fetch(plain()), per_example.mean(), rtol=1e-5)
    np.testing.assert_allclose(fetch(summed()), per_example.sum(), rtol=1e-5)
    np.testing.assert_allclose(fetch(weighted()), (per_example * weight).mean(), rtol=1e-5)
    target = np.where(LABEL > 0.5, 0.9, 0.2)
    np.testing.assert_allclose(fetch(smoothed()), xent(LOGIT[:, 0], target).mean(), rtol=1e-5)
    assert "exclude_from_prediction" in m.layers[0].tags
    with pytest.raises(AssertionError):
        m.BatchLRLoss(schema.Struct(("label", x.label)))


def test_batch_lr_loss_with_jsd():
    m = new_model(label=np.float32, logit=(np.float32, (1,)), prediction=(np.float32, (1,)))
    loss = m.BatchLRLoss(m.input_feature_schema, jsd_weight=0.25)
    pred = 1 / (1 + np.exp(-LOGIT))
    run(m, [LABEL, LOGIT, pred])

    def entropy(p):
        return -(p * np.log(p) + (1 - p) * np.log(1 - p))

    p, q = pred[:, 0], np.clip(LABEL, 1e-7, 1 - 1e-7)
    jsd = entropy((p + q) / 2) - (entropy(p) + entropy(q)) / 2
    expected = (0.75 * xent(LOGIT[:, 0], LABEL) + 0.25 * jsd).mean()
    np.testing.assert_allclose(fetch(loss()), expected, rtol=1e-4)


def test_batch_mse_and_sigmoid_cross_entropy():
    m = new_model(label=np.float64, prediction=(np.float32, (1,)))
    mse = m.BatchMSELoss(m.input_feature_schema)
    m2_label = schema.Scalar((np.float32, (1,)))
    sce_model = new_model(label=m2_label, prediction=(np.float32, (1,)))
    sce = sce_model.BatchSigmoidCrossEntropyLoss(sce_model.input_feature_schema)
    assert sce.field_type() == np.dtype(np.float32)
    label = RNG.randn(6)
    run(m, [label, LOGIT])
    np.testing.assert_allclose(fetch(mse()), (0.5 * (label - LOGIT[:, 0]) ** 2).mean(), rtol=1e-5)
    run(sce_model, [LABEL[:, None], LOGIT])
    np.testing.assert_allclose(fetch(sce()), xent(LOGIT, LABEL[:, None]).mean(), rtol=1e-5)


def test_batch_softmax_loss_with_weights_and_label_smoothing():
    m = new_model(label=np.int64, prediction=(np.float32, (3,)), weight=np.float32)
    x = m.input_feature_schema
    plain = m.BatchSoftmaxLoss(x)
    smooth = np.array([[0.8, 0.1, 0.1], [0.1, 0.8, 0.1], [0.1, 0.1, 0.8]], np.float32)
    smoothed = m.BatchSoftmaxLoss(
        schema.Struct(("label", x.label), ("prediction", x.prediction)), label_smoothing_matrix=smooth
    )
    logits = RNG.randn(4, 3).astype(np.float32)
    label = np.array([0, 2, 1, 2], np.int64)
    weight = np.array([1.0, 0.5, 2.0, 0.0], np.float32)
    run(m, [label, logits, weight])
    soft = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    np.testing.assert_allclose(fetch(plain.softmax()), soft, rtol=1e-5)
    nll = -np.log(soft[np.arange(4), label])
    np.testing.assert_allclose(fetch(plain.loss()), (nll * weight).sum() / weight.sum(), rtol=1e-5)
    target = smooth[label]
    np.testing.assert_allclose(fetch(smoothed.loss()), -(target * np.log(soft)).sum(1).mean(), rtol=1e-5)


def test_margin_rank_loss():
    m = new_model(pos_prediction=np.float32, neg_prediction=schema.List(np.float32))
    loss = m.MarginRankLoss(m.input_feature_schema, margin=0.5)
    pos = np.array([1.0, 0.2], np.float32)
    lengths = np.array([2, 1], np.int32)
    neg = np.array([0.8, 0.1, 0.9], np.float32)
    run(m, [pos, lengths, neg])
    tiled = np.repeat(pos, lengths)
    np.testing.assert_allclose(fetch(loss()), np.maximum(0, -(tiled - neg) + 0.5).sum(), rtol=1e-6)
    with pytest.raises(AssertionError):
        m.MarginRankLoss(m.input_feature_schema, margin=-1)


def test_batch_distill_lr_loss():
    m = new_model(teacher_label=np.float32, label=np.float32, logit=(np.float32, (1,)))
    loss = m.BatchDistillLRLoss(m.input_feature_schema, teacherWeight=0.3)
    teacher = RNG.rand(6).astype(np.float32)
    run(m, [teacher, LABEL, LOGIT])
    expected = 0.7 * xent(LOGIT[:, 0], LABEL).mean() + 0.3 * xent(LOGIT[:, 0], teacher).mean()
    np.testing.assert_allclose(fetch(loss()), expected, rtol=1e-5)


def test_label_smooth_categorical_and_binary():
    m = new_model(c=np.int32, b=np.float32)
    matrix = np.array([[0.9, 0.1], [0.3, 0.7]], np.float32)
    cat = m.LabelSmooth(m.input_feature_schema.c, matrix)
    binary = m.LabelSmooth(m.input_feature_schema.b, [0.05, 0.95])
    assert cat.field_type().shape == (2,) and binary.field_type().shape == (1,)
    run(m, [np.array([1, 0, 1], np.int32), np.array([1.0, 0.0, 1.0], np.float32)])
    np.testing.assert_allclose(fetch(cat()), matrix[[1, 0, 1]])
    np.testing.assert_allclose(fetch(binary()), [0.95, 0.05, 0.95])
    with pytest.raises(AssertionError):
        m.LabelSmooth(m.input_feature_schema.c, [0.1, 0.2, 0.3])


def test_constant_adaptive_and_homotopy_weights():
    m = new_model(a=np.float32, b=np.float32)
    x = m.input_feature_schema
    const = m.ConstantWeight(x, weights=[0.25, 0.75])
    adaptive = m.AdaptiveWeight(x, weights=[0.2, 0.8])
    homotopy = m.HomotopyWeight(x, half_life=2, quad_life=6)
    a, b = np.array([2.0], np.float32), np.array([4.0], np.float32)
    run(m, [a, b], iterations=3)
    np.testing.assert_allclose(fetch(const()), 0.25 * 2 + 0.75 * 4, rtol=1e-6)
    mu = np.log(1 / (2 * np.array([0.2, 0.8])))  # each term weighs w_i at the start
    np.testing.assert_allclose(fetch(adaptive()), (np.array([2, 4]) / (2 * np.exp(mu)) + mu).sum(), rtol=1e-5)
    # after 3 runs the counter is 3; lr = (1 + gamma t)^-power, gamma and power as Caffe2 solves them
    # (lr is 1/2 at half_life)
    t = 6 / 2
    root = t * (1 + np.sqrt(2)) / 2 - np.sqrt(2)
    gamma, power = (root - 1) / 2, np.log(2) / np.log(root)
    lr = (1 + gamma * 3) ** -power
    assert np.isclose((1 + gamma * 2) ** -power, 0.5)
    np.testing.assert_allclose(fetch(homotopy()), lr * 2 + (1 - lr) * 4, rtol=1e-5)


def test_homotopy_weight_maps_the_rate_onto_min_and_max_weight():
    m = new_model(a=np.float32, b=np.float32)
    homotopy = m.HomotopyWeight(m.input_feature_schema, min_weight=0.5, max_weight=2.0, half_life=2, quad_life=6)
    a, b = np.array([2.0], np.float32), np.array([4.0], np.float32)
    run(m, [a, b], iterations=3)
    root = 3 * (1 + np.sqrt(2)) / 2 - np.sqrt(2)
    gamma, power = (root - 1) / 2, np.log(2) / np.log(root)
    lr = (1 + gamma * 3) ** -power
    # alpha falls from max to min, beta rises; alpha + beta = max + min
    alpha, beta = 1.5 * lr + 0.5, 1.5 * (1 - lr) + 0.5
    np.testing.assert_allclose(fetch(homotopy()), alpha * 2 + beta * 4, rtol=1e-5)


def test_batch_lr_loss_focal_factor_and_uncertainty():
    m = new_model(label=np.float32, logit=(np.float32, (1,)), prediction=(np.float32, (1,)), log_variance=np.float32)
    x = m.input_feature_schema
    focal = m.BatchLRLoss(
        schema.Struct(("label", x.label), ("logit", x.logit), ("prediction", x.prediction)), focal_gamma=2.0
    )
    uncertain = m.BatchLRLoss(
        schema.Struct(("label", x.label), ("logit", x.logit), ("log_variance", x.log_variance)),
        uncertainty_penalty=0.5,
    )
    pred = 1 / (1 + np.exp(-LOGIT))
    s = RNG.randn(6).astype(np.float32)
    run(m, [LABEL, LOGIT, pred, s])
    per_example = xent(LOGIT[:, 0], LABEL)
    factor = (LABEL + pred[:, 0] - 2 * LABEL * pred[:, 0]) ** 2
    # as in Caffe2: the cross entropy is (batch,) and the factor (batch, 1), so their product
    # broadcasts to (batch, batch) and the average is mean(xent) * mean(factor)
    np.testing.assert_allclose(fetch(focal()), per_example.mean() * factor.mean(), rtol=1e-4)
    # the same broadcast: exp(-s) and s are (batch, 1)
    expected = 0.5 * (np.exp(-s).mean() * per_example.mean() + 0.5 * s.mean())
    np.testing.assert_allclose(fetch(uncertain()), expected, rtol=1e-4)
    with pytest.raises(AssertionError):
        m.BatchLRLoss(x, log_D_trick=True, unjoined_lr_loss=True)
