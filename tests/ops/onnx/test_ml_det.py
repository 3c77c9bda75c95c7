"""ai.onnx.ml ops (ONNXLabelEncoder, ONNXBinarizer, ONNXArrayFeatureExtractor) and ONNXDet,
against references written here (Python dicts, loops, a cofactor expansion)."""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.errors import ArgumentError, ShapeError, TypeMismatchError
from framework.ops.testing import arrays, assert_reference_checks, run_op_on


def test_label_encoder_strings_to_ints_and_back():
    x = np.array([b"a", b"b", b"d", b"c"], dtype=object)
    op = CreateOperator(
        "ONNXLabelEncoder", ["X"], ["Y"], keys_strings=["a", "b", "c"], values_int64s=[0, 1, 2], default_int64=42
    )
    (y,) = run_op_on(op, [x])
    assert y.dtype == np.int64 and y.tolist() == [0, 1, 42, 2]
    op = CreateOperator(
        "ONNXLabelEncoder", ["X"], ["Y"], keys_strings=["a", "b", "c"], values_int64s=[0, 1, 2], values_dtype="int16"
    )
    (y,) = run_op_on(op, [x])
    assert y.dtype == np.int16 and y.tolist() == [0, 1, -1, 2]  # default_int64 = -1
    op = CreateOperator("ONNXLabelEncoder", ["X"], ["Y"], keys_floats=[1.5, float("nan")], values_strings=["x", "nan"])
    (y,) = run_op_on(op, [np.array([[np.nan, 1.5], [2.0, 1.5]], np.float32)])
    assert y.tolist() == [[b"nan", b"x"], [b"_Unused", b"x"]]  # NaN matches NaN


@given(data=st.data())
@settings(max_examples=15, deadline=None)
def test_label_encoder_int_keys(data):
    keys = data.draw(st.lists(st.integers(-5, 5), min_size=1, max_size=5, unique=True))
    values = data.draw(st.lists(st.floats(-3, 3, width=32), min_size=len(keys), max_size=len(keys)))
    x = data.draw(arrays((2, 3), np.int64, elements=st.integers(-6, 6)))
    op = CreateOperator("ONNXLabelEncoder", ["X"], ["Y"], keys_int64s=keys, values_floats=values, default_float=9.0)
    table = dict(zip(keys, values))
    assert_reference_checks(op, [x], lambda x: np.vectorize(lambda k: table.get(int(k), 9.0))(x).astype(np.float32))


def test_binarizer_and_feature_extractor():
    x = np.array([[0.5, -1.0, 2.0], [np.nan, 1.0, 1.5]], np.float32)
    (y,) = run_op_on(CreateOperator("ONNXBinarizer", ["X"], ["Y"], threshold=1.0), [x])
    assert y.dtype == np.float32 and y.tolist() == [[0, 0, 1], [0, 0, 1]]
    (z,) = run_op_on(CreateOperator("ONNXArrayFeatureExtractor", ["X", "I"], ["Z"]), [x, np.array([2, 0], np.int64)])
    assert z.tolist()[0] == [2.0, 0.5] and z.shape == (2, 2)
    (z,) = run_op_on(CreateOperator("ONNXArrayFeatureExtractor", ["X", "I"], ["Z"]), [x[0], np.array([1], np.int64)])
    assert z.tolist() == [[-1.0]]  # a 1-D X gives one row
    with pytest.raises(ArgumentError, match="ONNXArrayFeatureExtractor.*'I'"):
        run_op_on(CreateOperator("ONNXArrayFeatureExtractor", ["X", "I"], ["Z"]), [x, np.array([3], np.int64)])
    with pytest.raises(TypeMismatchError, match="ONNXLabelEncoder.*'X'"):
        op = CreateOperator("ONNXLabelEncoder", ["X"], ["Y"], keys_strings=["a"], values_int64s=[1])
        run_op_on(op, [np.ones(2, np.int64)])


