"""Helpers shared by the ONNX family's ops: axis normalization, index checks with ONNX's negative
indices, and ufuncs for the ``reduction`` argument of the scatter ops."""

from __future__ import annotations

import numpy as np

from framework.ops.operator import Operator
from framework.ops.validation import check_indices, expect_axis

# Numbers and bools (the input_types of ops that move any plain numpy value).
NUM_OR_BOOL = tuple(
    np.dtype(t)
    for t in (np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64,
              np.float16, np.float32, np.float64)
)  # fmt: skip
# ONNX's bfloat16 (numpy has none; ml_dtypes provides it): data movement works on it like any other element
# type. Named, not imported: input checks compare a name, so registering these ops does not import ml_dtypes.
BF16 = ("bfloat16",)
MOVABLE = NUM_OR_BOOL + BF16  # types of the ops that only move or select elements
REDUCTIONS = ("none", "add", "mul", "max", "min")
UFUNC = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}


def axis_of(op: Operator, axis: int, rank: int, blob: int = 0) -> int:
    """``axis`` in [0, rank) (ONNX counts negative axes from the end); ShapeError naming the blob."""
    return expect_axis(op.describe(), axis, rank, of=f"'{op.input_names[blob]}' of rank {rank}")


def onnx_indices(op: Operator, i: int, idx: np.ndarray, bound: int) -> np.ndarray:
    """Indices of input ``i`` in [-bound, bound) (ONNX's negative indices count from the end) as
    non-negative int64."""
    check_indices(op, i, idx, bound, allow_negative=True)
    idx = idx.astype(np.int64, copy=False)
    return np.where(idx < 0, idx + bound, idx)


def scatter(out: np.ndarray, where: tuple, updates: np.ndarray, reduction: str) -> None:
    """``out[where] = updates`` (the last write wins on duplicates), or combined with the reduction's
    ufunc at every (repeated) index."""
    if reduction == "none":
        out[where] = updates
    else:
        UFUNC[reduction].at(out, where, updates)
