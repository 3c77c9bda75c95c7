"""Gather keeps a per-shape plan across runs of one operator: new shapes re-plan, and the index bounds are
still checked on every run (a warm operator given an out-of-range index fails and leaves its output as it
was). References are numpy's own indexing."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.errors import FrameworkError
from framework.memory.workspace import Workspace
from framework.ops import create_operator


def _op(ws, **args):
    return create_operator(CreateOperator("Gather", ["D", "I"], ["Y"], **args), ws)


@settings(max_examples=25, deadline=None)
@given(
    shapes=st.lists(st.lists(st.integers(1, 5), min_size=1, max_size=3), min_size=1, max_size=4),
    seed=st.integers(0, 99), scalar=st.booleans(),
)  # fmt: skip
def test_one_operator_over_changing_shapes(shapes, seed, scalar):
    rng = np.random.default_rng(seed)
    ws = Workspace()
    op = _op(ws)
    for shape in shapes:
        data = rng.standard_normal(shape).astype(np.float32)
        n = shape[0]
        idx = np.int64(rng.integers(-n, n)) if scalar else rng.integers(-n, n, size=3).astype(np.int32)
        ws.feed_blob("D", data)
        ws.feed_blob("I", np.asarray(idx))
        op.run()
        np.testing.assert_array_equal(ws.fetch_blob("Y"), data[np.asarray(idx)])


@pytest.mark.parametrize("bad", [np.int64(3), np.int64(-4), np.array([0, 3], np.int64)])
def test_warm_operator_still_checks_bounds(bad):
    ws = Workspace()
    op = _op(ws)
    data = np.arange(12, dtype=np.float32).reshape(3, 4)
    ws.feed_blob("D", data)
    ws.feed_blob("I", np.asarray(np.int64(1)) if np.ndim(bad) == 0 else np.array([1, 2], np.int64))
    op.run()
    before = ws.fetch_blob("Y").copy()
    ws.feed_blob("I", np.asarray(bad))
    with pytest.raises(FrameworkError, match="out of DATA's dim 0 of size 3"):
        op.run()
    np.testing.assert_array_equal(ws.fetch_blob("Y"), before)


def test_warm_operator_rechecks_index_dtype():
    ws = Workspace()
    op = _op(ws, axis=1)
    ws.feed_blob("D", np.ones((2, 3), np.float32))
    ws.feed_blob("I", np.asarray(np.int32(2)))
    op.run()
    np.testing.assert_array_equal(ws.fetch_blob("Y"), np.ones(2, np.float32))
    ws.feed_blob("I", np.asarray(np.float32(2)))
    with pytest.raises(FrameworkError, match="must be integers"):
        op.run()
