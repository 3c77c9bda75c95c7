"""Bad input to the sparse, quantized and sparse-optimizer ops is rejected ON PURPOSE, by checks the ops
declare (schema input_types/ranks/same_type) or make at the top of run(), before computing: the error is
the right FrameworkError subclass, names the op and the blob with what was expected and found, and is not
a raw numpy/Python error converted after the fact (no wrapper turning a TypeError into a ShapeError)."""

import numpy as np
import pytest

from framework.core import CreateOperator
from framework.errors import FrameworkError, ShapeError, TypeMismatchError
from framework.memory.workspace import Workspace
from framework.ops import all_schemas, create_operator, get_schema

FAMILIES = ("framework.ops.sparse.", "framework.ops.quantized.", "framework.ops.training.sparse_")
F32, I32, I64 = np.float32, np.int32, np.int64


def _scalar(v, dt):
    return np.asarray(v, dt).reshape(())


def _run(op_type, inputs, outputs, **args):
    ws = Workspace()
    for name, value in inputs:
        ws.feed_blob(name, value)
    op = create_operator(CreateOperator(op_type, [n for n, _ in inputs], outputs, **args), ws)
    op.run()
    return ws, op


def test_no_family_op_runs_behind_an_error_converting_wrapper():
    ops = [s for s in all_schemas() if s.operator_class.__module__.startswith(FAMILIES)]
    assert len(ops) > 200
    for s in ops:
        for cls in s.operator_class.__mro__:
            assert not getattr(cls.__dict__.get("run"), "_guarded", False), s.type
    with pytest.raises(ImportError):
        import framework.ops.sparse.guard  # noqa: F401


# (op, inputs, outputs, error class, message naming op and blob, checked before run() by the schema)
CASES = [
    (
        "Range",
        [("start", np.array([b"x"], object))],
        ["r"],
        TypeMismatchError,
        r"input 0 \('start'\) must hold numbers",
        True,
    ),
    (
        "SortedSegmentMeanGradient",
        [("dY", np.arange(3, dtype=I32)), ("seg", np.array([0, 1, 2], I32))],
        ["dX"],
        TypeMismatchError,
        r"input 0 \('dY'\) must hold floats, got int32",
        True,
    ),
    (
        "SortedSegmentSumGradient",
        [("dY", _scalar(1, F32)), ("seg", _scalar(2, F32))],
        ["dX"],
        TypeMismatchError,
        r"input 1 \('seg'\) must hold integers, got float32",
        True,
    ),
    (
        "LengthsMaxWithMainInputAndForwardOutputGradient",
        [("dY", np.ones(1, F32)), ("len", np.array([1], I32)), ("data", _scalar(1, F32)), ("Y", np.ones(1, F32))],
        ["dX"],
        ShapeError,
        r"input 2 \('data'\) must have rank >= 1, got shape \[\]",
        True,
    ),
    (
        "SortedSegmentRangeMeanGradient",
        [
            ("data", np.ones((3, 2), np.uint8)),
            ("Y", np.ones((1, 2), F32)),
            ("dY", np.ones((1, 2), F32)),
            ("seg", np.zeros(3, I32)),
        ],
        ["dX"],
        TypeMismatchError,
        r"input 0 \('data'\) must hold floats, got uint8",
        True,
    ),
    (
        "SortedSegmentWeightedSum",
        [("data", np.ones((2, 2), F32)), ("w", np.array([b"a", b"b"], object)), ("seg", np.array([0, 0], I32))],
        ["y"],
        TypeMismatchError,
        r"input 1 \('w'\) must hold floats, got strings",
        True,
    ),
    (
        "SortedSegmentMean",
        [("data", np.array([b"a"], object)), ("seg", np.array([0], I32))],
        ["y"],
        TypeMismatchError,
        r"input 0 \('data'\) must hold numbers, got strings",
        True,
    ),
    (
        "SparseToDense",
        [("idx", np.array([0], I32)), ("vals", np.array([b"a"], object))],
        ["y"],
        TypeMismatchError,
        r"input 1 \('vals'\) must hold numbers, got strings",
        True,
    ),
    (
        "SparseLengthsPositionalWeightedSum",
        [
            ("data", np.ones((3, 2), F32)),
            ("w", np.ones((2, 2), F32)),
            ("idx", np.array([0, 1], I64)),
            ("len", np.array([2], I32)),
        ],
        ["y"],
        ShapeError,
        r"input 1 \('w'\) must have rank 1, got shape \[2, 2\]",
        True,
    ),
    (
        "SparseLengthsPositionalWeightedSum",
        [
            ("data", np.ones((3, 2), F32)),
            ("w", np.ones(1, F32)),
            ("idx", np.array([0, 1], I64)),
            ("len", np.array([2], I32)),
        ],
        ["y"],
        ShapeError,
        r"WEIGHT 'w' has 1 positions, a segment has 2",
        False,
    ),
    (
        "LengthsWeightedSumWithMainInputGradient",
        [
            ("w", np.ones(2, F32)),
            ("dY", np.ones((1, 3), F32)),
            ("len", np.array([2], I32)),
            ("data", np.ones((2, 4), F32)),
        ],
        ["dX", "dW"],
        ShapeError,
        r"DATA 'data' has shape \[2, 4\], expected rows of dY's trailing shape \[3\]",
        False,
    ),
    (
        "MergeMultiScalarFeatureTensorsGradient",
        [("len1", np.array([1], I32)), ("len2", np.array([1], I32)), ("dV", np.ones(2, F32))],
        ["dV1"],
        ShapeError,
        r"2 feature inputs need 2 outputs .* got 1",
        False,
    ),
    (
        "FloatToFused8BitRowwiseQuantized",
        [("x", _scalar(1, F32))],
        ["q"],
        TypeMismatchError,
        r"'x' must be a float32 tensor of at least 1 dimension, got float32 \[\]",
        False,
    ),
]


