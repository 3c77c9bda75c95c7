"""Partition, LengthsPartition, GatherByKey, KeySplit, RemoveDataBlocks, SparseDropoutWithReplacement
against loops."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.errors import FrameworkError
from framework.ops.testing import assert_reference_checks, run_op_on

keys_st = st.lists(st.integers(-7, 9), max_size=8).map(lambda v: np.array(v, np.int64))


def c_shard(k, n):
    s = int(np.fmod(k, n))
    return s + n if s < 0 else s


@settings(max_examples=30, deadline=None)
@given(keys_st, st.integers(1, 3), st.booleans())
def test_partition_and_gather_back(keys, parts, pack):
    x = np.arange(keys.size * 2, dtype=np.float32).reshape(-1, 2)
    ref = []
    for j in range(parts):
        sel = [i for i, k in enumerate(keys) if c_shard(k, parts) == j]
        ks = np.array([(keys[i] - j) // parts if pack else keys[i] for i in sel], np.int64)
        ref += [ks, x[sel].reshape(-1, 2)]
    outs = [f"o{i}" for i in range(2 * parts)]
    got = assert_reference_checks(
        CreateOperator("Partition", ["k", "x"], outs, pack_first_input=int(pack)),
        [keys, x],
        lambda *_: ref,
        check_inference=False,
    )
    back = run_op_on(
        CreateOperator("GatherByKey", ["k"] + [f"p{j}" for j in range(parts)], ["y"]),
        [keys] + [got[2 * j + 1] for j in range(parts)],
    )[0]
    np.testing.assert_array_equal(back, x)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(0, 3), max_size=4), st.integers(1, 3), st.data())
def test_lengths_partition(lengths, parts, data):
    lengths = np.array(lengths, np.int32)
    n = int(lengths.sum())
    keys = np.array(data.draw(st.lists(st.integers(0, 20), min_size=n, max_size=n)), np.int32)
    vals = keys.astype(np.float32) * 10
    seg = np.repeat(np.arange(len(lengths)), lengths)
    ref = []
    for j in range(parts):
        sel = [i for i in range(n) if keys[i] % parts == j]
        ref += [
            np.array([sum(1 for i in sel if seg[i] == s) for s in range(len(lengths))], np.int32),
            keys[sel],
            vals[sel],
        ]
    outs = [f"o{i}" for i in range(3 * parts)]
    assert_reference_checks(
        CreateOperator("LengthsPartition", ["l", "k", "v"], outs),
        [lengths, keys, vals],
        lambda *_: ref,
        check_inference=False,
    )


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(0, 3), max_size=8))
def test_key_split(keys):
    keys = np.array(keys, np.int32)
    ref = [np.array([i for i, k in enumerate(keys) if k == c], np.int32) for c in range(4)]
    assert_reference_checks(
        CreateOperator("KeySplit", ["k"], [f"o{c}" for c in range(4)], categorical_limit=4),
        [keys],
        lambda _: ref,
        check_inference=False,
    )


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 5), st.data())
def test_remove_data_blocks(n, data):
    x = np.arange(n * 2, dtype=np.float32).reshape(n, 2)
    idx = np.array(data.draw(st.lists(st.integers(0, n - 1), max_size=4)), np.int64)
    ref = x[[i for i in range(n) if i not in set(idx.tolist())]].reshape(-1, 2)
    assert_reference_checks(
        CreateOperator("RemoveDataBlocks", ["x", "i"], ["y"]), [x, idx], lambda *_: ref, check_inference=False
    )


@pytest.mark.parametrize("dtype", [np.float64, np.int32, np.int64])
def test_remove_data_blocks_with_no_indices_copies_data(dtype):
    """Caffe2 copies DATA when INDICES is empty, before looking at its type (np.array([]) is float64)."""
    x = np.arange(6, dtype=np.float32).reshape(3, 2)
    op = CreateOperator("RemoveDataBlocks", ["x", "i"], ["y"])
    assert_reference_checks(op, [x, np.array([], dtype)], lambda x, i: x.copy(), check_inference=False)
    with pytest.raises(FrameworkError, match="RemoveDataBlocks.*'i'"):
        run_op_on(op, [x, np.array([1.0])])


def test_sparse_dropout_with_replacement_extremes_and_rate():
    x = np.array([1, 2, 3, 4, 5], np.int64)
    lengths = np.array([2, 0, 3], np.int32)
    y, ol = run_op_on(CreateOperator("SparseDropoutWithReplacement", ["x", "l"], ["y", "ol"], ratio=0.0), [x, lengths])
    np.testing.assert_array_equal(y, x)
    np.testing.assert_array_equal(ol, lengths)
    y, ol = run_op_on(
        CreateOperator("SparseDropoutWithReplacement", ["x", "l"], ["y", "ol"], ratio=1.0, replacement_value=-1),
        [x, lengths],
    )
    np.testing.assert_array_equal(y, [-1, -1, -1])
    np.testing.assert_array_equal(ol, [1, 1, 1])
    many = np.ones(4000, np.int32)
    y, _ = run_op_on(
        CreateOperator("SparseDropoutWithReplacement", ["x", "l"], ["y", "ol"], ratio=0.3, replacement_value=-1),
        [np.zeros(4000, np.int64), many],
    )
    assert 0.25 < float(np.mean(y == -1)) < 0.35
