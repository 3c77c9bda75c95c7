"""ONNX GatherElements and ScatterElements: element-wise indexing along one axis.

- ``ONNXGatherElements(data, indices)``: ``out[i][j][k] = data[indices[i][j][k]][j][k]`` for
  ``axis=0`` (likewise for any axis); indices has data's rank, each of its dims at most data's
  (outside ``axis``); the output has indices' shape. Negative indices count from the end.
- ``ONNXScatterElements(data, indices, updates)``: a copy of data with
  ``out[indices[i][j][k]][j][k] = updates[i][j][k]`` (axis 0); ``reduction`` add/mul/max/min
  combines instead of writing (repeated indices accumulate); with ``none`` the last write wins
  where indices repeat (ONNX leaves that case undefined).

No gradients: these ops serve the ONNX backend (inference).
"""

from __future__ import annotations

import numpy as np

from framework.errors import ShapeError
from framework.ops.gradient import no_gradient
from framework.ops.onnx.common import REDUCTIONS, axis_of, onnx_indices, scatter
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import INT, STRING, Arg, TensorSpec, same_as_input

_AXIS = Arg("axis", INT, 0, "the axis indexed (negative counts from the end)")


def _check_shapes(op: Operator, data: np.ndarray, idx: np.ndarray, axis: int) -> None:
    if idx.ndim != data.ndim or any(a > b for k, (a, b) in enumerate(zip(idx.shape, data.shape)) if k != axis):
        raise ShapeError(
            f"{op.describe()}: indices '{op.input_names[1]}' of shape {list(idx.shape)} must have the rank of "
            f"data '{op.input_names[0]}' {list(data.shape)} and no larger dims outside axis {axis}"
        )


def _where(idx: np.ndarray, axis: int) -> tuple:
    """The full index tuple: ``idx`` along ``axis``, the position itself along the other dims."""
    grid = list(np.indices(idx.shape, sparse=True))
    grid[axis] = idx
    return tuple(grid)


@register_op(
    "ONNXGatherElements",
    inputs=2,
    args=[_AXIS],
    input_docs=[("data", "tensor of rank r >= 1"), ("indices", "int32/int64 indices of rank r")],
    output_docs=[("output", "indices' shape, data's type")],
    input_types={1: "index"},
    ranks={0: (1, None)},
    infer=lambda args, ins: [TensorSpec(ins[1].shape, ins[0].dtype)],
    category="onnx",
)
class ONNXGatherElements(Operator):
    """ONNX GatherElements (opsets 11, 13): picks data's element at each index along ``axis``,
    keeping the position along the other dims."""

    def run(self) -> None:
        data, idx = self.input(0), self.input(1)
        axis = axis_of(self, self.args.axis, data.ndim)
        _check_shapes(self, data, idx, axis)
        where = _where(onnx_indices(self, 1, idx, data.shape[axis]), axis)
        if idx.size == 0:
            self.output(0, idx.shape, data.dtype)
            return
        self.output(0, idx.shape, data.dtype)[...] = data[where]


@register_op(
    "ONNXScatterElements",
    inputs=3,
    args=[_AXIS, Arg("reduction", STRING, "none", "none | add | mul | max | min", choices=REDUCTIONS)],
    input_docs=[
        ("data", "tensor of rank r >= 1"),
        ("indices", "int32/int64 indices of rank r"),
        ("updates", "values, indices' shape, data's type"),
    ],
    output_docs=[("output", "data with the updates scattered in")],
    input_types={1: "index"},
    same_shape=[(1, 2)],
    same_type=[(0, 2)],
    ranks={0: (1, None)},
    infer=same_as_input(0),
    category="onnx",
)
class ONNXScatterElements(Operator):
    """ONNX ScatterElements (opsets 11-18, Scatter 9-10): writes (or, with ``reduction``, combines)
    each update into a copy of data at its index along ``axis``."""

    def run(self) -> None:
        data, idx, upd = self.input(0), self.input(1), self.input(2)
        axis = axis_of(self, self.args.axis, data.ndim)
        _check_shapes(self, data, idx, axis)
        reduction = self.args.reduction
        if reduction != "none" and data.dtype.kind not in "iuf":
            raise ShapeError(f"{self.describe()}: reduction '{reduction}' needs numbers, data is {data.dtype}")
        where = _where(onnx_indices(self, 1, idx, data.shape[axis]), axis)
        out = self.output(0, data.shape, data.dtype)
        out[...] = data
        scatter(out, where, upd, reduction)


no_gradient("ONNXGatherElements", "ONNXScatterElements")
