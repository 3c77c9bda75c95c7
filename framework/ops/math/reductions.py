"""Whole-tensor and row/column reductions: SumElements, SumSqrElements, RowwiseMax, RowWiseArgMax,
ColwiseMax, ArgMax, ArgMin, and their gradient ops (axis reductions are in ``reduce``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from framework.errors import ShapeError
from framework.ops.gradient import gradient, no_gradient, should_not_do_gradient
from framework.ops.math.elementwise import check_kind
from framework.ops.math.reduce import canon_axes, lowest, reduce_cost, reduced_shape
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import BOOL, INT, Arg, TensorSpec
from framework.ops.validation import expect_rank, expect_shape, expect_size


def _scalar_like(args: Any, ins: list[TensorSpec]) -> list[TensorSpec]:
    return [TensorSpec((), ins[0].dtype)]


_AVERAGE = [Arg("average", BOOL, 0, "divide the sum by the number of elements")]


def _sum_elements_op(name: str, sum_doc: str):
    """register_op of SumElements / SumSqrElements (X -> a 0-d sum)."""
    return register_op(
        name,
        args=_AVERAGE,
        input_docs=[("X", "float tensor")],
        output_docs=[("sum", sum_doc)],
        infer=_scalar_like,
        cost=reduce_cost,
        category="reduction",
    )


@_sum_elements_op("SumElements", "scalar (0-d) sum, or mean with average=1")
class SumElements(Operator):
    """Sum of all elements of X as a scalar; their mean with average=1."""

    square = False

    def run(self) -> None:
        x = self.input(0)
        if x.dtype.kind != "f":
            check_kind(self, 0, x, "f")
        out = self.output(0, (), x.dtype)
        if self.square:
            out[...] = np.vdot(x, x) if x.size else 0
        else:
            np.sum(x, out=out)
        if self.args.average and x.size:
            np.multiply(out, x.dtype.type(1.0 / x.size), out=out)


@_sum_elements_op("SumSqrElements", "scalar (0-d) sum of squares, or their mean with average=1")
class SumSqrElements(SumElements):
    """Sum of the squares of all elements of X as a scalar; their mean with average=1."""

    square = True


class SumElementsGradient(Operator):
    """dX = dY (divided by the element count with average=1), for every element of X."""

    square = False

    def run(self) -> None:
        x, dy = self.input(0), self.input(1)
        expect_size(self, 1, dy, 1, "the gradient of a scalar")
        dx = self.output(0, x.shape, dy.dtype)
        g = dy.reshape(())
        if self.args.average and x.size:
            g = g / x.size
        if self.square:
            np.multiply(x, 2 * g, out=dx)
        else:
            dx.fill(g)


for _name, _sq in (("SumElementsGradient", False), ("SumSqrElementsGradient", True)):
    register_op(
        _name,
        inputs=2,
        args=_AVERAGE,
        doc="dX = 2 * X * dY (over the count with average=1)." if _sq else SumElementsGradient.__doc__,
        input_docs=[("X", "forward input"), ("dY", "gradient of the scalar")],
        output_docs=[("dX", "gradient of X")],
        infer=lambda args, ins: [TensorSpec(ins[0].shape, ins[1].dtype)],
        cost=reduce_cost,
        category="reduction",
        private=True,
        input_types=["numeric" if not _sq else "float", "float"],
    )(type(_name, (SumElementsGradient,), {"square": _sq}))


@gradient("SumElements")
def _sum_elements_grad(g):
    return [g.op("SumElementsGradient", [g.I(0), g.GO(0)], [g.GI(0)])]


@gradient("SumSqrElements")
def _sum_sqr_elements_grad(g):
    return [g.op("SumSqrElementsGradient", [g.I(0), g.GO(0)], [g.GI(0)])]


# -- RowwiseMax / ColwiseMax ------------------------------------------------------------------------------


def _rc_infer(rowwise: bool):
    def infer(args: Any, ins: list[TensorSpec]) -> list[TensorSpec]:
        x = ins[0]
        if x.shape is None or len(x.shape) != 3:
            return [TensorSpec(None, x.dtype)]
        b, m, n = x.shape
        return [TensorSpec((b, m) if rowwise else (b, n), x.dtype)]

    return infer


class RowwiseMax(Operator):
    """Max over the last dim of a 3-D X (B x M x N -> B x M)."""

    axis = 2

    def run(self) -> None:
        x = self.input(0)
        expect_rank(self, 0, x, 3, "3-D")
        if x.dtype.kind != "f":
            check_kind(self, 0, x, "f")
        shape = (x.shape[0], x.shape[1]) if self.axis == 2 else (x.shape[0], x.shape[2])
        out = self.output(0, shape, x.dtype)
        if x.shape[self.axis] == 0:
            out.fill(lowest(x.dtype))
        else:
            np.max(x, axis=self.axis, out=out)


class RowwiseMaxGradient(Operator):
    """dX = dY routed to the elements equal to the max, from (X, Y, dY)."""

    axis = 2

    def run(self) -> None:
        x, y, dy = self.input(0), self.input(1), self.input(2)
        shape = (x.shape[0], x.shape[1]) if self.axis == 2 else (x.shape[0], x.shape[2])
        expect_shape(self, 1, y, shape, "the forward output")
        expect_shape(self, 2, dy, shape, "the forward output")
        dx = self.output(0, x.shape, dy.dtype)
        np.multiply(np.expand_dims(dy, self.axis), x == np.expand_dims(y, self.axis), out=dx)


for _name, _axis, _doc in (
    ("RowwiseMax", 2, "Max over the last dim of a 3-D X (B x M x N -> B x M)."),
    ("ColwiseMax", 1, "Max over the middle dim of a 3-D X (B x M x N -> B x N)."),
):
    register_op(
        _name,
        doc=_doc,
        input_docs=[("X", "3-D float tensor B x M x N")],
        output_docs=[("Y", "B x M (rowwise) or B x N (colwise)")],
        infer=_rc_infer(_axis == 2),
        cost=reduce_cost,
        category="reduction",
    )(type(_name, (RowwiseMax,), {"axis": _axis}))
    register_op(
        _name + "Gradient",
        inputs=3,
        doc=RowwiseMaxGradient.__doc__,
        input_docs=[("X", "forward input"), ("Y", "forward output"), ("dY", "gradient of Y")],
        output_docs=[("dX", "gradient of X")],
        infer=lambda args, ins: [TensorSpec(ins[0].shape, ins[2].dtype)],
        cost=reduce_cost,
        category="reduction",
        private=True,
        input_types="float",
        ranks={0: 3},
    )(type(_name + "Gradient", (RowwiseMaxGradient,), {"axis": _axis}))


def _rc_grad(g):
    return [g.op(g.def_.type + "Gradient", [g.I(0), g.O(0), g.GO(0)], [g.GI(0)])]


gradient("RowwiseMax")(_rc_grad)
gradient("ColwiseMax")(_rc_grad)


# -- ArgMax / ArgMin ---------------------------------------------------------------------------------------


def _arg_infer(args: Any, ins: list[TensorSpec]) -> list[TensorSpec]:
    x = ins[0]
    if x.shape is None:
        return [TensorSpec(None, np.dtype(np.int64))]
    (axis,) = canon_axes([args.axis], len(x.shape), "")
    return [TensorSpec(reduced_shape(tuple(x.shape), (axis,), bool(args.keepdims)), np.dtype(np.int64))]


class ArgMax(Operator):
    """Index (int64) of the first maximum along `axis`; keepdims=1 keeps that axis with size 1."""

    fn = staticmethod(np.argmax)

    def run(self) -> None:
        x = self.input(0)
        if x.ndim == 0:
            raise ShapeError(f"{self.describe()}: X ('{self.input_names[0]}') must have at least 1 dim")
        (axis,) = canon_axes([self.args.axis], x.ndim, self.describe())
        if x.shape[axis] == 0:
            raise ShapeError(f"{self.describe()}: cannot take an arg-extreme over the empty axis {axis}")
        out = self.output(0, reduced_shape(x.shape, (axis,), bool(self.args.keepdims)), np.int64)
        self.fn(x, axis=axis, out=out, keepdims=bool(self.args.keepdims))


for _name, _fn in (("ArgMax", np.argmax), ("ArgMin", np.argmin)):
    register_op(
        _name,
        args=[
            Arg("axis", INT, -1, "the axis to search"),
            Arg("keepdims", BOOL, 1, "keep the searched axis with size 1"),
        ],
        doc=f"Index (int64) of the first {'maximum' if _name == 'ArgMax' else 'minimum'} along `axis`; "
        "keepdims=1 keeps that axis with size 1.",
        input_docs=[("X", "input tensor")],
        output_docs=[("Indices", "int64 indices")],
        infer=_arg_infer,
        cost=reduce_cost,
        category="reduction",
    )(type(_name, (ArgMax,), {"fn": staticmethod(_fn)}))
should_not_do_gradient("ArgMax", "ArgMin")


# -- RowWiseArgMax -----------------------------------------------------------------------------------------


def _row_argmax_infer(args: Any, ins: list[TensorSpec]) -> list[TensorSpec]:
    x = ins[0]
    return [TensorSpec(None if x.shape is None else (x.shape[0], 1), np.dtype(np.int32))]


@register_op(
    "RowWiseArgMax",
    input_docs=[("X", "2-D (N x D) float tensor")],
    output_docs=[("Z", "2-D (N x 1) int32: the column of each row's maximum")],
    input_types="float",
    ranks={0: 2},
    infer=_row_argmax_infer,
    cost=reduce_cost,
    category="reduction",
)
class RowWiseArgMax(Operator):
    """Column (int32, N x 1) of the first maximum of each row of a 2-D tensor, as Caffe2's ``arg_max_op``:
    a running maximum that only a strictly greater value replaces (so a NaN is never chosen, except in
    the first column, which then stays chosen). Caffe2 leaves the result unwritten when D is 1; here it
    is 0. D = 0 with rows is an error (Caffe2 reads out of bounds)."""

    def run(self) -> None:
        x = self.input(0)
        n, d = x.shape
        if d == 0 and n:
            raise ShapeError(f"{self.describe()}: X ('{self.input_names[0]}') has rows of no columns")
        out = self.output(0, (n, 1), np.int32)
        if not n:
            return
        nan = np.isnan(x)
        if not nan.any():
            out[:, 0] = np.argmax(x, axis=1)
            return
        # NaNs as -inf can only win a row whose first value is -inf too, and then column 0 wins first
        best = np.argmax(np.where(nan, -np.inf, x), axis=1)
        out[:, 0] = np.where(nan[:, 0], 0, best)


no_gradient("RowWiseArgMax")
