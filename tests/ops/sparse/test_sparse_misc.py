"""SparseNormalize, SparseLpRegularizer, Bucketize, BatchBucketize, LengthsPad, ScatterAssign, Scatter and
SparseLengthsPositionalWeightedSum against plain loops."""

import bisect

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.errors import FrameworkError
from framework.ops.testing import assert_reference_checks, run_op_on

idx_st = st.lists(st.integers(0, 4), max_size=6).map(lambda v: np.array(v, np.int64))


@settings(max_examples=30, deadline=None)
@given(idx_st, st.booleans(), st.floats(0.5, 2.0))
def test_sparse_normalize(idx, use_max, norm):
    p = (np.random.default_rng(len(idx)).standard_normal((5, 3)) * 2).astype(np.float32)
    ref = p.astype(np.float64)
    for r in idx:
        n = np.sqrt((ref[r] ** 2).sum()) + 1e-12
        if use_max and n < norm:
            continue
        ref[r] *= norm / n
    op = CreateOperator("SparseNormalize", ["p", "i", "g"], ["p"], use_max_norm=use_max, norm=norm)
    assert_reference_checks(
        op,
        [p, idx, np.zeros((len(idx), 3), np.float32)],
        lambda *_: ref.astype(np.float32),
        threshold=1e-5,
        check_no_realloc=False,
    )


@settings(max_examples=30, deadline=None)
@given(idx_st, st.sampled_from([1.0, 2.0]), st.floats(0.01, 0.5))
def test_sparse_lp_regularizer(idx, p_norm, lam):
    p = np.random.default_rng(len(idx)).standard_normal((5, 3)).astype(np.float32)
    ref = p.copy()
    for r in idx:
        for j in range(3):
            x = ref[r, j]
            if p_norm == 2.0:
                ref[r, j] = x * (np.float32(1) - np.float32(lam))
            else:
                ref[r, j] = x + np.float32(lam) if x < -lam else (x - np.float32(lam) if x > lam else 0.0)
    op = CreateOperator("SparseLpRegularizer", ["p", "i"], ["p"], p=p_norm, reg_lambda=lam)
    assert_reference_checks(op, [p, idx], lambda *_: ref, threshold=1e-6, check_no_realloc=False)


def test_sparse_lp_regularizer_refuses_other_p():
    with pytest.raises(FrameworkError, match="SparseLpRegularizer.*p = 1 and p = 2"):
        run_op_on(
            CreateOperator("SparseLpRegularizer", ["p", "i"], ["p"], p=3.0),
            [np.zeros((2, 2), np.float32), np.array([0])],
        )


@settings(max_examples=30, deadline=None)
@given(
    st.lists(st.floats(-3, 3, width=32), max_size=8),
    st.lists(st.sampled_from([-1.0, 0.0, 0.5, 2.0]), min_size=1, max_size=4),
)
def test_bucketize_is_lower_bound(values, bounds):
    bounds = sorted(bounds)
    x = np.array(values, np.float32)
    ref = np.array([bisect.bisect_left(np.float32(bounds).tolist(), float(v)) for v in x], np.int32)
    assert_reference_checks(CreateOperator("Bucketize", ["x"], ["y"], boundaries=bounds), [x], lambda _: ref)


