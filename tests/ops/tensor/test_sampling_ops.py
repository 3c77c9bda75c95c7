"""UniqueUniformFill, WeightedMultiSampling, ReservoirSampling, NGramFromCategorical: properties
checked against Python references (distinctness and range, CDF lookups with a seeded reference
generator, reservoir contents, mixed-radix codes)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.errors import FrameworkError
from framework.memory.workspace import Workspace
from framework.ops import create_operator
from framework.ops.testing import assert_reference_checks


@settings(max_examples=25, deadline=None)
@given(
    n=st.integers(0, 8),
    lo=st.integers(-5, 5),
    span=st.integers(11, 20),
    avoid=st.lists(st.integers(-5, 30), max_size=4),
)
def test_unique_uniform_fill(n, lo, span, avoid):
    # span >= 11: at least 12 values, 8 left after avoiding 4 (too few values is checked below)
    ws = Workspace()
    ws.feed_blob("like", np.zeros((n,), np.int32))
    ws.feed_blob("avoid", np.array(avoid, np.int32))
    op = CreateOperator("UniqueUniformFill", ["like", "avoid"], ["y"], min=lo, max=lo + span, dtype=2)
    op.device_option.random_seed = n
    ws.run_operator_once(op)
    y = ws.fetch_blob("y")
    assert y.shape == (n,) and y.dtype == np.int32
    assert len(set(y.tolist())) == n and all(lo <= v <= lo + span and v not in avoid for v in y.tolist())
    with pytest.raises(FrameworkError, match="bigger than min"):
        create_operator(CreateOperator("UniqueUniformFill", [], ["y"], shape=[2], min=3, max=3), ws)
    ws.run_operator_once(CreateOperator("UniqueUniformFill", [], ["z"], shape=[3], min=0, max=2, dtype=10))
    assert sorted(ws.fetch_blob("z").tolist()) == [0, 1, 2] and ws.fetch_blob("z").dtype == np.int64
    with pytest.raises(FrameworkError, match="cannot draw 4 distinct values"):
        ws.run_operator_once(CreateOperator("UniqueUniformFill", [], ["z"], shape=[4], min=0, max=2))


@settings(max_examples=20, deadline=None)
@given(w=st.lists(st.floats(0.0, 3.0), min_size=1, max_size=6), n=st.integers(0, 10), seed=st.integers(0, 999))
def test_weighted_multi_sampling(w, n, seed):
    cdf = np.cumsum(np.array(w, np.float32)).astype(np.float32)
    op = CreateOperator("WeightedMultiSampling", ["cdf"], ["idx"], num_samples=n)
    op.device_option.random_seed = seed

    def ref(cdf):
        rng = np.random.Generator(np.random.MT19937(seed))
        r = rng.random(n, dtype=np.float32) * np.float32(cdf[-1])
        return np.array([next(i for i, c in enumerate(cdf) if c >= v) for v in r], np.int32)

    assert_reference_checks(op, [cdf], ref, check_no_realloc=False)

    shaped = CreateOperator("WeightedMultiSampling", ["cdf", "s"], ["idx"])
    shaped.device_option.random_seed = seed

    def ref_shaped(c, s):
        rng = np.random.Generator(np.random.MT19937(seed))
        r = rng.random(6, dtype=np.float32) * np.float32(c[-1])
        return np.array([next(i for i, v in enumerate(c) if v >= x) for x in r], np.int32).reshape(2, 3)

    assert_reference_checks(shaped, [cdf, np.zeros((2, 3))], ref_shaped, check_no_realloc=False)
    empty = CreateOperator("WeightedMultiSampling", ["cdf"], ["idx"], num_samples=3)
    assert_reference_checks(empty, [np.zeros(0, np.float32)], lambda c: np.zeros(0, np.int32), check_inference=False)


def test_reservoir_sampling_keeps_a_uniform_sample():
    k, total = 5, 40
    counts = np.zeros(total)
    for seed in range(60):
        ws = Workspace()
        ws.run_operator_once(CreateOperator("CreateMutex", [], ["m"]))
        ws.feed_blob("res", np.zeros((0, 2), np.float32))
        ws.feed_blob("n", np.zeros(1, np.int64))
        op_def = CreateOperator("ReservoirSampling", ["res", "n", "x", "m"], ["res", "n"], num_to_collect=k)
        op_def.device_option.random_seed = seed
        op = create_operator(op_def, ws)
        for start in range(0, total, 8):
            ids = np.arange(start, start + 8)
            ws.feed_blob("x", np.stack([ids, ids], 1).astype(np.float32))
            op.run()
        res = ws.fetch_blob("res")
        assert res.shape == (k, 2) and ws.fetch_blob("n").tolist() == [total]
        assert len(set(res[:, 0].tolist())) == k
        counts[res[:, 0].astype(int)] += 1
    # every row is kept with probability k/total = 1/8: 60 runs -> 7.5 expected each
    assert counts[:20].sum() > 0.25 * counts.sum() and counts[20:].sum() > 0.25 * counts.sum()
    with pytest.raises(FrameworkError, match="num_to_collect"):
        create_operator(CreateOperator("ReservoirSampling", ["res", "n", "x", "m"], ["res", "n"]), Workspace())


def test_reservoir_sampling_of_packed_records_keeps_each_record_whole():
    # PackRecords gives a 1-D object tensor of records (one tuple of field slices each); the reservoir
    # collects whole records, which UnPackRecords turns back into fields
    ws = Workspace()
    ws.run_operator_once(CreateOperator("CreateMutex", [], ["m"]))
    ws.feed_blob("n", np.zeros(1, np.int64))
    ws.feed_blob("res", np.zeros(0, np.float32))
    dense = np.arange(10, dtype=np.float32).reshape(5, 2)
    ws.feed_blob("dense", dense)
    ws.run_operator_once(CreateOperator("PackRecords", ["dense"], ["packed"], fields=["dense"]))
    op = create_operator(CreateOperator("ReservoirSampling", ["res", "n", "packed", "m"], ["res", "n"],
                                        num_to_collect=3), ws)  # fmt: skip
    op.run()
    res = ws.fetch_blob("res")
    assert res.dtype == object and res.shape == (3,) and ws.fetch_blob("n").tolist() == [5]
    ws.run_operator_once(CreateOperator("UnPackRecords", ["res"], ["out"], fields=["dense"]))
    out = ws.fetch_blob("out")
    # whole records (both values of one row), each kept once
    assert out.shape == (3, 2) and len({tuple(r) for r in out.tolist()}) == 3
    assert all(row.tolist() in dense.tolist() for row in out)
    op.run()  # a second batch replaces records with whole records
    ws.run_operator_once(CreateOperator("UnPackRecords", ["res"], ["out"], fields=["dense"]))
    out = ws.fetch_blob("out")
    assert out.shape == (3, 2) and all(row.tolist() in dense.tolist() for row in out)


def test_ngram_from_categorical():
    x = np.array([[1.0, 0.4, 7.0], [2.0, 0.6, 9.0], [5.0, 1.5, 8.0]], np.float32)
    op = CreateOperator(
        "NGramFromCategorical", ["x"], ["y"], col_ids=[0, 2], categorical_limits=[2, 3], vals=[1, 2, 7, 8, 9]
    )

    def ref(x):
        out = []
        for row in x:
            a = {1: 0, 2: 1}.get(int(np.floor(row[0] + 0.5)), 0)
            b = {7: 0, 8: 1, 9: 2}.get(int(np.floor(row[2] + 0.5)), 0)
            out.append(a + 2 * b)
        return np.array(out, np.int32)

    assert_reference_checks(op, [x], ref)
    with pytest.raises(FrameworkError, match="sum\\(categorical_limits\\)"):
        create_operator(
            CreateOperator("NGramFromCategorical", ["x"], ["y"], col_ids=[0], categorical_limits=[2], vals=[1]),
            Workspace(),
        )


def _dedup_setup(ws: Workspace, k: int, seed: int):
    ws.feed_blob("res", np.zeros((0, 2), np.float32))
    ws.feed_blob("n", np.zeros(1, np.int64))
    ws.feed_blob("p2o", np.zeros(0, np.int64))
    ws.run_operator_once(CreateOperator("CreateMutex", [], ["m"]))
    ws.run_operator_once(CreateOperator("CreateMap", [], ["map"], key_dtype=10, value_dtype=2))
    op_def = CreateOperator(
        "ReservoirSampling", ["res", "n", "x", "m", "oid", "map", "p2o"], ["res", "n", "map", "p2o"], num_to_collect=k
    )
    op_def.device_option.random_seed = seed
    return create_operator(op_def, ws)


def _feed_batch(ws: Workspace, oids: list[int]) -> None:
    ws.feed_blob("oid", np.array(oids, np.int64))
    ws.feed_blob("x", np.stack([oids, [10 * o for o in oids]], 1).astype(np.float32))


def test_reservoir_sampling_dedup_keeps_first_rows_of_new_objects():
    ws = Workspace()
    op = _dedup_setup(ws, k=10, seed=0)
    expected: list[int] = []  # room for all: the first row of each object, in order of first sight
    for batch in ([3, 3, 5, 1], [5, 7, 1, 7, 0], [], [2, 0, 3]):
        _feed_batch(ws, batch)
        op.run()
        expected += [o for o in dict.fromkeys(batch) if o not in expected]
        res, p2o = ws.fetch_blob("res"), ws.fetch_blob("p2o")
        assert res[:, 0].tolist() == expected and res[:, 1].tolist() == [10.0 * o for o in expected]
        assert p2o.tolist() == expected and ws.fetch_blob("n").tolist() == [len(expected)]
        assert ws.get_blob("map")._obj.items == {o: i for i, o in enumerate(expected)}
    ws.feed_blob("res", np.zeros((0, 2), np.float32))  # an emptied reservoir restarts everything
    _feed_batch(ws, [9, 3])
    op.run()
    assert ws.fetch_blob("p2o").tolist() == [9, 3] and ws.get_blob("map")._obj.items == {9: 0, 3: 1}
    assert ws.fetch_blob("n").tolist() == [2]


@settings(max_examples=15, deadline=None)
@given(
    seed=st.integers(0, 1000),
    k=st.integers(1, 4),
    batches=st.lists(st.lists(st.integers(0, 12), max_size=6), min_size=1, max_size=6),
)
def test_reservoir_sampling_dedup_invariants(seed, k, batches):
    ws = Workspace()
    op = _dedup_setup(ws, k, seed)
    visited = 0
    for batch in batches:
        before = set(ws.get_blob("map")._obj.items)
        _feed_batch(ws, batch)
        op.run()
        if ws.fetch_blob("res").shape[0] == 0:
            continue
        visited += len(set(batch) - before)  # each new object counts once per batch
        res, p2o = ws.fetch_blob("res"), ws.fetch_blob("p2o")
        omap = ws.get_blob("map")._obj.items
        assert ws.fetch_blob("n").tolist() == [visited]
        assert res.shape[0] == min(k, visited) == len(p2o) == len(omap)
        assert len(set(p2o.tolist())) == len(p2o) and res[:, 0].tolist() == p2o.astype(np.float32).tolist()
        assert omap == {int(o): i for i, o in enumerate(p2o)}


def test_reservoir_sampling_dedup_bad_inputs():
    ws = Workspace()
    op = _dedup_setup(ws, k=2, seed=0)
    ws.feed_blob("x", np.zeros((2, 2), np.float32))
    ws.feed_blob("oid", np.array([1, 2], np.int32))
    with pytest.raises(FrameworkError, match="OBJECT_ID"):
        op.run()
    ws.feed_blob("oid", np.array([1, 2, 3], np.int64))
    with pytest.raises(FrameworkError, match="OBJECT_ID"):
        op.run()
    assert ws.fetch_blob("res").shape == (0, 2) and ws.get_blob("map")._obj.items == {}
    bad = CreateOperator(
        "ReservoirSampling", ["res", "n", "x", "m", "oid", "map", "p2o"], ["res", "n"], num_to_collect=2
    )
    with pytest.raises(FrameworkError):
        create_operator(bad, ws)
