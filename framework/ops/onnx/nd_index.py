"""ONNX GatherND and ScatterND: indexing by tuples of leading coordinates.

- ``ONNXGatherND(data, indices)``: indices' last dim k holds a coordinate tuple into data's dims
  ``batch_dims .. batch_dims+k``; the first ``batch_dims`` dims of data and indices are batch
  dims taken together. Output shape ``indices.shape[:-1] + data.shape[batch_dims + k:]``.
  Negative coordinates count from the end.
- ``ONNXScatterND(data, indices, updates)``: a copy of data with the slice at each coordinate
  tuple replaced by (or, with ``reduction`` add/mul/max/min, combined with) the matching update;
  ``updates.shape == indices.shape[:-1] + data.shape[k:]``. With ``none`` the last write wins where
  tuples repeat (undefined in ONNX).

No gradients: these ops serve the ONNX backend (inference).
"""

from __future__ import annotations

import numpy as np

from framework.errors import ShapeError
from framework.ops.gradient import no_gradient
from framework.ops.onnx.common import REDUCTIONS, scatter
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import INT, STRING, Arg, TensorSpec, same_as_input
from framework.ops.validation import check_indices


def _coords(op: Operator, data_shape: tuple, idx: np.ndarray, first: int) -> list[np.ndarray]:
    """Each coordinate column of ``idx`` (last dim), checked against data's dims from ``first``
    and made non-negative."""
    k = idx.shape[-1]
    if k > len(data_shape) - first:
        raise ShapeError(
            f"{op.describe()}: indices '{op.input_names[1]}' hold {k} coordinates, data '{op.input_names[0]}' "
            f"of shape {list(data_shape)} has {len(data_shape) - first} dims to index"
        )
    cols = []
    for j in range(k):
        d = data_shape[first + j]
        c = idx[..., j]
        check_indices(op, 1, c, d, f"coordinate {j}", allow_negative=True)
        c = c.astype(np.int64)
        cols.append(np.where(c < 0, c + d, c))
    return cols


def _gather_nd_infer(args, ins):
    d, i = ins[0], ins[1]
    if d.shape is None or i.shape is None or not i.shape or i.shape[-1] is None:
        return [TensorSpec(None, d.dtype)]
    b = args.batch_dims
    return [TensorSpec(tuple(i.shape[:-1]) + tuple(d.shape[b + i.shape[-1] :]), d.dtype)]


@register_op(
    "ONNXGatherND",
    inputs=2,
    args=[Arg("batch_dims", INT, 0, "leading dims shared by data and indices", low=0)],
    input_docs=[("data", "tensor of rank r >= 1"), ("indices", "int64 coordinates, last dim k")],
    output_docs=[("output", "indices.shape[:-1] + data.shape[batch_dims + k:]")],
    input_types={1: "index"},
    ranks={0: (1, None), 1: (1, None)},
    infer=_gather_nd_infer,
    category="onnx",
)
class ONNXGatherND(Operator):
    """ONNX GatherND (opsets 11-13): the slices of data at the coordinate tuples of indices."""

    def run(self) -> None:
        data, idx = self.input(0), self.input(1)
        b = self.args.batch_dims
        if b >= min(data.ndim, idx.ndim) or data.shape[:b] != idx.shape[:b]:
            raise ShapeError(
                f"{self.describe()}: batch_dims {b} must be < the ranks of data '{self.input_names[0]}' "
                f"{list(data.shape)} and indices '{self.input_names[1]}' {list(idx.shape)}, with equal batch dims"
            )
        cols = _coords(self, data.shape, idx, b)
        nb = int(np.prod(data.shape[:b], dtype=np.int64))
        rest = data.shape[b + idx.shape[-1] :]
        out_shape = tuple(idx.shape[:-1]) + tuple(rest)
        flat = data.reshape((nb,) + data.shape[b:])
        m = int(np.prod(idx.shape[b:-1], dtype=np.int64))
        batch = np.repeat(np.arange(nb, dtype=np.int64), m)
        where = (batch,) + tuple(c.reshape(-1) for c in cols)
        out = self.output(0, out_shape, data.dtype)
        if out.size:
            out[...] = flat[where].reshape(out_shape)


@register_op(
    "ONNXScatterND",
    inputs=3,
    args=[Arg("reduction", STRING, "none", "none | add | mul | max | min", choices=REDUCTIONS)],
    input_docs=[
        ("data", "tensor of rank r >= 1"),
        ("indices", "int64 coordinates, last dim k <= r"),
        ("updates", "indices.shape[:-1] + data.shape[k:], data's type"),
    ],
    output_docs=[("output", "data with the updates scattered in")],
    input_types={1: "index"},
    same_type=[(0, 2)],
    ranks={0: (1, None), 1: (1, None)},
    infer=same_as_input(0),
    category="onnx",
)
class ONNXScatterND(Operator):
    """ONNX ScatterND (opsets 11-18): writes (or combines) each update slice into a copy of data at
    its coordinate tuple."""

    def run(self) -> None:
        data, idx, upd = self.input(0), self.input(1), self.input(2)
        reduction = self.args.reduction
        if reduction != "none" and data.dtype.kind not in "iuf":
            raise ShapeError(f"{self.describe()}: reduction '{reduction}' needs numbers, data is {data.dtype}")
        cols = _coords(self, data.shape, idx, 0)
        want = tuple(idx.shape[:-1]) + tuple(data.shape[idx.shape[-1] :])
        if upd.shape != want:
            raise ShapeError(
                f"{self.describe()}: updates '{self.input_names[2]}' must have shape {list(want)}, "
                f"got {list(upd.shape)}"
            )
        out = self.output(0, data.shape, data.dtype)
        out[...] = data
        if upd.size:
            scatter(out, tuple(cols), upd, reduction)


no_gradient("ONNXGatherND", "ONNXScatterND")