def test_batch_bucketize_caffe2_example():
    feature = np.array([[1.0, 2.0, 3.0, 4.0], [0.5, 1.5, 2.5, 3.5], [1.0, 1.0, 1.0, 1.0]], np.float32)
    indices = np.array([0, 2], np.int32)
    lengths = np.array([2, 3], np.int32)
    bounds = np.array([0.5, 1.0, 1.5, 2.5, 3.0], np.float32)
    ref = np.array(
        [[bisect.bisect_left([0.5, 1.0], r[0]), bisect.bisect_left([1.5, 2.5, 3.0], r[2])] for r in feature], np.int32
    )
    assert_reference_checks(
        CreateOperator("BatchBucketize", ["f", "i", "b", "l"], ["y"]),
        [feature, indices, bounds, lengths],
        lambda *_: ref,
    )


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(0, 3), max_size=4), st.integers(3, 4))
def test_lengths_pad(lengths, target):
    lengths = np.array(lengths, np.int32)
    data = np.arange(int(lengths.sum()) * 2, dtype=np.float32).reshape(-1, 2)
    ref = np.full((len(lengths) * target, 2), 7.5, np.float32)
    start = 0
    for i, n in enumerate(lengths):
        ref[i * target : i * target + n] = data[start : start + n]
        start += n
    op = CreateOperator("LengthsPad", ["d", "l"], ["y"], padding_value=7.5, target_length=target)
    assert_reference_checks(op, [data, lengths], lambda *_: ref)


@settings(max_examples=30, deadline=None)
@given(idx_st)
def test_scatter_assign_last_wins(idx):
    data = np.zeros((5, 2), np.float32)
    slices = np.arange(len(idx) * 2, dtype=np.float32).reshape(-1, 2) + 1
    ref = data.copy()
    for k, r in enumerate(idx):
        ref[r] = slices[k]
    assert_reference_checks(
        CreateOperator("ScatterAssign", ["d", "i", "s"], ["d"]),
        [data, idx, slices],
        lambda *_: ref,
        check_no_realloc=False,
    )


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_scatter_elements(axis):
    data = np.zeros((3, 4), np.float32)
    idx = np.array([[1, 0, 2], [0, 2, 1]], np.int64) if axis == 0 else np.array([[1, 3], [0, 2], [3, 3]], np.int64)
    upd = np.arange(idx.size, dtype=np.float32).reshape(idx.shape) + 1
    ref = data.copy()
    ax = axis % 2
    for pos, k in np.ndenumerate(idx):
        target = list(pos)
        target[ax] = k
        ref[tuple(target)] = upd[pos]
    assert_reference_checks(
        CreateOperator("Scatter", ["d", "i", "u"], ["y"], axis=axis), [data, idx, upd], lambda *_: ref
    )


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(0, 3), max_size=4), st.data())
def test_sparse_lengths_positional_weighted_sum(lengths, data):
    lengths = np.array(lengths, np.int32)
    n = int(lengths.sum())
    table = np.random.default_rng(n).standard_normal((6, 2)).astype(np.float32)
    idx = np.array(data.draw(st.lists(st.integers(0, 5), min_size=n, max_size=n)), np.int64)
    w = np.array([0.5, -1.0, 2.0, 3.0], np.float32)
    ref = np.zeros((len(lengths), 2), np.float32)
    k = 0
    for s, m in enumerate(lengths):
        for j in range(m):
            ref[s] += w[j] * table[idx[k]]
            k += 1
    op = CreateOperator("SparseLengthsPositionalWeightedSum", ["d", "w", "i", "l"], ["y"])
    assert_reference_checks(op, [table, w, idx, lengths], lambda *_: ref, threshold=1e-5)


@pytest.mark.parametrize("k", [1, 2])
def test_reduce_front_weighted_sum_and_gradient(k):
    from framework.ops.testing import assert_gradient_checks

    rng = np.random.default_rng(k)
    x = rng.standard_normal((3, 2, 4)).astype(np.float32)
    n = int(np.prod(x.shape[:k]))
    w = rng.standard_normal(n).astype(np.float32)
    flat = x.reshape(n, -1)
    ref = sum(w[i] * flat[i] for i in range(n)).reshape(x.shape[k:])
    op = CreateOperator("ReduceFrontWeightedSum", ["x", "w"], ["y"], num_reduce_dim=k)
    assert_reference_checks(op, [x, w], lambda *_: ref, threshold=1e-5)
    assert_gradient_checks(op, [x, w], 0, check_inference=False)
