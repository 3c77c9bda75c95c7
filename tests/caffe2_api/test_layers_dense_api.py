"""Dense layers of the layers API (FC, FCWithoutBias, AddBias, Dropout, Concat, Split,
BatchNormalization, the random feature maps, Functional): output schemas, op lists per context,
and values against numpy written from Caffe2's definitions."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework import workspace
from framework.caffe2.python import layer_model_helper, layer_model_instantiator, schema
from framework.caffe2.python.layers.layers import LayerError
from framework.caffe2.python.layers.tags import Tags


def new_model(**fields: tuple) -> layer_model_helper.LayerModelHelper:
    workspace.ResetWorkspace()
    feats = schema.Struct(*[(k, schema.Scalar(v)) for k, v in fields.items()])
    return layer_model_helper.LayerModelHelper("m", feats, schema.Struct())


def run_forward(model, feeds) -> None:
    """Feed the input features and run the training-context forward ops once."""
    model.output_schema = schema.Struct()
    init, train = layer_model_instantiator.generate_training_nets_forward_only(model)
    schema.FeedRecord(model.input_feature_schema, feeds)
    workspace.RunNetOnce(init)
    workspace.RunNetOnce(train)


def fetch(blob):
    return workspace.FetchBlob(str(blob))


@settings(max_examples=5)
@given(batch=st.integers(1, 4), dims=st.integers(1, 5), out=st.integers(1, 4))
def test_fc_and_fc_without_bias_match_numpy(batch, dims, out):
    m = new_model(x=(np.float32, (dims,)))
    y = m.FC(m.input_feature_schema.x, out)
    z = m.FCWithoutBias(m.input_feature_schema.x, out)
    assert y.field_type() == np.dtype((np.float32, (out,))) and z.field_type().shape == (out,)
    x = np.random.RandomState(batch).randn(batch, dims).astype(np.float32)
    run_forward(m, [x])
    w, b, w2 = fetch("fc/w"), fetch("fc/b"), fetch("fc_without_bias/w")
    bound = np.sqrt(1.0 / dims)  # Caffe2's default UniformFill range
    assert w.shape == (out, dims) and np.all(np.abs(w) <= bound) and np.all(np.abs(b) <= bound)
    np.testing.assert_allclose(fetch(y()), x @ w.T + b, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(fetch(z()), x @ w2.T, rtol=1e-5, atol=1e-6)


def test_fc_refuses_an_input_without_inner_dims():
    m = new_model(x=np.float32)
    with pytest.raises(AssertionError, match="limited dimensions"):
        m.FC(m.input_feature_schema.x, 3)
    with pytest.raises(LayerError):
        m.FC(m.input_feature_schema, 3)  # a Struct


def test_add_bias_and_split():
    m = new_model(x=(np.float32, (4,)))
    y = m.AddBias(m.input_feature_schema.x, bias_init=("ConstantFill", {"value": 0.5}))
    parts = m.Split(y, 2)
    assert [p.field_type().shape for p in parts.all_scalars()] == [(2,), (2,)]
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    run_forward(m, [x])
    np.testing.assert_array_equal(fetch(y()), x + 0.5)
    np.testing.assert_array_equal(fetch(parts.field_0()), x[:, :2] + 0.5)
    np.testing.assert_array_equal(fetch(parts.field_1()), x[:, 2:] + 0.5)
    with pytest.raises(AssertionError):
        m.Split(y, 3)


def test_dropout_trains_with_mask_and_is_identity_in_eval_and_predict():
    m = new_model(x=(np.float32, (50,)))
    y = m.Dropout(m.input_feature_schema.x, ratio=0.5)
    m.output_schema = schema.Struct(("y", y))
    init, train = layer_model_instantiator.generate_training_nets_forward_only(m)
    ops = {net: [(op.type, {a.name: a.i for a in op.arg}) for op in net.Proto().op] for net in [train]}
    assert ops[train] == [("Dropout", {"ratio": 0, "is_test": 0})]  # ratio is a float argument
    eval_net = layer_model_instantiator.generate_eval_net(m)
    assert [a.i for op in eval_net.Proto().op for a in op.arg if a.name == "is_test"] == [1]
    x = np.ones((4, 50), np.float32)
    schema.FeedRecord(m.input_feature_schema, [x])
    workspace.RunNetOnce(init)
    workspace.RunNetOnce(train)
    out = fetch(y())
    assert set(np.unique(out)) <= {0.0, 2.0} and 0 < (out == 0).sum() < out.size  # scaled by 1/(1-ratio)
    workspace.RunNetOnce(eval_net)
    np.testing.assert_array_equal(fetch(y()), x)
    with pytest.raises(AssertionError):
        m.Dropout(m.input_feature_schema.x, ratio=1.0)


def test_dropout_for_eval_drops_in_eval_and_predict_too():
    m = new_model(x=(np.float32, (50,)))
    y = m.Dropout(m.input_feature_schema.x, ratio=0.5, dropout_for_eval=True)
    m.output_schema = schema.Struct(("y", y))
    init, _ = layer_model_instantiator.generate_training_nets_forward_only(m)
    eval_net = layer_model_instantiator.generate_eval_net(m)
    predict_net = layer_model_instantiator.generate_predict_net(m)
    for net in (eval_net, predict_net):
        assert [a.i for op in net.Proto().op for a in op.arg if a.name == "is_test"] == [0]
    x = np.ones((4, 50), np.float32)
    schema.FeedRecord(m.input_feature_schema, [x])
    workspace.RunNetOnce(init)
    workspace.RunNetOnce(predict_net)
    out = fetch(y())
    assert set(np.unique(out)) <= {0.0, 2.0} and 0 < (out == 0).sum() < out.size


def test_concat_shapes_and_values():
    m = new_model(a=(np.float32, (3,)), b=(np.float32, (2,)))
    both = m.Concat(m.input_feature_schema)
    assert both.field_type().shape == (5,)
    m2 = new_model(a=(np.float32, (3,)), b=(np.float32, (3,)))
    stacked = m2.Concat(m2.input_feature_schema, axis=1, add_axis=1)
    assert stacked.field_type().shape == (2, 3)
    a, b = np.ones((2, 3), np.float32), np.zeros((2, 3), np.float32)
    run_forward(m2, [a, b])
    np.testing.assert_array_equal(fetch(stacked()), np.stack([a, b], axis=1))
    with pytest.raises(AssertionError, match="not compatible"):
        m3 = new_model(a=(np.float32, (3, 2)), b=(np.float32, (2, 3)))
        m3.Concat(m3.input_feature_schema)


def test_batch_normalization_trains_on_batch_stats_and_predicts_with_running_ones():
    m = new_model(x=(np.float32, (3,)))
    y = m.BatchNormalization(m.input_feature_schema.x, momentum=0.5)
    x = np.random.RandomState(0).randn(6, 3).astype(np.float32) * 2 + 1
    run_forward(m, [x])
    mean, var = x.mean(0), x.var(0)
    np.testing.assert_allclose(fetch(y()), (x - mean) / np.sqrt(var + 1e-5), rtol=1e-4, atol=1e-4)
    # running stats move halfway from their initial values (mean 0, inv var 1)
    np.testing.assert_allclose(fetch("batch_normalization/running_mean"), 0.5 * mean, rtol=1e-5)
    predict = layer_model_instantiator.generate_predict_net(m)
    assert [op.type for op in predict.Proto().op] == ["ExpandDims", "SpatialBN", "Squeeze"]


def test_random_fourier_features_and_arc_cosine_match_numpy():
    m = new_model(x=(np.float32, (4,)))
    rff = m.RandomFourierFeatures(m.input_feature_schema.x, 6, sigma=2.0)
    acf = m.ArcCosineFeatureMap(m.input_feature_schema.x, 5, s=2)
    x = np.random.RandomState(1).randn(3, 4).astype(np.float32)
    run_forward(m, [x])
    w, b = fetch("random_fourier_features/w"), fetch("random_fourier_features/b")
    assert np.all((b >= 0) & (b <= 2 * np.pi))
    np.testing.assert_allclose(fetch(rff()), np.sqrt(2.0 / 6) * np.cos(x @ w.T + b), rtol=1e-4, atol=1e-5)
    rw, rb = fetch("arc_cosine_feature_map/random_w"), fetch("arc_cosine_feature_map/random_b")
    h = x @ rw.T + rb
    np.testing.assert_allclose(fetch(acf()), np.maximum(h, 0) * h, rtol=1e-4, atol=1e-5)
    assert all(
        m.param_to_optim[p] == m.NoOptim for p in ["random_fourier_features/w", "arc_cosine_feature_map/random_w"]
    )


def test_semi_random_features_multiply_random_and_learned_parts():
    m = new_model(x=(np.float32, (4,)))
    out = m.SemiRandomFeatures(m.input_feature_schema.x, 3, s=1)
    x = np.random.RandomState(2).randn(5, 4).astype(np.float32)
    run_forward(m, [x])
    p = "semi_random_features/"
    rand = np.maximum(x @ fetch(p + "random_w").T + fetch(p + "random_b"), 0)
    learned = x @ fetch(p + "learned_w").T + fetch(p + "learned_b")
    np.testing.assert_allclose(fetch(out.random()), rand, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(fetch(out.full()), rand * learned, rtol=1e-4, atol=1e-5)
    # as in Caffe2, even the learned part gets no optimizer unless one is given
    assert m.param_to_optim[p + "random_w"] == m.NoOptim == m.param_to_optim[p + "learned_w"]


def test_functional_layers_infer_types_and_run():
    m = new_model(x=(np.float32, (4,)))
    soft = m.Softsign(m.input_feature_schema.x, 1)
    assert soft.field_type() == np.dtype((np.float32, (4,)))
    # the mean over the batch has no batch dimension: its type stays unknown (Caffe2's rule)
    mean = m.ReduceFrontMean(m.input_feature_schema.x, 1)
    assert mean.field_type() == np.dtype("V")
    values, indices = m.TopK(m.input_feature_schema.x, ["values", "indices"], k=2).all_scalars()
    assert values.field_type().shape == (2,) and indices.field_type().base == np.int64
    x = np.array([[1, 5, 2, 4], [3, 0, 9, 1]], np.float32)
    run_forward(m, [x])
    np.testing.assert_array_equal(fetch(mean()), x.mean(0))
    np.testing.assert_allclose(fetch(soft()), x / (1 + np.abs(x)), rtol=1e-6)
    np.testing.assert_array_equal(fetch(values()), [[5, 4], [9, 3]])


def test_tags_exclude_layers_from_contexts():
    m = new_model(x=(np.float32, (2,)))
    with Tags(Tags.EXCLUDE_FROM_PREDICTION):
        train_only = m.FC(m.input_feature_schema.x, 2)
    kept = m.FC(m.input_feature_schema.x, 1)
    m.output_schema = schema.Struct(("a", train_only), ("b", kept))
    predict = layer_model_instantiator.generate_predict_net(m)
    assert [op.output[0] for op in predict.Proto().op] == [str(kept())]
    assert predict.output_record().field_names() == ["b"]  # outputs the net does not make are dropped
    _, train = layer_model_instantiator.generate_training_nets_forward_only(m)
    assert len(train.Proto().op) == 2


def test_fc_split_by_max_fc_size_transposed_clipped_and_on_a_later_axis():
    m = new_model(x=(np.float32, (4,)), z=(np.float32, (2, 3)))
    x, z = m.input_feature_schema.x, m.input_feature_schema.z
    split = m.FC(x, 5, max_fc_size=8)  # at most 2 outputs (8 weights / 4 inputs) per FC
    assert m.layers[0].output_dim_vec == [2, 2, 1]
    transposed = m.FC(x, 3, transposed=True, clip_param=(-0.1, 0.1))
    per_row = m.FC(z, 2, axis=2)
    assert per_row.field_type().shape == (2, 2) and fetch_shape(m.layers[2].params[0]) == [2, 3]
    xv = np.random.RandomState(4).randn(3, 4).astype(np.float32)
    zv = np.random.RandomState(5).randn(3, 2, 3).astype(np.float32)
    run_forward(m, [xv, zv])
    ws = [fetch(f"fc/w_sub_{i}") for i in range(3)]
    bs = [fetch(f"fc/b_sub_{i}") for i in range(3)]
    np.testing.assert_allclose(fetch(split()), xv @ np.concatenate(ws).T + np.concatenate(bs), rtol=1e-5, atol=1e-6)
    w_t, b_t = fetch("fc_auto_0/w"), fetch("fc_auto_0/b")
    assert w_t.shape == (4, 3)
    np.testing.assert_allclose(
        fetch(transposed()), xv @ np.clip(w_t, -0.1, 0.1) + np.clip(b_t, -0.1, 0.1), rtol=1e-5, atol=1e-6
    )
    w2, b2 = fetch("fc_auto_1/w"), fetch("fc_auto_1/b")
    np.testing.assert_allclose(fetch(per_row()), zv @ w2.T + b2, rtol=1e-5, atol=1e-6)
    with pytest.raises(AssertionError, match="max_fc_size"):
        m.FC(x, 5, max_fc_size=2)


def fetch_shape(param):
    return param.shape
