"""The Index* family (a growing id -> index map in a blob, freeze/load/store, checkpointing), key-value maps,
MergeIdLists and IndexHash against plain-Python references."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.errors import FrameworkError
from framework.memory.blob import Blob
from framework.memory.serialize import deserialize_blob, serialize_blob_to_string
from framework.memory.workspace import Workspace
from framework.ops import create_operator
from framework.ops.testing import assert_reference_checks, run_op_on


def op(ws, op_type, ins, outs, **kw):
    create_operator(CreateOperator(op_type, ins, outs, **kw), ws).run()


@pytest.mark.parametrize(
    "create, dtype", [("IntIndexCreate", np.int32), ("LongIndexCreate", np.int64), ("StringIndexCreate", object)]
)
@settings(max_examples=20, deadline=None)
@given(batches=st.lists(st.lists(st.integers(0, 6), max_size=6), min_size=1, max_size=4))
def test_index_hands_out_consecutive_ids_and_freezes(create, dtype, batches):
    def keys(b):
        if dtype is object:
            arr = np.empty(len(b), object)
            arr[:] = [f"k{v}".encode() for v in b]
            return arr
        return np.array(b, dtype)

    ws = Workspace()
    op(ws, create, [], ["idx"])
    seen = {}
    for b in batches:
        ws.feed_blob("keys", keys(b))
        op(ws, "IndexGet", ["idx", "keys"], ["ids"])
        expected = []
        for v in b:
            seen.setdefault(v, len(seen) + 1)
            expected.append(seen[v])
        np.testing.assert_array_equal(ws.fetch_blob("ids"), np.array(expected, np.int64))
    op(ws, "IndexSize", ["idx"], ["n"])
    assert int(ws.fetch_blob("n")) == len(seen) + 1  # Caffe2 counts the 0 entry
    op(ws, "IndexStore", ["idx"], ["items"])
    np.testing.assert_array_equal(ws.fetch_blob("items"), keys(list(seen)))
    op(ws, "IndexFreeze", ["idx"], ["idx"])
    ws.feed_blob("keys", keys([99] + list(seen)[:1]))
    op(ws, "IndexGet", ["idx", "keys"], ["ids"])
    np.testing.assert_array_equal(ws.fetch_blob("ids"), [0] + ([1] if seen else []))
    # a checkpoint round trip keeps keys, max_elements and frozenness
    data = serialize_blob_to_string(ws.get_blob("idx")._obj, "idx")
    b = Blob("idx")
    deserialize_blob(data, b)
    assert b._obj.frozen and b._obj.keys() == ws.get_blob("idx")._obj.keys()


def test_index_load_max_elements_and_errors():
    ws = Workspace()
    op(ws, "LongIndexCreate", [], ["idx"], max_elements=3)
    ws.feed_blob("items", np.array([0, 10, 20], np.int64))
    op(ws, "IndexLoad", ["idx", "items"], ["idx"], skip_first_entry=1)
    ws.feed_blob("keys", np.array([20, 10], np.int64))
    op(ws, "IndexGet", ["idx", "keys"], ["ids"])
    np.testing.assert_array_equal(ws.fetch_blob("ids"), [2, 1])
    ws.feed_blob("keys", np.array([30], np.int64))  # a third key: 0 + 2 keys already fill max_elements 3
    with pytest.raises(FrameworkError, match="max size"):
        op(ws, "IndexGet", ["idx", "keys"], ["ids"])
    ws.feed_blob("items", np.array([1, 1], np.int64))
    with pytest.raises(FrameworkError, match="IndexLoad.*repeated"):
        op(ws, "IndexLoad", ["idx", "items"], ["idx"])
    ws.feed_blob("keys", np.array([1], np.int32))
    with pytest.raises(FrameworkError, match="IndexGet.*int64"):
        op(ws, "IndexGet", ["idx", "keys"], ["ids"])
    ws.feed_blob("t", np.zeros(2, np.float32))
    with pytest.raises(FrameworkError, match="IndexSize.*expected an index"):
        op(ws, "IndexSize", ["t"], ["n"])


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.integers(-5, 5), st.integers(-9, 9)), max_size=8), st.sampled_from([np.int32, np.int64]))
def test_maps_keep_the_first_value_of_a_key(pairs, vtype):
    ws = Workspace()
    op(ws, "CreateMap", [], ["m"], key_dtype=2, value_dtype=2 if vtype is np.int32 else 10)
    ws.feed_blob("k", np.array([k for k, _ in pairs], np.int32))
    ws.feed_blob("v", np.array([v for _, v in pairs], vtype))
    op(ws, "KeyValueToMap", ["k", "v"], ["m"])
    op(ws, "KeyValueToMap", ["k", "v"], ["m"])  # again: nothing changes
    op(ws, "MapToKeyValue", ["m"], ["ko", "vo"])
    ref = {}
    for k, v in pairs:
        ref.setdefault(k, v)
    got = dict(zip(ws.fetch_blob("ko").tolist(), ws.fetch_blob("vo").tolist()))
    assert got == ref and ws.fetch_blob("vo").dtype == vtype
    data = serialize_blob_to_string(ws.get_blob("m")._obj, "m")
    b = Blob("m")
    deserialize_blob(data, b)
    assert b._obj.items == ref


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_merge_id_lists(data):
    batch = data.draw(st.integers(0, 4))
    lists = []
    for _ in range(data.draw(st.integers(1, 3))):
        lengths = data.draw(st.lists(st.integers(0, 3), min_size=batch, max_size=batch))
        values = data.draw(st.lists(st.integers(0, 6), min_size=sum(lengths), max_size=sum(lengths)))
        lists += [np.array(lengths, np.int32), np.array(values, np.int64)]
    merged, out_lengths = [], []
    offsets = [0] * (len(lists) // 2)
    for b in range(batch):
        ids = set()
        for k in range(len(lists) // 2):
            n = int(lists[2 * k][b])
            ids |= set(lists[2 * k + 1][offsets[k] : offsets[k] + n].tolist())
            offsets[k] += n
        merged += sorted(ids)
        out_lengths.append(len(ids))
    op_def = CreateOperator("MergeIdLists", [f"i{k}" for k in range(len(lists))], ["l", "v"])
    assert_reference_checks(
        op_def, lists, lambda *_: [np.array(out_lengths, np.int32), np.array(merged, np.int64)], check_inference=False
    )


def ref_hash(v, seed, modulo, bits):
    mask = (1 << bits) - 1

    def wrap(x):
        x &= mask
        return x - (1 << bits) if x >> (bits - 1) else x

    h = wrap(wrap(seed * 0xDEADBEEF))
    for byte in int(v & mask).to_bytes(bits // 8, "little"):
        h = wrap(h * 65537 + (byte - 256 if byte > 127 else byte))
    r = abs(h) % modulo * (1 if h >= 0 else -1)  # C's truncating %
    return (modulo + r) % modulo


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.integers(-(2**31), 2**31 - 1), max_size=6),
    st.integers(0, 5),
    st.integers(1, 1000),
    st.sampled_from([np.int32, np.int64]),
)
def test_index_hash_matches_the_byte_loop(values, seed, modulo, dtype):
    x = np.array(values, dtype)
    bits = np.dtype(dtype).itemsize * 8
    expected = np.array([ref_hash(int(v), seed, modulo, bits) for v in values], dtype)
    assert_reference_checks(
        CreateOperator("IndexHash", ["x"], ["y"], seed=seed, modulo=modulo), [x], lambda _: expected
    )


def test_index_hash_needs_a_positive_modulo():
    with pytest.raises(FrameworkError, match="IndexHash.*modulo"):
        run_op_on(CreateOperator("IndexHash", ["x"], ["y"]), [np.array([1], np.int64)])


@given(st.lists(st.integers(-(2**31), 2**31 - 1), min_size=1, max_size=6), st.integers(0, 5))
def test_index_hash_in_place(values, seed):
    # Caffe2's schema allows the one-to-one in-place use (indices -> indices)
    ws = Workspace()
    ws.feed_blob("ids", np.array(values, np.int64))
    op(ws, "IndexHash", ["ids"], ["ids"], seed=seed, modulo=997)
    assert ws.fetch_blob("ids").tolist() == [ref_hash(v, seed, 997, 64) for v in values]
