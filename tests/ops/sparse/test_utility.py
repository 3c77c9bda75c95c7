"""Utility ops of the sparse family against Python references."""

import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.errors import FrameworkError
from framework.memory.workspace import Workspace
from framework.ops import create_operator, get_gradient_for_op
from framework.ops.testing import assert_reference_checks, run_op_on


@settings(max_examples=30, deadline=None)
@given(st.integers(-5, 5), st.integers(-5, 10), st.sampled_from([-2, -1, 1, 3]), st.integers(1, 3))
def test_range(start, stop, step, n_inputs):
    vals = {1: [stop], 2: [start, stop], 3: [start, stop, step]}[n_inputs]
    ref = list(range(*vals))
    out = run_op_on(
        CreateOperator("Range", [f"i{k}" for k in range(n_inputs)], ["y"]), [np.array(v, np.int32) for v in vals]
    )[0]
    assert out.tolist() == ref and out.dtype == np.int32


def test_range_step_zero_is_caffe2s_enforce():
    zero = [np.array(v, np.int32) for v in (0, 10, 0)]
    with pytest.raises(FrameworkError, match=r"Step size cannot be 0\."):
        run_op_on(CreateOperator("Range", ["a", "b", "c"], ["y"]), zero)


def test_small_utilities():
    assert run_op_on(CreateOperator("SumInt", ["x"], ["y"]), [np.array([1, 2, 3], np.int32)])[0] == 6
    assert run_op_on(
        CreateOperator("HasElements", ["a", "b"], ["y"]), [np.zeros(0, np.float32), np.zeros(2, np.float32)]
    )[0]
    assert not run_op_on(CreateOperator("HasElements", ["a"], ["y"]), [np.zeros((0, 3), np.float32)])[0]
    np.testing.assert_array_equal(
        run_op_on(CreateOperator("IsNaN", ["x"], ["y"]), [np.array([1.0, np.nan], np.float32)])[0], [False, True]
    )
    before = time.time_ns()
    t = run_op_on(CreateOperator("WallClockTime", [], ["t"]), [])[0]
    assert before <= int(t) <= time.time_ns()
    x = np.array([1.0, 2.0], np.float32)
    np.testing.assert_array_equal(run_op_on(CreateOperator("NanCheck", ["x"], ["y"]), [x])[0], x)
    with pytest.raises(FrameworkError, match="NanCheck.*inf"):
        run_op_on(CreateOperator("NanCheck", ["x"], ["y"]), [np.array([1.0, np.inf], np.float32)])
    ops, _ = get_gradient_for_op(CreateOperator("NanCheck", ["x"], ["y"]), ["dy"])
    assert [(o.type, list(o.input), list(o.output)) for o in ops] == [("NanCheck", ["dy"], ["x_grad"])]


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(0, 5), max_size=6), st.lists(st.integers(0, 7), max_size=6))
def test_find_takes_the_last_occurrence(index, query):
    index, query = np.array(index, np.int64), np.array(query, np.int64)
    ref = [max((i for i, v in enumerate(index) if v == q), default=-3) for q in query]
    assert_reference_checks(
        CreateOperator("Find", ["i", "q"], ["y"], missing_value=-3), [index, query], lambda *_: np.array(ref, np.int64)
    )


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(0, 4), max_size=8))
def test_find_duplicate_elements(values):
    ref = [i for i, v in enumerate(values) if v in values[:i]]
    assert_reference_checks(
        CreateOperator("FindDuplicateElements", ["x"], ["y"]),
        [np.array(values, np.int32)],
        lambda _: np.array(ref, np.int64),
        check_inference=False,
    )


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 4), st.integers(1, 4), st.data())
def test_dense_vector_to_id_list(n, d, data):
    x = np.array(
        data.draw(st.lists(st.sampled_from([0.0, 0.0, 1.5, -2.0]), min_size=n * d, max_size=n * d)), np.float32
    ).reshape(n, d)
    lengths = [sum(1 for v in row if v != 0) for row in x]
    ids = [j for row in x for j, v in enumerate(row) if v != 0]
    assert_reference_checks(
        CreateOperator("DenseVectorToIdList", ["x"], ["l", "v"]),
        [x],
        lambda _: [np.array(lengths, np.int32), np.array(ids, np.int64)],
        check_inference=False,
    )


def test_accumulate_histogram_over_runs():
    ws = Workspace()
    op = create_operator(
        CreateOperator("AccumulateHistogram", ["x"], ["cur", "acc"], lower_bound=0.0, upper_bound=1.0, num_buckets=4),
        ws,
    )
    ws.feed_blob("x", np.array([-1.0, 0.0, 0.3, 0.99, 1.0, 5.0], np.float32))
    op.run()
    np.testing.assert_array_equal(ws.fetch_blob("cur"), [1, 1, 1, 0, 1, 2])
    ws.feed_blob("x", np.array([0.6], np.float32))
    op.run()
    np.testing.assert_array_equal(ws.fetch_blob("cur"), [0, 0, 0, 1, 0, 0])
    np.testing.assert_array_equal(ws.fetch_blob("acc"), [1, 1, 1, 1, 1, 2])


@pytest.mark.parametrize(
    "op_type, kw",
    [
        ("Fail", {}),
        ("LogFatal", {}),
        ("ThrowException", {"message": "boom"}),
        ("ThrowChildThreadException", {"message": "boom"}),
    ],
)
def test_failing_ops_raise_named_errors(op_type, kw):
    with pytest.raises(FrameworkError, match=op_type):
        run_op_on(CreateOperator(op_type, [], [], **kw), [])


def test_nan_check_gradient_passes_the_gradient_through():
    from framework.ops.testing import assert_gradient_checks

    assert_gradient_checks(CreateOperator("NanCheck", ["x"], ["y"]), [np.array([0.5, -1.0, 2.0], np.float32)], 0)


@settings(max_examples=20, deadline=None)
@given(st.integers(1, 3), st.integers(1, 3), st.integers(1, 7), st.data())
def test_sinusoid_position_encoding(m, k, e, data):
    import math

    pos = np.array(data.draw(st.lists(st.integers(0, 50), min_size=m * k, max_size=m * k)), np.int32).reshape(m, k)
    ref = np.zeros((m, k, e), np.float32)
    for i in range(m):
        for d in range(e):
            a = pos[i, 0] / 100.0 ** (d / e)
            ref[i, :, d] = 2.0 * (math.sin(a) if d % 2 == 0 else math.cos(a))
    op = CreateOperator("SinusoidPositionEncoding", ["p"], ["y"], embedding_size=e, alpha=100.0, amplitude=2.0)
    assert_reference_checks(op, [pos], lambda _: ref, threshold=1e-4, atol=1e-4)