def _det(m):
    n = len(m)
    if n == 0:
        return 1.0
    total = 0.0
    for perm in itertools.permutations(range(n)):
        sign = (-1) ** sum(1 for i in range(n) for j in range(i + 1, n) if perm[i] > perm[j])
        total += sign * np.prod([m[i][perm[i]] for i in range(n)])
    return total


@given(data=st.data())
@settings(max_examples=15, deadline=None)
def test_det(data):
    n = data.draw(st.integers(1, 3))
    batch = data.draw(st.sampled_from([(), (2,), (2, 1)]))
    x = data.draw(arrays((*batch, n, n), np.float64, elements=st.integers(-3, 3).map(float)))

    def ref(x):
        flat = x.reshape(-1, n, n)
        return np.array([_det(m.tolist()) for m in flat]).reshape(batch)

    assert_reference_checks(CreateOperator("ONNXDet", ["X"], ["Y"]), [x], ref, atol=1e-9)
    with pytest.raises(ShapeError, match="ONNXDet.*'X'.*square"):
        run_op_on(CreateOperator("ONNXDet", ["X"], ["Y"]), [np.ones((2, 3))])


def _forest_op(aggregate=1, tracks=None, members=False):
    # tree 0: x0 <= 0.5 ? leaf0 : (x1 > 2 ? leaf1 : leaf2); tree 1: x1 in {1, 3} (or x0 < 0) ? leaf3 : leaf4
    kw = dict(
        nodes_featureids=[0, 1, 1 if members else 0],
        nodes_modes=[0, 3, 6 if members else 1],
        nodes_truenodeids=[0, 1, 3],
        nodes_trueleafs=[1, 1, 1],
        nodes_falsenodeids=[1, 2, 4],
        nodes_falseleafs=[0, 1, 1],
        leaf_targetids=[0, 1, 0, 1, 0],
        tree_roots=[0, 2],
        n_targets=2,
        aggregate_function=aggregate,
    )
    if tracks:
        kw["nodes_missing_value_tracks_true"] = tracks
    ins = ["X", "splits", "weights"] + (["members"] if members else [])
    return CreateOperator("ONNXTreeEnsemble", ins, ["Y"], **kw)


def _forest_ref(row, members, aggregate, tracks):
    x0, x1 = row
    leaves = [0 if (x0 <= 0.5 or (np.isnan(x0) and tracks)) else (1 if x1 > 2 else 2)]
    leaves.append(3 if ((x1 in (1.0, 3.0)) if members else x0 < 0) else 4)
    weights, targets = [10.0, 20.0, 30.0, 1.5, -2.0], [0, 1, 0, 1, 0]
    init = {0: 0.0, 1: 0.0, 2: np.finfo(np.float64).max, 3: np.finfo(np.float64).min}[aggregate]
    y = [init, init]
    for leaf in leaves:
        t, w = targets[leaf], weights[leaf]
        y[t] = (
            y[t] + w / 2
            if aggregate == 0
            else y[t] + w
            if aggregate == 1
            else min(y[t], w)
            if aggregate == 2
            else max(y[t], w)
        )
    return y


@given(data=st.data())
@settings(max_examples=20, deadline=None)
def test_tree_ensemble(data):
    aggregate, members = data.draw(st.sampled_from([0, 1, 2, 3])), data.draw(st.booleans())
    tracks = data.draw(st.sampled_from([None, [1, 0, 0]]))
    x = data.draw(arrays((4, 2), np.float64, elements=st.sampled_from([-1.0, 0.5, 1.0, 2.0, 3.0, np.nan])))
    ins = [x, np.array([0.5, 2.0, 0.0]), np.array([10.0, 20.0, 30.0, 1.5, -2.0])]
    if members:
        ins.append(np.array([1.0, 3.0, np.nan]))
    ref = np.array([_forest_ref(r, members, aggregate, bool(tracks)) for r in x.tolist()])
    (y,) = run_op_on(_forest_op(aggregate, tracks, members), ins)
    np.testing.assert_allclose(y, ref)
