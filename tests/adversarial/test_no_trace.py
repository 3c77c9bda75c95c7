"""A failed op leaves no trace; bad input gets a named FrameworkError; allocations are bounded.

The shared machinery behind the matrix, checked on purpose-picked cases: declared input checks,
the output journal and its rollback, in-place optimizer state, the allocation limit, the
ResizeNearestGradient crash, Caffe2's RunNet semantics (ops that already ran stay run).
"""

from __future__ import annotations

import numpy as np
import pytest

from framework import core
from framework.errors import (
    ArgumentError,
    FrameworkError,
    OperatorError,
    ResourceLimitError,
    ShapeError,
    TypeMismatchError,
)
from framework.memory import allocation_limit, set_allocation_limit
from framework.memory.workspace import Workspace


def _cause(e: BaseException) -> BaseException:
    return e.__cause__ if isinstance(e, OperatorError) and e.__cause__ is not None else e


def test_declared_input_type_check_names_op_blob_expected_and_found():
    ws = Workspace()
    ws.feed_blob("dY", np.arange(6, dtype=np.int64).reshape(2, 3))
    ws.feed_blob("X", np.ones((2, 3), np.float32))
    op = core.CreateOperator("CosGradient", ["X", "dY"], ["dX"])
    with pytest.raises(FrameworkError) as ei:
        ws.run_operator_once(op)
    cause = _cause(ei.value)
    assert isinstance(cause, TypeMismatchError)
    assert "CosGradient" in str(cause) and "'dY'" in str(cause) and "floats" in str(cause) and "int64" in str(cause)
    assert not ws.has_blob("dX")


def test_gradient_with_a_dy_of_the_wrong_shape_is_a_shape_error_not_a_numpy_error():
    ws = Workspace()
    ws.feed_blob("dY", np.ones((5,), np.float32))
    ws.feed_blob("X", np.ones((2, 3), np.float32))
    ws.feed_blob("Y", np.ones((2,), np.float32))
    op = core.CreateOperator("ReduceSumGradient", ["dY", "X", "Y"], ["dX"], axes=[1])
    with pytest.raises(FrameworkError) as ei:
        ws.run_operator_once(op)
    cause = _cause(ei.value)
    assert isinstance(cause, ShapeError) and "'dY'" in str(cause) and "2 elements" in str(cause)


def test_a_failed_op_leaves_an_existing_output_untouched():
    ws = Workspace()
    ws.feed_blob("X", np.ones((2, 3), np.float32))
    ws.feed_blob("dY", np.ones((7,), np.float32))  # wrong: Y has 2 elements
    ws.feed_blob("Y", np.ones((2,), np.float32))
    ws.feed_blob("dX", np.full((4,), 9.0, np.float32))  # an output with data of its own
    before = ws.fetch_blob("dX").copy()
    op = core.CreateOperator("ReduceMaxGradient", ["dY", "X", "Y"], ["dX"], axes=[1])
    with pytest.raises(FrameworkError):
        ws.run_operator_once(op)
    np.testing.assert_array_equal(ws.fetch_blob("dX"), before)


def test_output_journal_rolls_back_a_resized_output_when_a_later_output_fails():
    # LayerNorm sizes mean and std, then Y; a gamma of the wrong size fails after validation of X.
    ws = Workspace()
    ws.feed_blob("X", np.ones((2, 3), np.float32))
    ws.feed_blob("gamma", np.ones((5,), np.float32))
    ws.feed_blob("beta", np.ones((3,), np.float32))
    for name in ("Y", "mean", "std"):
        ws.feed_blob(name, np.full((1,), 4.0, np.float32))
    op = core.CreateOperator("LayerNorm", ["X", "gamma", "beta"], ["Y", "mean", "std"], elementwise_affine=1)
    with pytest.raises(FrameworkError):
        ws.run_operator_once(op)
    for name in ("Y", "mean", "std"):
        np.testing.assert_array_equal(ws.fetch_blob(name), [4.0])


def test_sparse_adagrad_with_a_bad_learning_rate_leaves_param_and_moment_untouched():
    ws = Workspace()
    p = np.arange(12, dtype=np.float32).reshape(4, 3)
    h = np.ones((4, 3), np.float32)
    ws.feed_blob("p", p)
    ws.feed_blob("h", h)
    ws.feed_blob("idx", np.array([1, 3], np.int64))
    ws.feed_blob("g", np.ones((2, 3), np.float32))
    ws.feed_blob("lr", np.array([b"fast"], dtype=object))
    op = core.CreateOperator("SparseAdagrad", ["p", "h", "idx", "g", "lr"], ["p", "h"], epsilon=1e-5)
    with pytest.raises(FrameworkError) as ei:
        ws.run_operator_once(op)
    assert isinstance(_cause(ei.value), TypeMismatchError)
    np.testing.assert_array_equal(ws.fetch_blob("p"), p)
    np.testing.assert_array_equal(ws.fetch_blob("h"), h)


