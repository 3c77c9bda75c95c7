"""ONNX TopK (smallest) and Unique: ordering-based selections.

- ``ONNXTopK(x)``: the ``k`` largest (``largest=1``) or smallest elements along ``axis`` with their
  int64 indices, sorted (ONNX's ``sorted=0`` leaves the order free: sorted is one valid order);
  equal values keep the lower index first, as ONNX specifies. (The backend maps ``largest=1`` onto
  Caffe2's ``TopK``, which orders ties the same way.)
- ``ONNXUnique(x)``: the unique elements (of the flattened x) or unique slices along ``axis``
  (``has_axis=1``), sorted ascending (``sorted=1``) or in order of first occurrence, with the
  index of each one's first occurrence, the inverse indices (x's elements/slices -> unique
  position) and the counts, all int64.

No gradients: these ops serve the ONNX backend (inference).
"""

from __future__ import annotations

import numpy as np

from framework.errors import ShapeError
from framework.ops.gradient import no_gradient
from framework.ops.onnx.common import BF16, NUM_OR_BOOL, axis_of
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import INT, Arg, TensorSpec

I64 = np.dtype(np.int64)
NUMBERS_BF16 = tuple(d for d in NUM_OR_BOOL if d.kind != "b") + BF16


def _topk_infer(args, ins):
    x = ins[0]
    if x.shape is None or not -len(x.shape) <= args.axis < len(x.shape):
        return [TensorSpec(None, x.dtype), TensorSpec(None, I64)]
    shape = list(x.shape)
    shape[args.axis % len(shape)] = args.k
    return [TensorSpec(tuple(shape), x.dtype), TensorSpec(tuple(shape), I64)]


@register_op(
    "ONNXTopK",
    inputs=1,
    outputs=2,
    args=[
        Arg("k", INT, 1, "how many elements to keep along the axis", low=0),
        Arg("axis", INT, -1, "the axis to select along (negative counts from the end)"),
        Arg("largest", INT, 1, "1: the largest elements, 0: the smallest", choices=(0, 1)),
        Arg("sorted", INT, 1, "ONNX's flag; the output is sorted either way", choices=(0, 1)),
    ],
    input_docs=[("x", "numeric tensor of rank >= 1")],
    output_docs=[("values", "the k selected values along the axis"), ("indices", "their int64 positions in x")],
    input_types="numeric",
    ranks={0: (1, None)},
    infer=_topk_infer,
    category="onnx",
)
class ONNXTopK(Operator):
    """ONNX TopK (opsets 1-24): the k largest or smallest elements along ``axis``; ties keep the
    lower index first."""

    def run(self) -> None:
        x = self.input(0)
        axis = axis_of(self, self.args.axis, x.ndim)
        k, n = self.args.k, x.shape[axis]
        if k > n:
            raise ShapeError(f"{self.describe()}: k = {k} exceeds dim {axis} of x {list(x.shape)}")
        if self.args.largest:  # stable ascending sort of the flipped axis, read backwards
            order = np.argsort(np.flip(x, axis), axis=axis, kind="stable")
            order = (n - 1) - np.flip(order, axis)
        else:
            order = np.argsort(x, axis=axis, kind="stable")
        idx = np.take(order, np.arange(k), axis=axis)
        shape = list(x.shape)
        shape[axis] = k
        self.output(0, tuple(shape), x.dtype)[...] = np.take_along_axis(x, idx, axis=axis)
        self.output(1, tuple(shape), I64)[...] = idx


def _unique_y(args, x):
    return TensorSpec(None, x.dtype)  # the count of unique values is known only from the values


@register_op(
    "ONNXUnique",
    inputs=1,
    outputs=(1, 4),
    args=[
        Arg("sorted", INT, 1, "1: ascending order, 0: order of first occurrence", choices=(0, 1)),
        Arg(
            "has_axis", INT, 0, "1: unique slices along `axis`, 0: unique elements of flattened x", choices=(0, 1)
        ),  # fmt: skip
        Arg("axis", INT, 0, "the axis whose slices are compared (with has_axis=1)"),
    ],
    input_docs=[("x", "numeric (or bfloat16) tensor")],
    output_docs=[
        ("Y", "the unique elements (1-D) or slices"),
        ("indices", "int64: first occurrence of each in x"),
        ("inverse_indices", "int64: for each element/slice of x, its position in Y"),
        ("counts", "int64: occurrences of each"),
    ],
    input_types=NUMBERS_BF16,
    infer=lambda args, ins: [_unique_y(args, ins[0])] + [TensorSpec(None, I64)] * 3,
    category="onnx",
)
class ONNXUnique(Operator):
    """ONNX Unique (opset 11): unique elements or slices, with first-occurrence indices, inverse
    indices and counts."""

    def run(self) -> None:
        x = self.input(0)
        axis = axis_of(self, self.args.axis, x.ndim) if self.args.has_axis else None
        if axis is not None and x.shape[axis] and x.size == 0:
            raise ShapeError(f"{self.describe()}: unique slices of an empty x {list(x.shape)}")
        y, first, inv, counts = np.unique(x, return_index=True, return_inverse=True, return_counts=True, axis=axis)
        inv = inv.reshape(-1)
        if not self.args.sorted:  # reorder by first occurrence
            order = np.argsort(first, kind="stable")
            rank = np.empty_like(order)
            rank[order] = np.arange(order.size)
            y = np.take(y, order, axis=0 if axis is None else axis)
            first, counts, inv = first[order], counts[order], rank[inv]
        self.output(0, y.shape, x.dtype)[...] = y
        for j, v in enumerate((first, inv, counts), start=1):
            if j < len(self.outputs) and self.output_names[j]:
                self.output(j, v.shape, I64)[...] = v


no_gradient("ONNXTopK", "ONNXUnique")
