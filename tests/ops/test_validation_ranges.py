"""framework.ops.validation's ``expect_in_range`` and ``expect_axis`` (the checks of ops' helpers that know only
a ``where``): hypothesis against the definitions written out, and the wording ops' errors rely on; then ops
that moved onto them still refuse bad values with the op and the value named, leaving outputs untouched."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.errors import ArgumentError, FrameworkError, ShapeError
from framework.memory.workspace import Workspace
from framework.ops.validation import expect_axis, expect_in_range


@given(st.integers(-6, 6), st.integers(-3, 2), st.integers(-1, 5), st.booleans())
def test_expect_in_range_is_the_interval_written_out(value, low, high, inclusive):
    inside = low <= value < high or (inclusive and value == high)
    if inside:
        assert expect_in_range("op Fake", "index", value, low, high, inclusive=inclusive) == value
    else:
        close = "]" if inclusive else ")"
        with pytest.raises(ShapeError, match=rf"^op Fake: index {value} is out of range \[{low}, {high}\{close}$"):
            expect_in_range("op Fake", "index", value, low, high, inclusive=inclusive)


def test_expect_in_range_names_what_it_is_for_and_raises_the_error_asked():
    with pytest.raises(ArgumentError, match=r"op Fake: blob index 3 is out of range \[0, 2\) for records of 2 blobs"):
        expect_in_range("op Fake", "blob index", 3, 0, 2, of="records of 2 blobs", error=ArgumentError)


@given(st.integers(-8, 8), st.integers(0, 5), st.booleans())
def test_expect_axis_is_the_python_index_rule(axis, ndim, allow_end):
    rank = ndim + allow_end
    if -rank <= axis < rank:
        got = expect_axis("op Fake", axis, ndim, allow_end=allow_end)
        assert got == list(range(rank))[axis]
    else:
        with pytest.raises(ShapeError, match=rf"op Fake: axis {axis} is out of range for a {ndim}-D input"):
            expect_axis("op Fake", axis, ndim, allow_end=allow_end)


def test_expect_axis_names_the_argument_and_the_blob():
    with pytest.raises(ShapeError, match=r"op Fake: dim 3 is out of range for X \[2, 2\] \(expected -2 <= dim < 2\)"):
        expect_axis("op Fake", 3, 2, name="dim", of="X [2, 2]")


def _refused(ws, op, error, pattern):
    before = {b: ws.fetch_blob(b).copy() for b in op.output if ws.has_blob(b)}
    with pytest.raises(FrameworkError, match=pattern) as info:
        ws.run_operator_once(op)
    assert isinstance(info.value.__cause__, error)  # the op's own error, wrapped with its context
    for b, v in before.items():
        np.testing.assert_array_equal(ws.fetch_blob(b), v)


@pytest.mark.parametrize(
    "op_type, args, error, pattern",
    [
        ("TopK", dict(k=1, axis=2), ShapeError, r"TopK.*axis 2 is out of range \[0, 2\) for a 2-D input"),
        ("ReduceSum", dict(axes=[-3]), ShapeError, r"ReduceSum.*axis -3 is out of range for a 2-D input"),
        ("ReduceFrontSum", dict(num_reduce_dim=3), ShapeError, r"num_reduce_dim 3 is out of range \[0, 2\]"),
    ],
)
def test_ops_on_the_shared_range_checks_name_the_value_and_the_bound(op_type, args, error, pattern):
    ws = Workspace()
    ws.feed_blob("x", np.arange(6, dtype=np.float32).reshape(2, 3))
    ws.feed_blob("y", np.full((2, 3), 7, np.float32))
    outs = ["y", "i"] if op_type == "TopK" else ["y"]
    _refused(ws, CreateOperator(op_type, ["x"], outs, **args), error, pattern)


def test_indices_out_of_range_name_the_blob_and_what_they_index():
    ws = Workspace()
    ws.feed_blob("idx", np.array([0, 3], dtype=np.int64))
    ws.feed_blob("n", np.array([3], dtype=np.int64))
    ws.feed_blob("out", np.zeros((2, 3), np.float32))
    pattern = r"input 0 \('idx'\) holds index 3, out of range \[0, 3\) \(3 columns \(INDEX_SIZE\)\)"
    _refused(ws, CreateOperator("OneHot", ["idx", "n"], ["out"]), ShapeError, pattern)


def test_a_label_out_of_range_names_the_blob_the_label_and_the_classes():
    ws = Workspace()
    ws.feed_blob("p", np.full((2, 4), 0.25, np.float32))
    ws.feed_blob("L", np.array([1, 7], dtype=np.int32))
    ws.feed_blob("acc", np.zeros((), np.float32))
    pattern = r"Accuracy.*input 1 \('L'\) holds index 7, out of range \[0, 4\) \(labels of 4 classes\)"
    _refused(ws, CreateOperator("Accuracy", ["p", "L"], ["acc"]), ShapeError, pattern)


def test_a_broadcast_axis_out_of_range_names_both_shapes():
    ws = Workspace()
    ws.feed_blob("a", np.zeros((2, 3), np.float32))
    ws.feed_blob("b", np.zeros((3,), np.float32))
    pattern = r"broadcast axis 2 is out of range \[0, 1\] for A \[2, 3\] and B \[3\]"
    _refused(ws, CreateOperator("Add", ["a", "b"], ["c"], broadcast=1, axis=2), ShapeError, pattern)


def _tree(**changes):
    # one tree: x0 <= 0.5 ? leaf 0 : leaf 1
    kw = dict(
        nodes_featureids=[0],
        nodes_modes=[0],
        nodes_truenodeids=[0],
        nodes_trueleafs=[1],
        nodes_falsenodeids=[1],
        nodes_falseleafs=[1],
        leaf_targetids=[0, 0],
        tree_roots=[0],
        n_targets=1,
        aggregate_function=1,
    )
    kw.update(changes)
    return CreateOperator("ONNXTreeEnsemble", ["X", "splits", "weights"], ["Y"], **kw)


@pytest.mark.parametrize(
    "changes, pattern",
    [
        ({}, None),
        (dict(nodes_featureids=[2]), r"feature id 2 is out of range \[0, 2\) for 2 features"),
        (dict(leaf_targetids=[0, 1]), r"target id 1 is out of range \[0, 1\) for n_targets"),
        (dict(tree_roots=[1]), r"tree root 1 is out of range \[0, 1\) for 1 nodes"),
        (dict(nodes_falsenodeids=[5]), r"leaf id 5 is out of range \[0, 2\) for 2 leaves"),
        (dict(nodes_falsenodeids=[-1]), r"node or leaf id -1 is negative"),
    ],
)
def test_tree_ensemble_ids_out_of_range_name_the_id_and_its_bound(changes, pattern):
    ws = Workspace()
    ws.feed_blob("X", np.array([[0.0, 0.0], [1.0, 0.0]]))
    ws.feed_blob("splits", np.array([0.5]))
    ws.feed_blob("weights", np.array([10.0, 20.0]))
    ws.feed_blob("Y", np.full((2, 1), -1.0))
    if pattern is None:  # the tree as given: each row reaches its leaf
        ws.run_operator_once(_tree())
        np.testing.assert_array_equal(ws.fetch_blob("Y"), [[10.0], [20.0]])
        return
    _refused(ws, _tree(**changes), ArgumentError, pattern)