def test_sparse_adagrad_with_out_of_range_indices_leaves_state_untouched():
    ws = Workspace()
    p = np.arange(12, dtype=np.float32).reshape(4, 3)
    ws.feed_blob("p", p)
    ws.feed_blob("h", np.ones((4, 3), np.float32))
    ws.feed_blob("idx", np.array([1, 4], np.int64))
    ws.feed_blob("g", np.ones((2, 3), np.float32))
    ws.feed_blob("lr", np.array([0.1], np.float32))
    op = core.CreateOperator("SparseAdagrad", ["p", "h", "idx", "g", "lr"], ["p", "h"])
    with pytest.raises(FrameworkError, match="out of range"):
        ws.run_operator_once(op)
    np.testing.assert_array_equal(ws.fetch_blob("p"), p)


def test_resize_nearest_gradient_with_a_rank_5_gradient_is_an_error_not_a_crash():
    ws = Workspace()
    ws.feed_blob("dY", np.ones((1, 2, 1, 2, 3), np.float32))
    ws.feed_blob("X", np.ones((1, 2, 3, 3), np.float32))
    op = core.CreateOperator("ResizeNearestGradient", ["dY", "X"], ["dX"], width_scale=2.0, height_scale=2.0)
    with pytest.raises(FrameworkError) as ei:
        ws.run_operator_once(op)
    assert isinstance(_cause(ei.value), ShapeError) and "4-d" in str(ei.value)


def test_huge_shape_arguments_hit_the_allocation_limit_before_any_memory_is_touched():
    ws = Workspace()
    op = core.CreateOperator("ConstantFill", [], ["Y"], shape=[10**6, 10**6], value=1.0)
    with pytest.raises(FrameworkError) as ei:
        ws.run_operator_once(op)
    cause = _cause(ei.value)
    assert isinstance(cause, ResourceLimitError) and isinstance(cause, MemoryError)
    assert "allocation limit" in str(cause) and "'Y'" in str(cause)
    assert not ws.has_blob("Y")


def test_the_allocation_limit_is_settable_and_restorable(small_allocation_limit):
    assert allocation_limit() == small_allocation_limit
    old = set_allocation_limit(1024)
    try:
        ws = Workspace()
        with pytest.raises(FrameworkError, match="allocation limit"):
            ws.run_operator_once(core.CreateOperator("ConstantFill", [], ["Y"], shape=[1000], value=1.0))
        ws.run_operator_once(core.CreateOperator("ConstantFill", [], ["Y"], shape=[100], value=1.0))
        assert ws.fetch_blob("Y").shape == (100,)
    finally:
        set_allocation_limit(old)
    assert set_allocation_limit(None) == old
    assert allocation_limit() > 1 << 28  # the default: a fraction of the physical memory


def test_non_utf8_string_argument_is_an_argument_error():
    ws = Workspace()
    ws.feed_blob("X", np.ones((2, 3), np.float32))
    op = core.CreateOperator("ChannelShuffle", ["X"], ["Y"])
    a = op.arg.add()
    a.name = "order"
    a.s = b"\xff\xfeNCHW"
    with pytest.raises(ArgumentError, match="not valid UTF-8"):
        ws.run_operator_once(op)


def test_run_net_keeps_caffe2_semantics_ops_that_ran_stay_run_the_failed_one_leaves_no_trace():
    ws = Workspace()
    ws.feed_blob("X", np.ones((2, 3), np.float32))
    ws.feed_blob("dY", np.ones((7,), np.float32))
    ws.feed_blob("Y", np.ones((2,), np.float32))
    ws.feed_blob("dX", np.full((4,), 9.0, np.float32))
    net = core.Net("n")
    net.Relu(["X"], ["R"])
    net.ReduceMaxGradient(["dY", "X", "Y"], ["dX"], axes=[1])
    ws.create_net(net)
    with pytest.raises(OperatorError) as ei:
        ws.run_net(net.Name())  # core.Net uniquifies "n" when another test made one
    assert "already ran stay run" in str(ei.value)
    np.testing.assert_array_equal(ws.fetch_blob("R"), np.ones((2, 3), np.float32))  # ran, stays
    np.testing.assert_array_equal(ws.fetch_blob("dX"), np.full((4,), 9.0, np.float32))  # failed: untouched
