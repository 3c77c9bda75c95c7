"""The declared input checks (framework.ops.validation.build_checks) on a stand-in op: each failure is the
right FrameworkError subclass naming the op, the blobs, expected and found; inputs an op was not given
(optional ones past the end) are not checked."""

import numpy as np
import pytest

from framework.errors import ArgumentError, ShapeError, TypeMismatchError
from framework.ops.validation import build_checks


class _Op:
    def __init__(self, *arrays, args=None):
        self.inputs = list(arrays)
        self.input_names = [f"x{i}" for i in range(len(arrays))]
        self.args = args or {}

    def input(self, i):
        return self.inputs[i]

    def describe(self):
        return "op Fake"


def _run(op, **declared):
    for check in build_checks(**declared):
        check(op)


F = np.zeros((2, 3), np.float32)


def test_same_type_names_both_blobs():
    op = _Op(F, F, np.zeros((2, 3), np.int64))
    with pytest.raises(
        TypeMismatchError,
        match=r"op Fake: input 2 \('x2'\) holds int64 but input 0 \('x0'\) holds float32; they must have the same type",
    ):
        _run(op, same_type=[(0, 1, 2)])
    _run(op, same_type=[(0, 1)])


def test_same_shape_names_both_blobs():
    op = _Op(F, np.zeros((3, 2), np.float32))
    with pytest.raises(
        ShapeError,
        match=r"input 1 \('x1'\) has shape \[3, 2\] but input 0 \('x0'\) has shape \[2, 3\]; "
        r"they must have the same shape",
    ):
        _run(op, same_shape=[(0, 1)])


def test_groups_skip_inputs_the_op_was_not_given():
    _run(_Op(F), same_shape=[(0, 1)], same_type=[(0, 1)])
    _run(_Op(F, F), same_shape=[(0, 1, 5)], same_type=[(0, 1, 5)])


def test_kinds_ranks_and_axes():
    op = _Op(F, np.array([b"a"], object), args={"axis": 2})
    with pytest.raises(TypeMismatchError, match=r"input 1 \('x1'\) must hold numbers, got strings \[1\]"):
        _run(op, input_types="numeric")
    with pytest.raises(ShapeError, match=r"input 0 \('x0'\) must have rank 1, got shape \[2, 3\]"):
        _run(op, ranks={"*": 1})
    with pytest.raises(ArgumentError, match=r"argument 'axis' = 2 is out of range for input 0"):
        _run(op, axes={"axis": 0})
    _run(op, axes={"axis": "0+1"})
