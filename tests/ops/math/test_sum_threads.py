"""Sum (and Max/Min, which share its fast path) split into flat ranges over two intra-op threads: the same
values as one thread, bit for bit, and numpy's; in place and not; no per-run allocation."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.proto.framework_pb2 import NetDef
from tests.ops.threaded import assert_same, run_threads

_NP = {"Sum": np.add, "Max": np.maximum, "Min": np.minimum}


@settings(max_examples=10, deadline=None)
@given(
    op=st.sampled_from(sorted(_NP)),
    shape=st.lists(st.integers(1, 7), min_size=1, max_size=3),
    k=st.integers(1, 4),
    in_place=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_split_equals_one_thread_and_numpy(op, shape, k, in_place, seed):
    rng = np.random.default_rng(seed)
    xs = {f"x{i}": rng.standard_normal(shape).astype(np.float32) for i in range(k)}
    out = "x0" if in_place else "y"
    net = NetDef(name="sum_threads", external_input=list(xs))
    net.op.extend([CreateOperator(op, list(xs), [out])])
    results, tasks, allocs = run_threads(net, xs, [out], runs=2, min_work=1)
    assert allocs == 0
    assert tasks > 0 or int(np.prod(shape)) == 1
    assert_same(results)
    want = xs["x0"]
    for i in range(1, k):
        want = _NP[op](want, xs[f"x{i}"])
    if in_place and k > 1:  # two runs in place: the second adds the others again
        for i in range(1, k):
            want = _NP[op](want, xs[f"x{i}"])
    np.testing.assert_array_equal(results[2][out], want)


@pytest.mark.parametrize("size, split", [(64 * 32 * 32 * 8, True), (1000, False)])
def test_default_threshold(size, split):
    rng = np.random.default_rng(0)
    xs = {"a": rng.standard_normal(size).astype(np.float32), "b": rng.standard_normal(size).astype(np.float32)}
    net = NetDef(name="sum_threads", external_input=["a", "b"])
    net.op.extend([CreateOperator("Sum", ["a", "b"], ["y"])])
    results, tasks, _ = run_threads(net, xs, ["y"])
    assert (tasks > 0) == split
    assert_same(results)
