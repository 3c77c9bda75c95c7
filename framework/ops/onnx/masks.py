"""ONNX OneHot, Compress and NonZero: selections driven by index or boolean masks.

- ``ONNXOneHot(indices, values)``: a new dim of size ``depth`` inserted at ``axis``; the cell at each
  index holds ``values[1]`` (on), every other ``values[0]`` (off). Negative indices count from the
  end (>= -depth); indices outside [-depth, depth) give an all-off row, as ONNX specifies.
  Float indices are truncated toward zero.
- ``ONNXCompress(data, condition)``: the slices along ``axis`` (or the elements of flattened data,
  ``has_axis=0``) where the 1-D bool ``condition`` is true; a condition shorter than the dim drops
  the rest.
- ``ONNXNonZero(x)``: int64 ``[rank, nnz]``: the coordinates of x's non-zero elements in row-major
  order (numpy's ``nonzero``); a 0-d x counts as a 1-element 1-D tensor.

No gradients: these ops serve the ONNX backend (inference).
"""

from __future__ import annotations

import numpy as np

from framework.errors import ShapeError
from framework.memory.allocator import check_elements
from framework.ops.gradient import no_gradient
from framework.ops.onnx.common import MOVABLE, axis_of
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import INT, Arg, TensorSpec
from framework.ops.validation import expect_size

I64 = np.dtype(np.int64)


def _one_hot_infer(args, ins):
    i, v = ins[0], ins[1]
    if i.shape is None:
        return [TensorSpec(None, v.dtype)]
    r = len(i.shape) + 1
    if not -r <= args.axis < r:
        return [TensorSpec(None, v.dtype)]
    shape = list(i.shape)
    shape.insert(args.axis % r, args.depth)
    return [TensorSpec(tuple(shape), v.dtype)]


@register_op(
    "ONNXOneHot",
    inputs=2,
    args=[
        Arg("depth", INT, 1, "size of the one-hot dim", low=1),
        Arg("axis", INT, -1, "where the one-hot dim goes in the output (negative counts from the end)"),
    ],
    input_docs=[("indices", "numeric tensor of indices"), ("values", "[off, on] values of the output type")],
    output_docs=[("output", "indices' shape with a dim of size depth inserted at axis")],
    input_types={0: "numeric", 1: MOVABLE},
    infer=_one_hot_infer,
    category="onnx",
)
class ONNXOneHot(Operator):
    """ONNX OneHot (opsets 9, 11): one-hot rows of the indices, with the given off/on values."""

    def run(self) -> None:
        idx, vals = self.input(0), self.input(1)
        expect_size(self, 1, vals, 2, "[off, on]")
        depth = self.args.depth
        r = idx.ndim + 1
        axis = axis_of(self, self.args.axis, r, blob=0) if r > 0 else 0
        out_shape = idx.shape[:axis] + (depth,) + idx.shape[axis:]
        check_elements((depth,), 8, f"{self.describe()}: the one-hot range of depth {depth}")
        check_elements(out_shape, max(vals.dtype.itemsize, 8), f"{self.describe()}: the one-hot output")
        with np.errstate(invalid="ignore"):
            ii = np.trunc(idx).astype(np.int64) if idx.dtype.kind == "f" else idx.astype(np.int64)
        ii = np.where(ii < 0, ii + depth, ii)
        hot = np.expand_dims(ii, axis) == np.arange(depth).reshape((depth,) + (1,) * (r - 1 - axis))
        flat = vals.reshape(-1)
        out = self.output(0, hot.shape, vals.dtype)
        out[...] = np.where(hot, flat[1], flat[0])


@register_op(
    "ONNXCompress",
    inputs=2,
    args=[
        Arg("has_axis", INT, 0, "1: select slices along `axis`; 0: elements of flattened data", choices=(0, 1)),
        Arg("axis", INT, 0, "the axis selected along (with has_axis=1)"),
    ],
    input_docs=[("data", "tensor"), ("condition", "1-D bool: which slices/elements to keep")],
    output_docs=[("output", "the selected slices (or 1-D elements)")],
    input_types={0: MOVABLE, 1: "bool"},
    ranks={1: 1},
    infer=lambda args, ins: [TensorSpec(None, ins[0].dtype)],
    category="onnx",
)
class ONNXCompress(Operator):
    """ONNX Compress (opsets 9, 11): data's slices along ``axis`` where condition is true."""

    def run(self) -> None:
        data, cond = self.input(0), self.input(1)
        src = data if self.args.has_axis else data.reshape(-1)
        axis = axis_of(self, self.args.axis, data.ndim) if self.args.has_axis else 0
        if cond.size > src.shape[axis]:
            raise ShapeError(
                f"{self.describe()}: condition '{self.input_names[1]}' has {cond.size} entries, "
                f"more than dim {axis} ({src.shape[axis]}) of data"
            )
        out = np.compress(cond, src, axis=axis)
        self.output(0, out.shape, data.dtype)[...] = out


@register_op(
    "ONNXNonZero",
    inputs=1,
    input_docs=[("x", "tensor")],
    output_docs=[("indices", "int64 [rank, nnz]: coordinates of the non-zero elements")],
    input_types=MOVABLE,
    infer=lambda args, ins: [TensorSpec(None, I64)],  # nnz is known only from the values
    category="onnx",
)
class ONNXNonZero(Operator):
    """ONNX NonZero (opsets 9, 13): the coordinates of x's non-zero elements, row-major."""

    def run(self) -> None:
        x = self.input(0)
        nz = np.array(np.nonzero(x if x.ndim else x.reshape(1)), dtype=np.int64)
        self.output(0, nz.shape, I64)[...] = nz


no_gradient("ONNXOneHot", "ONNXCompress", "ONNXNonZero")
