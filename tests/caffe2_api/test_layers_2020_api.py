"""Layers of Caffe2's later tree (LayerNormalization, PairwiseSimilarity, BucketWeighted,
BlobWeightedSum, BatchHuberLoss, BPRLoss, ExpandDims, DotProduct) and the normalizers, against
numpy written from Caffe2's definitions."""

from __future__ import annotations

import numpy as np
import pytest

from framework import workspace
from framework.caffe2.python import layer_model_helper, layer_model_instantiator, schema
from framework.caffe2.python.normalizer import BatchNormalizer, LayerNormalizer
from framework.caffe2.python.normalizer_context import NormalizerContext, UseNormalizer


def new_model(**fields) -> layer_model_helper.LayerModelHelper:
    workspace.ResetWorkspace()
    feats = schema.Struct(*[(k, v if isinstance(v, schema.Field) else schema.Scalar(v)) for k, v in fields.items()])
    return layer_model_helper.LayerModelHelper("m", feats, schema.Struct())


def run(model, feeds):
    model.output_schema = schema.Struct()
    schema.FeedRecord(model.input_feature_schema, feeds)
    init, train = layer_model_instantiator.generate_training_nets_forward_only(model)
    workspace.RunNetOnce(init)
    workspace.RunNetOnce(train)


def fetch(blob):
    return workspace.FetchBlob(str(blob))


X = np.random.RandomState(5).randn(4, 3).astype(np.float32)


@pytest.mark.parametrize("use_op", [True, False])
def test_layer_normalization_both_implementations(use_op):
    m = new_model(x=(np.float32, (3,)))
    out = m.LayerNormalization(m.input_feature_schema.x, epsilon=1e-3, use_layer_norm_op=use_op)
    run(m, [X])
    centered = X - X.mean(1, keepdims=True)
    expected = centered / np.sqrt((centered**2).mean(1, keepdims=True) + 1e-3)
    np.testing.assert_allclose(fetch(out()), expected, rtol=1e-4, atol=1e-5)


def test_normalizers_add_their_layers_and_nest_in_contexts():
    m = new_model(x=(np.float32, (3,)))
    with UseNormalizer({"bn": BatchNormalizer(0.9), "ln": LayerNormalizer(1e-4)}):
        ctx = NormalizerContext.current()
        bn_out = ctx.get_normalizer("bn")(m, m.input_feature_schema.x)
        ln_out = ctx.get_normalizer("ln")(m, m.input_feature_schema.x)
    assert not NormalizerContext.current().has_normalizer("bn")
    assert [layer.get_type() for layer in m.layers] == ["BatchNormalization", "LayerNormalization"]
    assert bn_out.field_type().shape == ln_out.field_type().shape == (3,)


@pytest.mark.parametrize("func", ["dot", "cosine_similarity"])
def test_pairwise_similarity(func):
    m = new_model(e=(np.float32, (2, 3)))
    out = m.PairwiseSimilarity(schema.Struct(("all_embeddings", m.input_feature_schema.e)), 4, func)
    e = np.random.RandomState(1).randn(3, 2, 3).astype(np.float32)
    run(m, [e])
    if func == "cosine_similarity":
        e = e / np.linalg.norm(e, axis=1, keepdims=True)  # Caffe2 normalizes along axis 1, as written
    np.testing.assert_allclose(fetch(out()), np.einsum("bik,bjk->bij", e, e).reshape(3, 4), rtol=1e-4, atol=1e-6)


def test_bucket_weighted_with_boundaries():
    m = new_model(s=schema.List(np.float32))
    out = m.BucketWeighted(m.input_feature_schema.s, bucket_boundaries=[0.5, 1.5], hash_buckets=False)
    assert fetch_shape_after(m, [np.array([3], np.int32), np.array([0.1, 1.0, 9.0], np.float32)], out) == (3,)
    np.testing.assert_array_equal(fetch(out.bucket_weights()), [1, 1, 1])
    assert m.layers[0].bucket_w is not None and fetch("bucket_weighted/bucket_w").shape == (3,)


