"""Input checks shared by the detection ops (no ops here): float feature maps and RoI tables,
named errors before anything is written."""

from __future__ import annotations

import math

import numpy as np

from framework.errors import ArgumentError, ShapeError, TypeMismatchError
from framework.ops.operator import Operator


def float_input(op: Operator, i: int, ndim: int | tuple | None = None) -> np.ndarray:
    x = op.input(i)
    if x.dtype.kind != "f":
        raise TypeMismatchError(
            f"{op.describe()}: input {i} ('{op.input_names[i]}') must hold floats, got {x.dtype} {list(x.shape)}"
        )
    dims = (ndim,) if isinstance(ndim, int) else ndim
    if dims is not None and x.ndim not in dims:
        raise ShapeError(
            f"{op.describe()}: input {i} ('{op.input_names[i]}') must be {' or '.join(map(str, dims))}-D, "
            f"got shape {list(x.shape)}"
        )
    return x


def roi_table(op: Operator, i: int, cols: tuple) -> np.ndarray:
    """Input ``i`` as an R x C float table with C in ``cols``; an empty tensor gives 0 rows."""
    r = op.input(i)
    if r.dtype.kind != "f":
        raise TypeMismatchError(
            f"{op.describe()}: input {i} ('{op.input_names[i]}') must hold floats, got {r.dtype} {list(r.shape)}"
        )
    if r.size == 0:
        return np.zeros((0, cols[-1]), r.dtype)
    if r.ndim != 2 or r.shape[1] not in cols:
        raise ShapeError(
            f"{op.describe()}: input {i} ('{op.input_names[i]}') must be R x {' or '.join(map(str, cols))}, "
            f"got shape {list(r.shape)}"
        )
    if not np.all(np.isfinite(r)):
        raise ShapeError(f"{op.describe()}: input {i} ('{op.input_names[i]}') holds non-finite coordinates")
    return r


def batch_indices(op: Operator, i: int, rois: np.ndarray, with_index: bool, n: int) -> np.ndarray:
    """The per-RoI image index (column 0 when present, else 0), checked to lie in [0, n). The column is
    float: it is truncated toward zero, as Caffe2's ``int roi_batch_ind = rois[0]`` does."""
    if not with_index:
        return np.zeros(rois.shape[0], np.int64)
    b = np.trunc(rois[:, 0])
    if b.size and (b.min() < 0 or b.max() >= n):
        raise ShapeError(
            f"{op.describe()}: input {i} ('{op.input_names[i]}') has batch indices outside [0, {n}) "
            f"(found {rois[:, 0].min():g} .. {rois[:, 0].max():g})"
        )
    return b.astype(np.int64)


def check_order(op: Operator) -> None:
    if op.args.order not in ("NCHW", "NHWC"):
        raise ArgumentError(f"{op.describe()}: argument 'order' must be NCHW or NHWC, got {op.args.order!r}")


def check_positive(op: Operator, *names: str) -> None:
    for name in names:
        v = op.args.get(name)
        if not (v > 0 and math.isfinite(v)):  # NaN and inf too: sizes are computed from it
            raise ArgumentError(f"{op.describe()}: argument '{name}' must be positive and finite, got {v}")
