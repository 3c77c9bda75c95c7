"""SortedSegmentRange{Sum,Mean,Max,LogSumExp,LogMeanExp}: loop references, central-difference gradients,
Caffe2's gradient op, bad segment ids."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.errors import FrameworkError
from framework.ops import get_gradient_for_op
from framework.ops.testing import assert_gradient_checks, assert_reference_checks, run_op_on

REDUCERS = ["Sum", "Mean", "Max", "LogSumExp", "LogMeanExp"]


def reference(reducer, x, seg):
    k = int(seg[-1]) + 1 if len(seg) else 0
    out = np.zeros((k, *x.shape[1:]), np.float64)
    for s in range(k):
        rows = x[seg == s].astype(np.float64)
        flat = rows.reshape(len(rows), -1)
        res = []
        for col in flat.T:
            if reducer == "Sum":
                res.append(sum(col))
            elif reducer == "Mean":
                res.append(sum(col) / len(col))
            elif reducer == "Max":
                res.append(max(col))
            else:
                m = max(col)
                t = sum(math.exp(v - m) for v in col)
                res.append(math.log(t / (len(col) if reducer == "LogMeanExp" else 1)) + m)
        out[s] = np.array(res).reshape(x.shape[1:])
    return out.astype(x.dtype)


@st.composite
def cases(draw):
    counts = draw(st.lists(st.integers(1, 4), min_size=0, max_size=4))
    seg = np.repeat(np.arange(len(counts)), counts).astype(draw(st.sampled_from([np.int32, np.int64])))
    trailing = tuple(draw(st.lists(st.integers(1, 3), max_size=2)))
    x = draw(
        st.lists(
            st.floats(-3, 3, width=32),
            min_size=len(seg) * int(np.prod(trailing, dtype=int)),
            max_size=len(seg) * int(np.prod(trailing, dtype=int)),
        )
    )
    return np.array(x, np.float32).reshape((len(seg), *trailing)), seg


@pytest.mark.parametrize("reducer", REDUCERS)
@settings(max_examples=25, deadline=None)
@given(case=cases())
def test_forward_against_loops(reducer, case):
    x, seg = case
    op = CreateOperator(f"SortedSegmentRange{reducer}", ["x", "s"], ["y"])
    assert_reference_checks(op, [x, seg], lambda *_: reference(reducer, x, seg), atol=1e-4, check_inference=False)
    assert run_op_on(op, [x, seg])[0].dtype == np.float32


@pytest.mark.parametrize("reducer", REDUCERS)
def test_gradient(reducer):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((6, 2)).astype(np.float32)
    seg = np.array([0, 0, 1, 2, 2, 2], np.int32)
    op = CreateOperator(f"SortedSegmentRange{reducer}", ["x", "s"], ["y"])
    assert_gradient_checks(op, [x, seg], 0, threshold=1e-3)
    ops, _ = get_gradient_for_op(op, ["y_grad"])
    assert [(o.type, list(o.input)) for o in ops] == [
        (f"SortedSegmentRange{reducer}Gradient", ["x", "y", "y_grad", "s"])
    ]


def test_max_ties_all_get_the_gradient():
    """Caffe2's MaxRangeReducerGradient: every entry equal to the max gets dY."""
    from framework.memory.workspace import Workspace
    from framework.ops import create_operator

    ws = Workspace()
    ws.feed_blob("x", np.array([1.0, 3.0, 3.0], np.float32))
    ws.feed_blob("y", np.array([3.0], np.float32))
    ws.feed_blob("dy", np.array([2.0], np.float32))
    ws.feed_blob("s", np.array([0, 0, 0], np.int32))
    create_operator(CreateOperator("SortedSegmentRangeMaxGradient", ["x", "y", "dy", "s"], ["dx"]), ws).run()
    np.testing.assert_array_equal(ws.fetch_blob("dx"), [0.0, 2.0, 2.0])


@pytest.mark.parametrize("seg", [[1, 1], [0, 2], [0, 1, 0]])
def test_gaps_unsorted_or_not_starting_at_zero_are_errors(seg):
    op = CreateOperator("SortedSegmentRangeSum", ["x", "s"], ["y"])
    with pytest.raises(FrameworkError, match="SortedSegmentRangeSum.*no gaps"):
        run_op_on(op, [np.ones(len(seg), np.float32), np.array(seg, np.int32)])


def test_the_family_is_complete():
    from framework.ops import all_schemas

    names = {s.type for s in all_schemas() if s.operator_class.__module__.endswith("segment_range")}
    assert names == {
        "SortedSegmentRangeSum",
        "SortedSegmentRangeMean",
        "SortedSegmentRangeMax",
        "SortedSegmentRangeLogSumExp",
        "SortedSegmentRangeLogMeanExp",
        "SortedSegmentRangeSumGradient",
        "SortedSegmentRangeMeanGradient",
        "SortedSegmentRangeMaxGradient",
        "SortedSegmentRangeLogSumExpGradient",
        "SortedSegmentRangeLogMeanExpGradient",
        "LengthsMax",
        "LengthsMaxWithMainInputAndForwardOutputGradient",
    }


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(0, 3), max_size=4), st.data())
def test_lengths_max_and_gradient(lengths, data):
    lengths = np.array(lengths, np.int32)
    n = int(lengths.sum())
    x = np.array(data.draw(st.lists(st.integers(-3, 3), min_size=2 * n, max_size=2 * n)), np.float32).reshape(n, 2)
    ref = np.zeros((len(lengths), 2), np.float32)
    start = 0
    for i, m in enumerate(lengths):
        if m:
            ref[i] = x[start : start + m].max(axis=0)
        start += m
    op = CreateOperator("LengthsMax", ["x", "l"], ["y"])
    assert_reference_checks(op, [x, lengths], lambda *_: ref)


def test_lengths_max_gradient_numerically():
    x = np.array([[0.1, 2.0], [1.5, -1.0], [0.3, 0.7], [-2.0, 4.0]], np.float32)  # no ties
    op = CreateOperator("LengthsMax", ["x", "l"], ["y"])
    assert_gradient_checks(op, [x, np.array([2, 0, 2], np.int32)], 0)
