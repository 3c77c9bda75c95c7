"""Axis and row helpers shared by ops that view a tensor as a 2D matrix (FC, MatMul,
Softmax, the per-row losses and DotProduct), as Caffe2's ``canonical_axis_index`` and
``size_to_dim``/``size_from_dim`` do.
"""

from __future__ import annotations

import math

from framework.ops.schema import TensorSpec
from framework.ops.validation import expect_axis


def canonical_axis(axis: int, ndim: int, what: str) -> int:
    """``axis`` in [0, ndim) (negative counts from the end; a scalar takes axis 0); ShapeError naming ``what``
    if out of range."""
    if ndim == 0 and axis == 0:
        return 0
    return expect_axis(what, axis, ndim, of=f"{ndim} dimensions")


def coerce_2d(shape: tuple, axis: int, what: str) -> tuple[int, int]:
    """(rows, columns) of ``shape`` flattened to 2D at ``axis``: the products of the dims before and from it."""
    ax = canonical_axis(axis, len(shape), what)
    return math.prod(shape[:ax]), math.prod(shape[ax:])


def rows_of(shape: tuple) -> tuple[int, int]:
    """(N, D) of a tensor seen as N = dims[0] rows (1 for a scalar) of D values each."""
    n = shape[0] if len(shape) else 1
    return n, (math.prod(shape) // n if n else 0)


def infer_per_row(args, ins: list[TensorSpec]) -> list[TensorSpec]:
    """One value per row of input 0 (dims[0], or 1 for a scalar), typed as input 0."""
    x = ins[0]
    if x.shape is None:
        return [TensorSpec(None, x.dtype)]
    return [TensorSpec((x.shape[0] if len(x.shape) else 1,), x.dtype)]
