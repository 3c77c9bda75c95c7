"""Dataset ops over nested records: every batch read equals the Python flattening of the same
records (Caffe2's schema example: a, b = list of lists, c = list of structs with a list);
ComputeOffset/SortAndShuffle/ReadRandomBatch, Pack/UnPack, Trim, Append, AtomicAppend, tensor
vectors, cursor serialization, errors."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.errors import FrameworkError, SerializationError
from framework.memory.serialize import deserialize_blob, serialize_blob
from framework.memory.workspace import Workspace
from framework.ops import create_operator

FIELDS = ["a", "b:lengths", "b:values:lengths", "b:values:values", "c:lengths", "c:c1", "c:c2:lengths", "c:c2:values"]


def make_records(seed, n):
    rng = np.random.default_rng(seed)
    recs = []
    for _ in range(n):
        b = [list(rng.integers(0, 99, rng.integers(0, 3))) for _ in range(rng.integers(0, 3))]
        c = [
            (f"s{rng.integers(0, 9)}".encode(), list(rng.integers(0, 99, rng.integers(0, 3))))
            for _ in range(rng.integers(0, 3))
        ]
        recs.append((int(rng.integers(0, 99)), b, c))
    return recs


def flatten(recs):
    """The eight field arrays of the records, written out independently of the framework."""
    a = [r[0] for r in recs]
    b_len = [len(r[1]) for r in recs]
    b_vlen = [len(x) for r in recs for x in r[1]]
    b_vals = [v for r in recs for x in r[1] for v in x]
    c_len = [len(r[2]) for r in recs]
    c1 = [s for r in recs for s, _ in r[2]]
    c2_len = [len(l) for r in recs for _, l in r[2]]
    c2_vals = [v for r in recs for _, l in r[2] for v in l]
    obj = np.empty(len(c1), dtype=object)
    obj[:] = c1
    i32 = lambda xs: np.array(xs, np.int32)  # noqa: E731
    return [
        i32(a),
        i32(b_len),
        i32(b_vlen),
        np.array(b_vals, np.int64),
        i32(c_len),
        obj,
        i32(c2_len),
        np.array(c2_vals, np.int64),
    ]


def feed(ws, arrays, prefix="f"):
    names = [f"{prefix}{i}" for i in range(len(arrays))]
    for n, a in zip(names, arrays):
        ws.feed_blob(n, a)
    return names


def _eq(got, want):
    assert got.shape == want.shape and got.dtype == want.dtype, (got, want)
    np.testing.assert_array_equal(got, want)


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 999), n=st.integers(0, 7), batch=st.integers(1, 4), enforce=st.booleans())
def test_read_next_batch_matches_flattened_records(seed, n, batch, enforce):
    recs = make_records(seed, n)
    ws = Workspace()
    names = feed(ws, flatten(recs))
    ws.run_operator_once(CreateOperator("CheckDatasetConsistency", names, [], fields=FIELDS))
    ws.run_operator_once(CreateOperator("CreateTreeCursor", [], ["cur"], fields=FIELDS))
    outs = [f"o{i}" for i in range(len(FIELDS))]
    read = create_operator(
        CreateOperator("ReadNextBatch", ["cur", *names], outs, batch_size=batch, enforce_batch_size=enforce), ws
    )
    for start in range(0, n + batch, batch):
        read.run()
        part = recs[start : start + batch]
        if enforce and len(part) < batch:
            part = []
        for o, want in zip(outs, flatten(part)):
            _eq(ws.fetch_blob(o), want)
    ws.run_operator_once(CreateOperator("GetCursorOffset", ["cur"], ["off"]))
    assert ws.fetch_blob("off").dtype == np.int32 and ws.fetch_blob("off")[0] == n
    ws.run_operator_once(CreateOperator("ResetCursor", ["cur"], []))
    read.run()
    first = recs[:batch] if not (enforce and n < batch) else []
    for o, want in zip(outs, flatten(first)):
        _eq(ws.fetch_blob(o), want)


def test_compute_offset_shuffle_and_random_batches():
    recs = make_records(3, 9)
    ws = Workspace()
    names = feed(ws, flatten(recs))
    ws.run_operator_once(CreateOperator("CreateTreeCursor", [], ["cur"], fields=FIELDS))
    ws.run_operator_once(CreateOperator("ComputeOffset", ["cur", *names], ["offsets"]))
    offs = ws.fetch_blob("offsets")
    assert offs.shape == (10, 5) and offs.dtype == np.int64
    for k in range(10):  # row k: where record k starts in each domain
        prefix = flatten(recs[:k])
        assert offs[k].tolist() == [len(prefix[0]), len(prefix[2]), len(prefix[3]), len(prefix[5]), len(prefix[7])]
    op = CreateOperator("SortAndShuffle", ["cur", *names], ["idx"], sort_by_field_idx=0, batch_size=2, shuffle_size=2)
    op.device_option.random_seed = 5
    ws.run_operator_once(op)
    idx = ws.fetch_blob("idx")
    assert sorted(idx.tolist()) == list(range(9)) and idx[-1] in range(9)
    ws.run_operator_once(
        CreateOperator("SortAndShuffle", ["cur", *names], ["sorted"], sort_by_field_idx=0, batch_size=9)
    )
    assert [recs[i][0] for i in ws.fetch_blob("sorted")] == sorted(r[0] for r in recs)
    outs = [f"o{i}" for i in range(len(FIELDS))]
    rr = create_operator(CreateOperator("ReadRandomBatch", ["cur", "idx", "offsets", *names], outs, batch_size=4), ws)
    ws.run_operator_once(CreateOperator("ResetCursor", ["cur"], []))
    for start in (0, 4, 8):
        rr.run()
        for o, want in zip(outs, flatten([recs[i] for i in idx[start : start + 4]])):
            _eq(ws.fetch_blob(o), want)
    rr.run()  # past the end: empty
    assert ws.fetch_blob("o0").shape == (0,)
    loop = create_operator(
        CreateOperator("ReadRandomBatch", ["cur", "idx", "offsets", *names], outs, batch_size=4, loop_over=1), ws
    )
    loop.run()
    _eq(ws.fetch_blob("o0"), flatten([recs[i] for i in idx[:4]])[0])


def test_pack_unpack_trim_and_consistency_errors():
    recs = make_records(7, 5)
    ws = Workspace()
    arrays = flatten(recs)
    names = feed(ws, arrays)
    ws.run_operator_once(CreateOperator("PackRecords", names, ["packed"], fields=FIELDS))
    packed = ws.get_blob("packed")._obj.data()
    assert packed.shape == (5,)
    for k, rec in enumerate(packed):
        for got, want in zip(rec, flatten([recs[k]])):
            _eq(got, want)
    outs = [f"u{i}" for i in range(len(FIELDS))]
    ws.run_operator_once(CreateOperator("UnPackRecords", ["packed"], outs, fields=FIELDS))
    for o, want in zip(outs, arrays):
        _eq(ws.fetch_blob(o), want)
    ws.run_operator_once(CreateOperator("TrimDataset", names, names, fields=FIELDS, multiple_of=2))
    for n, want in zip(names, flatten(recs[:4])):
        _eq(ws.fetch_blob(n), want)
    bad = flatten(recs)
    bad[2] = bad[2][:-1] if len(bad[2]) else np.array([1], np.int32)
    bad_names = feed(ws, bad, "bad")
    with pytest.raises(FrameworkError, match="CheckDatasetConsistency"):
        ws.run_operator_once(CreateOperator("CheckDatasetConsistency", bad_names, [], fields=FIELDS))
    with pytest.raises(FrameworkError, match="depends on a field defined afterwards"):
        create_operator(CreateOperator("CreateTreeCursor", [], ["c"], fields=["x:values", "x:lengths"]), ws)
    ws.feed_blob("notcursor", np.zeros(1))
    with pytest.raises(FrameworkError, match=r"ReadNextBatch.*'notcursor'.*TreeCursor"):
        ws.run_operator_once(CreateOperator("ReadNextBatch", ["notcursor", "f0"], ["o"]))


def test_cursor_serializes_as_caffe2():
    ws = Workspace()
    names = feed(ws, flatten(make_records(1, 4)))
    ws.run_operator_once(CreateOperator("CreateTreeCursor", [], ["cur"], fields=FIELDS))
    ws.run_operator_once(CreateOperator("ReadNextBatch", ["cur", *names], [f"o{i}" for i in range(8)], batch_size=2))
    (key, value), *_ = list(serialize_blob("cur", ws.get_blob("cur")))
    ws2 = Workspace()
    deserialize_blob(value, ws2.create_blob("cur"))
    c1, c2 = ws.get_blob("cur")._obj, ws2.get_blob("cur")._obj
    assert c2.offsets == c1.offsets and c2.it.fields == FIELDS


def test_append_atomic_append_and_tensor_vectors():
    ws = Workspace()
    ws.feed_blob("A", np.arange(6, dtype=np.float32).reshape(3, 2))
    ws.feed_blob("B", np.full((2, 2), 9, np.float32))
    app = create_operator(CreateOperator("Append", ["A", "B"], ["A"]), ws)
    for _ in range(3):
        app.run()
    want = np.concatenate([np.arange(6, dtype=np.float32).reshape(3, 2)] + [np.full((2, 2), 9, np.float32)] * 3)
    _eq(ws.fetch_blob("A"), want)
    ws.feed_blob("C", np.zeros((2, 3), np.float32))
    with pytest.raises(FrameworkError, match="cannot append 'C'"):
        ws.run_operator_once(CreateOperator("Append", ["A", "C"], ["A"]))
    _eq(ws.fetch_blob("A"), want)
    ws.run_operator_once(CreateOperator("CreateMutex", [], ["m"]))
    ws.feed_blob("X", np.zeros((0,), np.int64))
    ws.feed_blob("Y", np.zeros((1, 2), np.float32))
    ws.feed_blob("x1", np.array([5, 6], np.int64))
    ws.feed_blob("y1", np.ones((2, 2), np.float32))
    at = create_operator(CreateOperator("AtomicAppend", ["m", "X", "Y", "x1", "y1"], ["X", "Y"]), ws)
    at.run()
    at.run()
    _eq(ws.fetch_blob("X"), np.array([5, 6, 5, 6], np.int64))
    _eq(ws.fetch_blob("Y"), np.concatenate([np.zeros((1, 2), np.float32), np.ones((4, 2), np.float32)]))
    ws.run_operator_once(CreateOperator("CreateTensorVector", [], ["vec"]))
    col = CreateOperator("CollectTensor", ["vec", "t"], ["vec"], num_to_collect=3)
    col.device_option.random_seed = 1
    collect = create_operator(col, ws)
    seen = []
    for k in range(10):
        ws.feed_blob("t", np.full((1, 2), k, np.int32))
        collect.run()
        seen.append(k)
    ws.run_operator_once(CreateOperator("TensorVectorSize", ["vec"], ["n"]))
    assert ws.fetch_blob("n").item() == 3 and ws.fetch_blob("n").dtype == np.int32
    ws.run_operator_once(CreateOperator("ConcatTensorVector", ["vec"], ["cat"]))
    cat = ws.fetch_blob("cat")
    assert cat.shape == (3, 2) and len(set(cat[:, 0].tolist())) == 3 and set(cat[:, 0].tolist()) <= set(seen)
    with pytest.raises(SerializationError, match="TensorVector, which has no serializer"):
        list(serialize_blob("vec", ws.get_blob("vec")))
    with pytest.raises(FrameworkError, match="num_to_collect"):
        create_operator(CreateOperator("CollectTensor", ["vec", "t"], ["vec"]), ws)
