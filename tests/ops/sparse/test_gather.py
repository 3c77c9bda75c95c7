"""BatchGather (+ gradient), GatherRanges, GatherRangesToDense, LengthsGather against loop references."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.errors import FrameworkError
from framework.memory.workspace import Workspace
from framework.ops import create_operator
from framework.ops.testing import assert_gradient_checks, assert_reference_checks, run_op_on


@settings(max_examples=30, deadline=None)
@given(
    b=st.integers(0, 3),
    n=st.integers(1, 4),
    tail=st.lists(st.integers(1, 2), max_size=2),
    idx_shape=st.lists(st.integers(0, 3), max_size=2),
    data=st.data(),
)
def test_batch_gather(b, n, tail, idx_shape, data):
    x = np.arange(b * n * int(np.prod(tail, dtype=int)), dtype=np.float32).reshape((b, n, *tail))
    idx = np.array(
        data.draw(
            st.lists(
                st.integers(0, n - 1),
                min_size=int(np.prod(idx_shape, dtype=int)),
                max_size=int(np.prod(idx_shape, dtype=int)),
            )
        ),
        np.int64,
    ).reshape(idx_shape)

    def ref(x, idx):
        out = np.zeros((b, *idx.shape, *tail), np.float32)
        for i in range(b):
            for j, k in np.ndenumerate(idx):
                out[(i, *j)] = x[i, k]
        return out

    assert_reference_checks(CreateOperator("BatchGather", ["x", "i"], ["y"]), [x, idx], ref)


def test_batch_gather_gradient_adds_repeated_indices():
    x = np.random.default_rng(0).standard_normal((2, 4, 3)).astype(np.float32)
    idx = np.array([[3, 0], [3, 3]], np.int32)
    assert_gradient_checks(CreateOperator("BatchGather", ["x", "i"], ["y"]), [x, idx], 0)


@settings(max_examples=30, deadline=None)
@given(
    b=st.integers(0, 3),
    n=st.integers(1, 4),
    tail=st.lists(st.integers(1, 2), max_size=2),
    inner=st.lists(st.integers(0, 3), max_size=2),
    seed=st.integers(0, 2**16),
)
def test_batch_gather_match_outer(b, n, tail, inner, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((b, n, *tail))
    idx = rng.integers(0, n, (b, *inner)).astype(np.int32)

    def ref(x, idx):
        out = np.zeros((b, *inner, *tail))
        for i in range(b):
            for j in np.ndindex(*inner):
                out[(i, *j)] = x[i, idx[(i, *j)]]
        return out

    op = CreateOperator("BatchGather", ["x", "i"], ["y"], match_outer=True)
    assert_reference_checks(op, [x, idx], ref)
    if x.size:
        assert_gradient_checks(op, [x, idx], 0)


def test_batch_gather_match_outer_needs_the_batch_dim():
    op = CreateOperator("BatchGather", ["x", "i"], ["y"], match_outer=True)
    with pytest.raises(FrameworkError, match="BatchGather.*match_outer.*'i'"):
        run_op_on(op, [np.zeros((2, 3), np.float32), np.zeros((3, 1), np.int32)])


def ref_gather_ranges(data, ranges):
    out, lengths = [], []
    for ex in ranges:
        total = 0
        for start, n in ex:
            out.extend(data[start : start + n])
            total += n
        lengths.append(total)
    return np.array(out, data.dtype), np.array(lengths, np.int32)


@st.composite
def range_cases(draw, m=None):
    data = np.array(draw(st.lists(st.integers(-9, 9), min_size=0, max_size=10)), np.float32)
    n = draw(st.integers(0, 3))
    m = m or draw(st.integers(1, 3))
    r = []
    for _ in range(n * m):
        start = draw(st.integers(0, len(data)))
        r.append([start, draw(st.integers(0, len(data) - start))])
    return data, np.array(r, np.int32).reshape(n, m, 2)


@settings(max_examples=40, deadline=None)
@given(range_cases())
def test_gather_ranges(case):
    data, ranges = case
    op = CreateOperator("GatherRanges", ["d", "r"], ["o", "l"])
    assert_reference_checks(op, [data, ranges], ref_gather_ranges, check_inference=False)


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_gather_ranges_to_dense(data):
    lengths = data.draw(st.lists(st.integers(1, 3), min_size=1, max_size=3))
    n = data.draw(st.integers(0, 4))
    values = np.arange(20, dtype=np.float32) * 1.5
    key = np.array(data.draw(st.permutations(range(20))), np.int64)
    r = np.zeros((n, len(lengths), 2), np.int64)
    for i in range(n):
        for j, w in enumerate(lengths):
            length = data.draw(st.sampled_from([0, w, w + 1]))
            r[i, j] = [data.draw(st.integers(0, 20 - length)), length]
    use_key = data.draw(st.booleans())

    def ref(d, r, *k):
        outs = []
        for j, w in enumerate(lengths):
            o = np.zeros((n, w), np.float32)
            for i in range(n):
                s, length = r[i, j]
                if length == w:
                    items = list(range(s, s + w))
                    if k:
                        items.sort(key=lambda p: k[0][p])
                    o[i] = d[items]
            outs.append(o)
        return outs

    outs = [f"o{j}" for j in range(len(lengths))]
    ins = ["d", "r"] + (["k"] if use_key else [])
    op = CreateOperator("GatherRangesToDense", ins, outs, lengths=lengths, max_mismatched_ratio=1.0)
    assert_reference_checks(op, [values, r] + ([key] if use_key else []), ref)


def test_gather_ranges_to_dense_mismatch_ratio_is_checked():
    op = CreateOperator(
        "GatherRangesToDense", ["d", "r"], ["o"], lengths=[2], min_observation=1, max_mismatched_ratio=0.4
    )
    ws = Workspace()
    ws.feed_blob("d", np.arange(6, dtype=np.float32))
    ws.feed_blob("r", np.array([[[0, 2]], [[2, 3]]], np.int32))  # 1 of 2 mismatched: 0.5 > 0.4
    with pytest.raises(FrameworkError, match="GatherRangesToDense.*length mismatch"):
        create_operator(op, ws).run()
    assert ws.get_blob("o")._obj is None  # the failed op wrote nothing


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_lengths_gather(data):
    lengths = np.array(data.draw(st.lists(st.integers(0, 3), max_size=5)), np.int32)
    items = np.arange(int(lengths.sum()) * 2, dtype=np.int64).reshape(-1, 2)
    idx = np.array(
        data.draw(st.lists(st.integers(0, max(len(lengths) - 1, 0)), max_size=4 if len(lengths) else 0)), np.int32
    )

    def ref(items, lengths, idx):
        starts = [sum(lengths[:i]) for i in range(len(lengths))]
        rows = [items[starts[i] + j] for i in idx for j in range(lengths[i])]
        return np.array(rows, items.dtype).reshape(-1, 2)

    assert_reference_checks(
        CreateOperator("LengthsGather", ["x", "l", "i"], ["y"]), [items, lengths, idx], ref, check_inference=False
    )


@pytest.mark.parametrize(
    "op_type, inputs, message",
    [
        ("BatchGather", [np.ones((2, 3), np.float32), np.array([3])], "index 3"),
        ("BatchGather", [np.ones(3, np.float32), np.array([0])], "at least 2-D"),
        ("GatherRanges", [np.ones(3, np.float32), np.array([[[2, 2]]], np.int32)], "outside DATA"),
        ("LengthsGather", [np.ones(3, np.float32), np.array([1, 2], np.int32), np.array([2])], "index 2"),
    ],
)
def test_bad_input_is_a_named_error(op_type, inputs, message):
    names = [f"in{i}" for i in range(len(inputs))]
    outs = ["o", "l"] if op_type == "GatherRanges" else ["o"]
    with pytest.raises(FrameworkError, match=f"{op_type}.*{message}"):
        run_op_on(CreateOperator(op_type, names, outs), inputs)