@pytest.mark.parametrize("op_type, inputs, outputs, err, message, declared", CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_a_named_error_raised_on_purpose(op_type, inputs, outputs, err, message, declared):
    ws = Workspace()
    for name, value in inputs:
        ws.feed_blob(name, value)
    op = create_operator(CreateOperator(op_type, [n for n, _ in inputs], outputs), ws)
    with pytest.raises(err, match=message) as info:
        op.run()
    assert op_type in str(info.value)
    assert info.value.__cause__ is None or isinstance(info.value.__cause__, FrameworkError)
    for o in outputs:
        assert not ws.has_blob(o) or not ws.get_blob(o)._obj or not ws.get_blob(o)._obj.is_allocated
    if declared:  # the schema's checks alone reject it: the op's kernel is never reached
        with pytest.raises(err, match=message):
            for check in get_schema(op_type).checks:
                check(op)


def test_an_empty_table_normalizes_to_itself():
    """A 1-D empty table with no indices is valid input (Caffe2 does nothing), not an error."""
    ws, _ = _run("SparseNormalize", [("p", np.zeros((0,), F32)), ("i", np.zeros((0,), I64))], ["p"])
    assert ws.fetch_blob("p").shape == (0,)


def test_a_failed_in_place_update_leaves_the_table_alone():
    ws = Workspace()
    table = np.arange(12, dtype=F32).reshape(4, 3)
    for name, value in [
        ("g", np.ones((2, 3), F32)),
        ("m", np.zeros((4, 3), F32)),
        ("lr", np.ones(1, F32)),
        ("p", table),
        ("i", np.array([1, 9])),
    ]:
        ws.feed_blob(name, value)
    op = CreateOperator("SparseMomentumSGDUpdate", ["g", "m", "lr", "p", "i"], ["g", "m", "p"])
    with pytest.raises(FrameworkError, match=r"SparseMomentumSGDUpdate: indices 'i' out of range \[0, 4\) of 'p'"):
        create_operator(op, ws).run()
    np.testing.assert_array_equal(ws.fetch_blob("p"), table)
    np.testing.assert_array_equal(ws.fetch_blob("m"), np.zeros((4, 3), F32))
