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
from framework.testing import assert_reference_checks


@settings(max_examples=25, deadline=None)
@given(
    n=st.integers(0, 8), lo=st.integers(-5, 5), span=st.integers(8, 20), avoid=st.lists(st.integers(-5, 30), max_size=4)
)
def test_unique_uniform_fill(n, lo, span, avoid):
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
