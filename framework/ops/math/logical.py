"""Elementwise logic: the comparisons EQ, NE, LT, LE, GT, GE (bool results), And, Or, Xor,
Not on bool tensors, BitwiseAnd, BitwiseOr, BitwiseXor on int32/int64/bool tensors, and Where
(C ? X : Y). None is differentiable.

The binary ops broadcast as Add does (``framework.ops.math.elementwise``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from framework.errors import ShapeError, TypeMismatchError
from framework.ops.gradient import should_not_do_gradient
from framework.ops.math.elementwise import BROADCAST_DOC, check_kind, register_binary
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import BOOL, Arg, TensorSpec, pointwise_cost, same_as_input


def _bool_result(name: str, doc: str, ufunc: Any, kinds: str, inplace: tuple) -> None:
    """Register a binary op with a bool result: C = ufunc(A, B)."""
    register_binary(
        name, doc + BROADCAST_DOC, ufunc, kinds=kinds, out_dtype=np.dtype(bool), inplace=inplace, category="logical"
    )


_CMP = {
    "EQ": (np.equal, "=="),
    "NE": (np.not_equal, "!="),
    "LT": (np.less, "<"),
    "LE": (np.less_equal, "<="),
    "GT": (np.greater, ">"),
    "GE": (np.greater_equal, ">="),
}
for _name, (_fn, _sym) in _CMP.items():
    _bool_result(_name, f"Elementwise comparison C = (A {_sym} B), a bool tensor.", _fn, "biuf", ())
for _name, _fn in (("And", np.logical_and), ("Or", np.logical_or), ("Xor", np.logical_xor)):
    _bool_result(_name, f"Elementwise logical {_name.lower()} of two bool tensors.", _fn, "b", ((0, 0),))
should_not_do_gradient(*_CMP, "And", "Or", "Xor")

# Caffe2 2020 (elementwise_ops_schema.cc): int32, int64 or bool operands, C of A's type, in place on A only
_BITWISE = {"BitwiseAnd": np.bitwise_and, "BitwiseOr": np.bitwise_or, "BitwiseXor": np.bitwise_xor}
for _name, _fn in _BITWISE.items():
    register_binary(
        _name,
        f"Elementwise {_fn.__name__.replace('_', ' ')} of two integer or bool tensors (C has A's type).{BROADCAST_DOC}",
        _fn,
        kinds="bi",
        inplace=((0, 0),),
        category="logical",
    )
should_not_do_gradient(*_BITWISE)


@register_op(
    "Not",
    input_docs=[("X", "bool tensor")],
    output_docs=[("Y", "logical negation of X")],
    allow_inplace={(0, 0)},
    infer=same_as_input(0),
    cost=pointwise_cost(1),
    category="logical",
)
class Not(Operator):
    """Elementwise logical negation of a bool tensor."""

    def run(self) -> None:
        x = self.input(0)
        if x.dtype.kind != "b":
            check_kind(self, 0, x, "b")
        np.logical_not(x, out=self.output(0, x.shape, x.dtype))


should_not_do_gradient("Not")


def _where_infer(args: Any, ins: list[TensorSpec]) -> list[TensorSpec]:
    c, x, y = ins
    if args.broadcast_on_rows:
        return [x]
    if not (c.known and x.known and y.known):
        return [TensorSpec(x.shape if x.shape == y.shape and x.shape is not None else None, x.dtype)]
    return [TensorSpec(tuple(np.broadcast_shapes(c.shape, x.shape, y.shape)), x.dtype)]


@register_op(
    "Where",
    inputs=3,
    args=[Arg("broadcast_on_rows", BOOL, 0, "C is 1-D with one entry per row (first dim) of X and Y")],
    input_docs=[("C", "bool condition"), ("X", "values where C is true"), ("Y", "values where C is false")],
    output_docs=[("Z", "C ? X : Y, elementwise")],
    allow_inplace={(1, 0), (2, 0)},
    infer=_where_infer,
    cost=pointwise_cost(1),
    category="logical",
)
class Where(Operator):
    """Z = C ? X : Y elementwise. X and Y share a dtype; C is bool. Shapes broadcast with numpy
    rules, or with broadcast_on_rows=1 C has one entry per row of X (X and Y of one shape)."""

    def run(self) -> None:
        c, x, y = self.input(0), self.input(1), self.input(2)
        check_kind(self, 0, c, "b")
        if x.dtype != y.dtype:
            raise TypeMismatchError(
                f"{self.describe()}: X ('{self.input_names[1]}') is {x.dtype} but Y ('{self.input_names[2]}') "
                f"is {y.dtype}"
            )
        where = self.describe()
        if self.args.broadcast_on_rows:
            if x.shape != y.shape or c.ndim != 1 or x.ndim < 1 or c.shape[0] != x.shape[0]:
                raise ShapeError(
                    f"{where}: broadcast_on_rows needs X and Y of one shape and a 1-D C with one entry per row, "
                    f"got C {list(c.shape)}, X {list(x.shape)}, Y {list(y.shape)}"
                )
            c = c.reshape(c.shape + (1,) * (x.ndim - 1))
            shape = x.shape
        else:
            try:
                shape = tuple(np.broadcast_shapes(c.shape, x.shape, y.shape))
            except ValueError:
                raise ShapeError(
                    f"{where}: C {list(c.shape)}, X {list(x.shape)} and Y {list(y.shape)} do not broadcast"
                ) from None
        for i in (1, 2):
            if self.input_names[i] == self.output_names[0] and self.input(i).shape != shape:
                raise ShapeError(f"{where}: in-place output '{self.output_names[0]}' would change shape")
        out = self.output(0, shape, x.dtype)
        if self.input_names[2] == self.output_names[0]:
            np.copyto(out, x, where=c)  # out is Y
        else:
            if self.input_names[1] != self.output_names[0]:
                np.copyto(out, x)
            np.copyto(out, y, where=~c)


should_not_do_gradient("Where")