def fetch_shape_after(m, feeds, out):
    run(m, feeds)
    return fetch(out.bucket_weights()).shape


def test_blob_weighted_sum_and_dot_product_and_expand_dims():
    m = new_model(a=(np.float32, (3,)), b=(np.float32, (3,)))
    x = m.input_feature_schema
    weighted = m.BlobWeightedSum(x, init_weights=[2.0, -1.0])
    dot = m.DotProduct(x)
    expanded = m.ExpandDims(x.a, dims=[1])
    assert expanded.field_type().shape == (1, 3)
    b = X[:, ::-1].copy()
    run(m, [X, b])
    np.testing.assert_allclose(fetch(weighted()), 2 * X - b, rtol=1e-6)
    np.testing.assert_allclose(fetch(dot()), (X * b).sum(1), rtol=1e-5)
    np.testing.assert_array_equal(fetch(expanded()), X[:, None, :])
    with pytest.raises(AssertionError):
        m.BlobWeightedSum(schema.Struct(("a", x.a)))


def test_huber_and_bpr_losses():
    m = new_model(label=np.float32, prediction=(np.float32, (1,)))
    huber = m.BatchHuberLoss(m.input_feature_schema, delta=0.5)
    label = np.array([0.0, 1.0, 3.0], np.float32)
    pred = np.array([[0.2], [0.0], [3.1]], np.float32)
    run(m, [label, pred])
    err = np.abs(label - pred[:, 0])
    expected = np.where(err <= 0.5, 0.5 * err**2, 0.5 * 0.5**2 + 0.5 * (err - 0.5)).mean()
    np.testing.assert_allclose(fetch(huber()), expected, rtol=1e-5)

    m2 = new_model(pos_prediction=np.float32, neg_prediction=schema.List(np.float32))
    bpr = m2.BPRLoss(m2.input_feature_schema)
    pos, lengths, neg = np.array([1.0, -1.0], np.float32), np.array([1, 2], np.int32), np.array([0.5, 0, 2], np.float32)
    run(m2, [pos, lengths, neg])
    np.testing.assert_allclose(fetch(bpr()), np.log1p(np.exp(neg - np.repeat(pos, lengths))).sum(), rtol=1e-5)


def test_sparse_dropout_with_replacement_uses_each_contexts_probability():
    ids = schema.List(schema.Scalar(np.int64, metadata=schema.Metadata(categorical_limit=10)))
    m = new_model(f=ids)
    out = m.SparseDropoutWithReplacement(m.input_feature_schema.f, 0.0, 0.0, 1.0, replacement_value=-1)
    assert out.items.metadata.categorical_limit == 10
    lengths, values = np.array([2, 3], np.int32), np.array([1, 2, 3, 4, 5], np.int64)
    run(m, [lengths, values])  # training keeps everything
    np.testing.assert_array_equal(fetch(out.lengths()), lengths)
    np.testing.assert_array_equal(fetch(out.items()), values)
    workspace.RunNetOnce(layer_model_instantiator.generate_predict_net(m))  # prediction drops every list
    np.testing.assert_array_equal(fetch(out.lengths()), [1, 1])
    np.testing.assert_array_equal(fetch(out.items()), [-1, -1])
    with pytest.raises(AssertionError):
        m.SparseDropoutWithReplacement(m.input_feature_schema.f, 0.0, 0.0, 0.0, replacement_value=-1)


def test_batch_unjoined_mse_loss():
    m = new_model(label=np.float32, prediction=(np.float32, (1,)))
    loss = m.BatchUnjoinedMSELoss(m.input_feature_schema)
    label = np.array([0.0, 1.0, 2.0], np.float32)
    pred = np.array([[0.5], [1.5], [1.0]], np.float32)
    run(m, [label, pred])
    p = pred[:, 0]
    per = np.where(label == 0, 0.5 * p**2, 0.5 * (label - p) ** 2 - 0.5 * p**2)
    np.testing.assert_allclose(fetch(loss()), per.mean(), rtol=1e-5)
