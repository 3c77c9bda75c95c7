"""Sparse layers of the layers API (SparseLookup and its reducers, PositionWeighted,
SparseFeatureHash, MergeIdLists, GatherRecord, MapToRange, PairwiseDotProduct), against numpy
written from Caffe2's definitions."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework import workspace
from framework.caffe2.python import layer_model_helper, layer_model_instantiator, schema

LIMIT = 10


def ids(limit=LIMIT, dtype=np.int64):
    return schema.Scalar(dtype, metadata=schema.Metadata(categorical_limit=limit))


def new_model(features: schema.Struct) -> layer_model_helper.LayerModelHelper:
    workspace.ResetWorkspace()
    return layer_model_helper.LayerModelHelper("m", features, schema.Struct())


def run(model, feeds, context="train"):
    model.output_schema = schema.Struct()
    schema.FeedRecord(model.input_feature_schema, feeds)
    init, train = layer_model_instantiator.generate_training_nets_forward_only(model)
    workspace.RunNetOnce(init)
    if context == "train":
        workspace.RunNetOnce(train)
    else:
        workspace.RunNetOnce(layer_model_instantiator.generate_predict_net(model))


def fetch(blob):
    return workspace.FetchBlob(str(blob))


def segments(lengths):
    starts = np.r_[0, np.cumsum(lengths)[:-1]].astype(int)
    return [slice(s, s + k) for s, k in zip(starts, lengths)]


REDUCE = {
    "Sum": lambda rows: rows.sum(0),
    "Mean": lambda rows: rows.mean(0),
    "Max": lambda rows: rows.max(0),
    "LogSumExp": lambda rows: np.log(np.exp(rows).sum(0)),
    "LogMeanExp": lambda rows: np.log(np.exp(rows).mean(0)),
    "Sqrt": lambda rows: rows.sum(0) / np.sqrt(len(rows)),
}


@settings(max_examples=4)
@given(reducer=st.sampled_from(sorted(REDUCE)), seed=st.integers(0, 100))
def test_sparse_lookup_id_list_reducers(reducer, seed):
    m = new_model(schema.Struct(("f", schema.List(ids()))))
    out = m.SparseLookup(m.input_feature_schema.f, [3], reducer)
    assert out.field_type() == np.dtype((np.float32, (3,)))
    rng = np.random.RandomState(seed)
    lengths = rng.randint(1, 4, 5).astype(np.int32)
    values = rng.randint(0, LIMIT, lengths.sum()).astype(np.int64)
    run(m, [lengths, values])
    table = fetch("sparse_lookup/w")
    assert table.shape == (LIMIT, 3) and np.all(np.abs(table) <= np.sqrt(1.0 / LIMIT))
    expected = np.stack([REDUCE[reducer](table[values[s]]) for s in segments(lengths)])
    np.testing.assert_allclose(fetch(out()), expected, rtol=1e-5, atol=1e-6)


def test_sparse_lookup_none_reducer_gathers_each_id():
    m = new_model(schema.Struct(("f", schema.List(ids()))))
    out = m.SparseLookup(m.input_feature_schema.f, [2], "None")
    run(m, [np.array([2, 1], np.int32), np.array([3, 0, 9], np.int64)])
    np.testing.assert_array_equal(fetch(out()), fetch("sparse_lookup/w")[[3, 0, 9]])


def test_sparse_lookup_id_score_list_weighted_and_position_weighted():
    score_list = schema.Map(ids(), schema.Scalar(np.float32))
    m = new_model(schema.Struct(("f", score_list), ("g", schema.List(ids()))))
    weighted = m.SparseLookup(m.input_feature_schema.f, [2], "WeightedSum")
    pos = m.PositionWeighted(m.input_feature_schema.g)
    pos_list = schema.Map(m.input_feature_schema.g.items, pos.position_weights, lengths_blob=None)
    pos_list = schema.List(
        schema.Struct(("keys", m.input_feature_schema.g.items), ("values", pos.position_weights)),
        lengths_blob=m.input_feature_schema.g.lengths,
    )
    by_position = m.SparseLookup(pos_list, [2], "PositionWeighted")
    lengths = np.array([2, 1], np.int32)
    keys = np.array([4, 7, 1], np.int64)
    scores = np.array([0.5, 2.0, -1.0], np.float32)
    g_lengths = np.array([3, 1], np.int32)
    g_ids = np.array([1, 2, 3, 4], np.int64)
    run(m, [lengths, keys, scores, g_lengths, g_ids])
    t = fetch("sparse_lookup/w")
    expected = np.stack([(t[keys[s]] * scores[s, None]).sum(0) for s in segments(lengths)])
    np.testing.assert_allclose(fetch(weighted()), expected, rtol=1e-5)
    # position weights start at 1: the pooled embedding is a plain sum, positions 0,1,2 / 0
    assert fetch("position_weights/pos_w").shape == (LIMIT,)
    np.testing.assert_array_equal(fetch(pos.position_weights()), [1, 1, 1, 1])
    t2 = fetch("sparse_lookup_auto_0/w")
    np.testing.assert_allclose(fetch(by_position()), [t2[[1, 2, 3]].sum(0), t2[4]], rtol=1e-5)
    with pytest.raises(AssertionError, match="IdScoreList"):
        m.SparseLookup(m.input_feature_schema.g, [2], "PositionWeighted")


@pytest.mark.parametrize("reducer", ["Sum", "WeightedSum"])
def test_sparse_lookup_use_external_weights_weighs_rows_by_the_scores(reducer):
    m = new_model(schema.Struct(("f", schema.Map(ids(), schema.Scalar(np.float32)))))
    out = m.SparseLookup(m.input_feature_schema.f, [3], reducer, use_external_weights=True)
    assert out.field_types()[0].shape == (3,)
    lengths = np.array([1, 3, 0], np.int32)
    keys = np.array([9, 0, 2, 9], np.int64)
    scores = np.array([2.0, 0.5, -1.0, 3.0], np.float32)
    run(m, [lengths, keys, scores])
    t = fetch("sparse_lookup/w")
    expected = np.stack([(t[keys[s]] * scores[s, None]).sum(0) for s in segments(lengths)])
    np.testing.assert_allclose(fetch(out()), expected, rtol=1e-5, atol=1e-6)
    # with Sum the scores are weights that get a gradient (grad_on_weights=1); WeightedSum keeps its own
    # meaning (scores as given, no gradient), as in Caffe2
    _, train = layer_model_instantiator.generate_training_nets_forward_only(m)
    (op,) = [op for op in train.Proto().op if op.type == "SparseLengthsWeightedSum"]
    assert {a.name: a.i for a in op.arg}.get("grad_on_weights") == (1 if reducer == "Sum" else 0)


def test_sparse_lookup_use_external_weights_arguments():
    m = new_model(schema.Struct(("f", schema.Map(ids(), schema.Scalar(np.float32))), ("g", schema.List(ids()))))
    with pytest.raises(AssertionError, match="IdScoreList"):
        m.SparseLookup(m.input_feature_schema.g, [2], "Sum", use_external_weights=True)
    with pytest.raises(AssertionError, match="Sum"):
        m.SparseLookup(m.input_feature_schema.f, [2], "Mean", use_external_weights=True)


def test_sparse_lookup_init_scale_numerator():
    m = new_model(schema.Struct(("f", schema.List(ids(LIMIT)))))
    m.SparseLookup(m.input_feature_schema.f, [2], "Sum", uniform_weight_init_scale_numerator=4.0)
    fills = [op for op in m.param_init_net.Proto().op if op.type == "UniformFill"]
    args = {a.name: a.f for a in fills[0].arg}
    np.testing.assert_allclose([args["min"], args["max"]], [-np.sqrt(4.0 / LIMIT), np.sqrt(4.0 / LIMIT)], rtol=1e-6)


def test_sparse_lookup_with_evicted_values_resets_those_rows_in_training():
    m = new_model(schema.Struct(("f", schema.ListWithEvicted(ids(4)))))
    out = m.SparseLookup(m.input_feature_schema.f, [3], "Sum", weight_init=("ConstantFill", {"value": 1.0}))
    m.output_schema = schema.Struct()
    init, train = layer_model_instantiator.generate_training_nets_forward_only(m)
    workspace.RunNetOnce(init)
    np.testing.assert_array_equal(fetch("sparse_lookup/reinit_vec"), np.ones(3, np.float32))
    table = np.arange(12, dtype=np.float32).reshape(4, 3)
    workspace.FeedBlob("sparse_lookup/w", table)
    # lengths, items, evicted ids: rows 1 and 3 are reset to the initial value before the lookup
    schema.FeedRecord(
        m.input_feature_schema, [np.array([2], np.int32), np.array([1, 2], np.int64), np.array([1, 3], np.int64)]
    )
    workspace.RunNetOnce(train)
    expected = table.copy()
    expected[[1, 3]] = 1.0
    np.testing.assert_array_equal(fetch("sparse_lookup/w"), expected)
    np.testing.assert_allclose(fetch(out()), [expected[1] + expected[2]])
    # prediction does not reset rows
    workspace.FeedBlob("sparse_lookup/w", table)
    workspace.RunNetOnce(layer_model_instantiator.generate_predict_net(m))
    np.testing.assert_array_equal(fetch("sparse_lookup/w"), table)


def test_sparse_lookup_needs_a_categorical_limit():
    m = new_model(schema.Struct(("f", schema.List(schema.Scalar(np.int64)))))
    with pytest.raises(ValueError):
        m.SparseLookup(m.input_feature_schema.f, [2], "Sum")


def test_sparse_lookup_trains_only_the_rows_it_reads():
    """Its gradient is sparse: Adagrad via the default optimizer touches only looked-up rows."""
    from framework.caffe2.python import optimizer

    AdagradOptimizer = optimizer.AdagradOptimizer
    m = new_model(schema.Struct(("f", schema.List(ids()))))
    m.default_optimizer = AdagradOptimizer(alpha=0.5)
    emb = m.SparseLookup(m.input_feature_schema.f, [2], "Sum")
    loss = m.AveragedLoss(m.ReduceFrontSum(emb, 1), 1)  # a scalar function of the embeddings
    m.add_loss(loss)
    m.output_schema = schema.Struct()
    init, train = layer_model_instantiator.generate_training_nets(m)
    assert "SparseAdagrad" in [op.type for op in train.Proto().op]
    schema.FeedRecord(m.input_feature_schema, [np.array([2], np.int32), np.array([1, 3], np.int64)])
    workspace.RunNetOnce(init)
    before = fetch("sparse_lookup/w").copy()
    workspace.RunNetOnce(train)
    after = fetch("sparse_lookup/w")
    changed = np.flatnonzero(np.any(after != before, axis=1))
    assert changed.tolist() == [1, 3]


@pytest.mark.parametrize("use_hashing", [True, False])
def test_sparse_feature_hash(use_hashing):
    m = new_model(schema.Struct(("f", schema.List(ids(1000)))))
    out = m.SparseFeatureHash(m.input_feature_schema.f, modulo=7, use_hashing=use_hashing)
    assert out.items.metadata.categorical_limit == 7
    values = np.array([5, 100, -3, 999], np.int64)
    run(m, [np.array([4], np.int32), values])
    hashed = fetch(out.items())
    np.testing.assert_array_equal(fetch(out.lengths()), [4])
    assert np.all((hashed >= 0) & (hashed < 7))
    if not use_hashing:
        np.testing.assert_array_equal(hashed, np.mod(values, 7))  # sign follows the divisor


@given(divisor=st.integers(1, 20), modulo=st.integers(2, 50))
@settings(max_examples=10, deadline=None)
def test_sparse_feature_hash_divide_mod(divisor, modulo):
    m = new_model(schema.Struct(("f", schema.List(ids(1000)))))
    out = m.SparseFeatureHash(m.input_feature_schema.f, modulo=modulo, use_hashing=False, use_divide_mod=True,
                              divisor=divisor)  # fmt: skip
    assert out.items.metadata.categorical_limit == modulo
    values = np.array([0, 5, 100, 999, 37], np.int64)
    run(m, [np.array([5], np.int32), values])
    # ids // divisor (integer division of non-negative ids), then mod
    np.testing.assert_array_equal(fetch(out.items()), (values // divisor) % modulo)


def test_sparse_feature_hash_divide_mod_arguments():
    m = new_model(schema.Struct(("f", schema.List(ids(1000)))))
    with pytest.raises(Exception, match="use_hashing and use_divide_mod"):
        m.SparseFeatureHash(m.input_feature_schema.f, modulo=7, use_hashing=True, use_divide_mod=True, divisor=3)
    with pytest.raises(Exception, match="divisor"):
        m.SparseFeatureHash(m.input_feature_schema.f, modulo=7, use_hashing=False, use_divide_mod=True, divisor=0)


def test_merge_id_lists():
    m = new_model(schema.Struct(("a", schema.List(ids(5))), ("b", schema.List(ids(9)))))
    out = m.MergeIdLists(m.input_feature_schema)
    assert out.items.metadata.categorical_limit == 9
    run(m, [np.array([2, 1], np.int32), np.array([1, 2, 3], np.int64), np.array([1, 2], np.int32),
            np.array([2, 4, 5], np.int64)])  # fmt: skip
    np.testing.assert_array_equal(fetch(out.lengths()), [2, 3])
    assert sorted(fetch(out.items())[:2]) == [1, 2] and sorted(fetch(out.items())[2:]) == [3, 4, 5]


def test_gather_record_with_a_list():
    m = new_model(
        schema.Struct(
            ("idx", schema.Scalar(np.int32)), ("d", schema.Scalar((np.float32, (2,)))), ("l", schema.List(np.int64))
        )
    )
    x = m.input_feature_schema
    out = m.GatherRecord(schema.Struct(("indices", x.idx), ("record", schema.Struct(("d", x.d), ("l", x.l)))))
    dense = np.arange(8, dtype=np.float32).reshape(4, 2)
    run(m, [np.array([3, 1], np.int32), dense, np.array([1, 0, 2, 1], np.int32), np.array([10, 20, 21, 30], np.int64)])
    np.testing.assert_array_equal(fetch(out.d()), dense[[3, 1]])
    np.testing.assert_array_equal(fetch(out.l.lengths()), [1, 0])
    np.testing.assert_array_equal(fetch(out.l.items()), [30])


def test_map_to_range_grows_in_training_and_freezes_in_prediction():
    m = new_model(schema.Struct(("k", schema.Scalar(np.int64))))
    out = m.MapToRange(m.input_feature_schema.k, max_index=10)
    keys = np.array([100, 7, 100, 42], np.int64)
    run(m, [keys])
    first = fetch(out.indices())
    assert first[0] == first[2] and len(set(first.tolist())) == 3 and 0 not in first  # 0 = unseen
    schema.FeedRecord(m.input_feature_schema, [np.array([42, 5], np.int64)])
    workspace.RunNetOnce(layer_model_instantiator.generate_predict_net(m))
    np.testing.assert_array_equal(fetch(out.indices()), [first[3], 0])


def test_pairwise_dot_product_all_and_gathered():
    m = new_model(schema.Struct(("e", schema.Scalar((np.float32, (3, 2)))), ("i", schema.Scalar((np.int32, (2,))))))
    x = m.input_feature_schema
    full = m.PairwiseDotProduct(schema.Struct(("all_embeddings", x.e)), 9)
    picked = m.PairwiseDotProduct(schema.Struct(("all_embeddings", x.e), ("indices_to_gather", x.i)), 2)
    e = np.random.RandomState(3).randn(2, 3, 2).astype(np.float32)
    run(m, [e, np.array([1, 5], np.int32)])  # BatchGather: the same columns of every example
    gram = np.einsum("bik,bjk->bij", e, e).reshape(2, 9)
    np.testing.assert_allclose(fetch(full()), gram, rtol=1e-5)
    np.testing.assert_allclose(fetch(picked()), gram[:, [1, 5]], rtol=1e-5)
    with pytest.raises(AssertionError, match="xor"):
        m.PairwiseDotProduct(schema.Struct(("all_embeddings", x.e), ("x_embeddings", x.e), ("y_embeddings", x.e)), 9)


def test_feature_sparse_to_dense_float_and_id_list():
    float_map = schema.Map(schema.Scalar(np.int32), schema.Scalar(np.float32))
    id_list_map = schema.Map(schema.Scalar(np.int32), schema.List(np.int64))
    m = new_model(schema.Struct(("f", float_map), ("l", id_list_map)))
    specs = [
        ("f", schema.FeatureSpec(feature_type="FLOAT", feature_names=["a", "b", "c"], feature_ids=[5, 7, 9])),
        ("l", schema.FeatureSpec(feature_type="ID_LIST", feature_names=["p", "q"], feature_ids=[1, 2])),
    ]
    out = m.FeatureSparseToDense(m.input_feature_schema, specs)
    assert out.f.field_type().shape == (3,) and out.l.ranges.field_type().shape == (2, 2)
    assert out.l.ranges.metadata.feature_specs.feature_ids == [1, 2]
    run(
        m,
        [
            np.array([2, 1], np.int32), np.array([9, 5, 7], np.int32), np.array([1.5, 2.5, 3.5], np.float32),
            np.array([1, 1], np.int32), np.array([2, 1], np.int32), np.array([2, 1], np.int32),
            np.array([10, 11, 12], np.int64),
        ],
    )  # fmt: skip
    np.testing.assert_array_equal(fetch(out.f()), [[2.5, 0, 1.5], [0, 3.5, 0]])
    np.testing.assert_array_equal(fetch(out.l.ranges()), [[[0, 0], [0, 2]], [[2, 1], [0, 0]]])
    np.testing.assert_array_equal(fetch(out.l.values()), [10, 11, 12])


def test_recency_weighted_is_a_learned_weight_sum_and_training_uses_the_trainer_version():
    m = new_model(schema.Struct(("f", schema.Map(ids(), schema.Scalar(np.float32)))))
    out = m.SparseLookup(m.input_feature_schema.f, [2], "RecencyWeighted")
    lengths, keys, scores = np.array([2], np.int32), np.array([3, 5], np.int64), np.array([0.5, 2.0], np.float32)
    run(m, [lengths, keys, scores])
    _, train = layer_model_instantiator.generate_training_nets_forward_only(m)
    (op,) = train.Proto().op
    assert op.type == "SparseLengthsWeightedSum" and [a.i for a in op.arg if a.name == "grad_on_weights"] == [1]
    assert m.layers[0].trainer_version == "fp32"
    t = fetch("sparse_lookup/w")
    np.testing.assert_allclose(fetch(out()), [0.5 * t[3] + 2.0 * t[5]], rtol=1e-5)
    with pytest.raises(AssertionError, match="version"):
        from framework.caffe2.python.layers.sparse_lookup import get_sparse_lookup_trainer_version

        get_sparse_lookup_trainer_version("int8")
