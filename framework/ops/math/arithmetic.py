"""Elementwise arithmetic: Add, Sub, Mul, Div, Pow, with their gradient ops (AddGradient,
SubGradient, MulGradient, DivGradient, PowGradient), and SumReduceLike, the reduction a
broadcast operand's gradient needs.

The forward ops broadcast through ``framework.ops.math.elementwise`` (Caffe2's legacy
``broadcast=1`` or numpy's rules); a gradient sums over the dims its operand was broadcast along.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from framework.errors import GradientError, SchemaError, ShapeError
from framework.ops.gradient import gradient, should_not_do_gradient
from framework.ops.math.broadcast import (
    BROADCAST_ARGS,
    b_view_shape,
    legacy_axis,
    legacy_sizes,
    legacy_sum_to_shape,
    named_axis,
    sum_to_shape,
)
from framework.ops.math.elementwise import BROADCAST_DOC, Binary, binary_infer, check_kind, register_binary
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import FLOAT, INT, STRING, Arg, TensorSpec, pointwise_cost
from framework.ops.validation import expect_shape


def _div_compute(self: Binary, a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
    if a.dtype.kind == "f":
        np.divide(a, b, out=out)
        return
    # Integer division truncates toward zero as in C++ (numpy floors).
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.floor_divide(a, b)
        fix = (np.remainder(a, b) != 0) & ((a < 0) != (b < 0))
        np.add(q, fix.astype(q.dtype), out=out)


Add = register_binary("Add", "Elementwise C = A + B." + BROADCAST_DOC, np.add)
Sub = register_binary("Sub", "Elementwise C = A - B." + BROADCAST_DOC, np.subtract)
Mul = register_binary("Mul", "Elementwise C = A * B." + BROADCAST_DOC, np.multiply)
Div = register_binary(
    "Div",
    "Elementwise C = A / B (integer division truncates toward zero)." + BROADCAST_DOC,
    np.divide,
    inplace=((0, 0),),
    compute=_div_compute,
)


# -- Pow -------------------------------------------------------------------------------------------


def _pow_infer(args: Any, ins: list[TensorSpec]) -> list[TensorSpec]:
    if len(ins) == 1:
        return [ins[0]]
    return binary_infer()(args, ins)


@register_op(
    "Pow",
    inputs=(1, 2),
    args=[Arg("exponent", FLOAT, None, "the exponent when there is no second input")] + BROADCAST_ARGS,
    input_docs=[("X", "base"), ("exponent", "optional exponent tensor (broadcast as B of Add)")],
    output_docs=[("Y", "X ** exponent")],
    allow_inplace={(0, 0), (1, 0)},
    infer=_pow_infer,
    cost=pointwise_cost(4),
    category="math",
)
class Pow(Binary):
    """Elementwise Y = X ** exponent, the exponent given by argument `exponent` or by a second
    input (broadcast as B of Add)."""

    kinds = "f"

    def setup(self) -> None:
        n = len(self.input_names)
        if (n == 2) == self.args.has("exponent"):
            raise self.arg_error("give the exponent either as argument 'exponent' or as a second input, not both")
        if n == 2:
            super().setup()
        else:
            self._e = None

    def run(self) -> None:
        if len(self.inputs) == 2:
            super().run()
            return
        x = self.input(0)
        if x.dtype.kind != "f":
            check_kind(self, 0, x, "f")
        if self._e is None or self._e.dtype != x.dtype:
            self._e = np.array(self.args.exponent, dtype=x.dtype)
        np.power(x, self._e, out=self.output(0, x.shape, x.dtype))

    def compute(self, a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
        np.power(a, b, out=out)


# -- gradient ops ----------------------------------------------------------------------------------


def _grad_pair_infer(a_idx: int, b_idx: int):
    def infer(args: Any, ins: list[TensorSpec]) -> list[TensorSpec]:
        dt = ins[0].dtype
        return [TensorSpec(ins[a_idx].shape, dt), TensorSpec(ins[b_idx].shape, dt)][: args.num_outputs]

    return infer


class _BinaryGrad(Operator):
    """Base of the binary gradient ops: reduces a full-size gradient to an operand's shape."""

    def setup(self) -> None:
        self.legacy = bool(self.args.broadcast)
        self.axis = legacy_axis(self.args, self.describe())
        self._tmp: dict[tuple, np.ndarray] = {}

    def reduce(self, full: np.ndarray, shape: tuple, out: np.ndarray, is_b: bool) -> None:
        if full.shape == shape:
            if out is not full:
                np.copyto(out, full)
        elif self.legacy and is_b:
            legacy_sum_to_shape(full, shape, self.axis, out, self.describe())
        else:
            sum_to_shape(full, shape, out)

    def tmp(self, shape: tuple, dtype: Any, slot: int = 0) -> np.ndarray:
        key = (slot, shape, np.dtype(dtype))
        t = self._tmp.get(key)
        if t is None:
            t = self._tmp[key] = np.empty(shape, dtype)
        return t

    def check_operands(self, dc: np.ndarray, dc_index: int, a_shape: tuple, b_shape: tuple) -> None:
        """ShapeError unless dC has the shape the forward op gave C from A's and B's shapes."""
        if self.legacy:
            if int(np.prod(b_shape, dtype=np.int64)) != 1:
                legacy_sizes(a_shape, b_shape, self.axis, self.describe())
            c_shape = tuple(a_shape)
        else:
            try:
                c_shape = np.broadcast_shapes(a_shape, b_shape)
            except ValueError:
                raise ShapeError(
                    f"{self.describe()}: A {list(a_shape)} and B {list(b_shape)} do not broadcast together"
                ) from None
        expect_shape(self, dc_index, dc, c_shape, "the forward output's shape")

    def b_view(self, a_shape: tuple, b: np.ndarray) -> np.ndarray:
        if self.legacy and b.shape != a_shape:
            return b.reshape(b_view_shape(a_shape, b.shape, self.axis, self.describe()))
        return b


_GRAD_IN = [("dC", "gradient of C"), ("A", "forward input A"), ("B", "forward input B")]
_GRAD_OUT = [("dA", "gradient of A"), ("dB", "gradient of B")]


def _register_grad(name: str, kinds: str = "numeric"):
    return register_op(
        name,
        inputs=3,
        outputs=2,
        args=BROADCAST_ARGS,
        input_docs=_GRAD_IN,
        output_docs=_GRAD_OUT,
        allow_inplace={(0, 0), (0, 1)},
        infer=_grad_pair_infer(1, 2),
        cost=pointwise_cost(2),
        category="math",
        private=True,
        input_types=kinds,
        same_type=[(0, 1, 2)],
    )


@_register_grad("AddGradient")
class AddGradient(_BinaryGrad):
    """dA = dC and dB = dC, each summed over the dims it was broadcast along."""

    sign_b = 1

    def run(self) -> None:
        dc, a, b = self.input(0), self.input(1), self.input(2)
        a_shape, b_shape = a.shape, b.shape
        self.check_operands(dc, 0, a_shape, b_shape)
        # When dA is dC's blob, derive dB first (dA overwrites dC).
        if self.output_names[0] == self.input_names[0]:
            self._db(dc, b_shape)
            self.reduce(dc, a_shape, self.output(0, a_shape, dc.dtype), False)
        else:
            self.reduce(dc, a_shape, self.output(0, a_shape, dc.dtype), False)
            self._db(dc, b_shape)

    def _db(self, dc: np.ndarray, b_shape: tuple) -> None:
        db = self.output(1, b_shape, dc.dtype)
        self.reduce(dc, b_shape, db, True)
        if self.sign_b < 0:
            np.negative(db, out=db)


@_register_grad("SubGradient")
class SubGradient(AddGradient):
    """dA = dC and dB = -dC, each summed over the dims it was broadcast along."""

    sign_b = -1


@_register_grad("MulGradient")
class MulGradient(_BinaryGrad):
    """dA = dC * B and dB = dC * A, each summed over the dims it was broadcast along."""

    def run(self) -> None:
        dc, a, b = self.input(0), self.input(1), self.input(2)
        a_shape, b_shape = a.shape, b.shape
        self.check_operands(dc, 0, a_shape, b_shape)
        bv = self.b_view(dc.shape, b)
        first_b = self.output_names[0] == self.input_names[0]
        for which in (1, 0) if first_b else (0, 1):
            if which == 0:
                self._one(dc, bv, a_shape, 0, False)
            else:
                self._one(dc, a, b_shape, 1, True)

    def _one(self, dc: np.ndarray, other: np.ndarray, shape: tuple, k: int, is_b: bool) -> None:
        out = self.output(k, shape, dc.dtype)
        if dc.shape == shape:
            np.multiply(dc, other, out=out)
        else:
            t = self.tmp(dc.shape, dc.dtype)
            np.multiply(dc, other, out=t)
            self.reduce(t, shape, out, is_b)


def _div_grad_infer(args: Any, ins: list[TensorSpec]) -> list[TensorSpec]:
    if len(ins) == 3:  # legacy form (B, C, dC)
        return [TensorSpec(ins[1].shape, ins[2].dtype), TensorSpec(ins[0].shape, ins[2].dtype)]
    return _grad_pair_infer(1, 2)(args, ins)


@register_op(
    "DivGradient",
    inputs=(3, 4),
    outputs=2,
    args=BROADCAST_ARGS,
    input_docs=[
        ("dC", "gradient of C (or B in the 3-input form)"),
        ("A", "forward input A (or C)"),
        ("B", "forward input B (or dC)"),
        ("C", "forward output C"),
    ],
    output_docs=_GRAD_OUT,
    allow_inplace={(0, 0)},
    infer=_div_grad_infer,
    cost=pointwise_cost(3),
    category="math",
    private=True,
    input_types="float",
    same_type=[(0, 1, 2, 3)],
)
class DivGradient(_BinaryGrad):
    """dA = dC / B and dB = -dC * C / B, each summed over broadcast dims. Inputs (dC, A, B, C),
    or Caffe2's older (B, C, dC) where A has C's shape."""

    def run(self) -> None:
        if len(self.inputs) == 3:
            b, c, dc = self.input(0), self.input(1), self.input(2)
            a_shape = c.shape
        else:
            dc, a, b, c = self.input(0), self.input(1), self.input(2), self.input(3)
            a_shape = a.shape
            expect_shape(self, 3, c, dc.shape, "C, as dC")
        b_shape = b.shape
        self.check_operands(dc, 2 if len(self.inputs) == 3 else 0, a_shape, b_shape)
        bv = self.b_view(dc.shape, b)
        # dB first: it reads dC, which dA may overwrite in place.
        db = self.output(1, b_shape, dc.dtype)
        t = self.tmp(dc.shape, dc.dtype)
        np.multiply(dc, c, out=t)
        np.divide(t, bv, out=t)
        np.negative(t, out=t)
        self.reduce(t, b_shape, db, True)
        da = self.output(0, a_shape, dc.dtype)
        if dc.shape == a_shape:
            np.divide(dc, bv, out=da)
        else:
            np.divide(dc, bv, out=t)
            self.reduce(t, a_shape, da, False)


def _pow_grad_infer(args: Any, ins: list[TensorSpec]) -> list[TensorSpec]:
    dt = ins[0].dtype
    if len(ins) == 2:
        return [TensorSpec(ins[1].shape, dt)]
    return [TensorSpec(ins[1].shape, dt), TensorSpec(ins[2].shape, dt)]


@register_op(
    "PowGradient",
    inputs={2, 4},
    outputs={1, 2},
    args=[Arg("exponent", FLOAT, None, "the forward op's exponent argument")] + BROADCAST_ARGS,
    input_docs=[
        ("dY", "gradient of Y"),
        ("X", "forward base"),
        ("E", "forward exponent tensor"),
        ("Y", "forward output"),
    ],
    output_docs=[("dX", "gradient of X"), ("dE", "gradient of the exponent tensor")],
    infer=_pow_grad_infer,
    cost=pointwise_cost(6),
    category="math",
    private=True,
    input_types="float",
    same_type=[(0, 1, 2, 3)],
)
class PowGradient(_BinaryGrad):
    """dX = E * X^(E-1) * dY; with an exponent tensor also dE = Y * log(X) * dY (summed over
    broadcast dims). Inputs (dY, X) with argument `exponent`, or (dY, X, E, Y)."""

    def setup(self) -> None:
        if len(self.output_names) != len(self.input_names) // 2:
            raise SchemaError(
                f"{self.describe()}: the {len(self.input_names)}-input form produces "
                f"{len(self.input_names) // 2} outputs, got {len(self.output_names)}"
            )
        if len(self.input_names) == 2:
            if not self.args.has("exponent"):
                raise self.arg_error("the 2-input form needs argument 'exponent'")
            self.legacy, self.axis, self._tmp = False, -1, {}
        else:
            super().setup()

    def run(self) -> None:
        dy, x = self.input(0), self.input(1)
        if len(self.inputs) == 2:
            expect_shape(self, 0, dy, x.shape, "X's shape")
            e = self.args.exponent
            dx = self.output(0, x.shape, dy.dtype)
            np.power(x, x.dtype.type(e - 1), out=dx)
            np.multiply(dx, dx.dtype.type(e), out=dx)
            np.multiply(dx, dy, out=dx)
            return
        e, y = self.input(2), self.input(3)
        self.check_operands(dy, 0, x.shape, e.shape)
        expect_shape(self, 3, y, dy.shape, "dY's shape")
        ev = self.b_view(dy.shape, e)
        t = self.tmp(dy.shape, dy.dtype)
        with np.errstate(divide="ignore", invalid="ignore"):
            np.log(x, out=t)
        np.multiply(t, y, out=t)
        np.multiply(t, dy, out=t)
        self.reduce(t, e.shape, self.output(1, e.shape, dy.dtype), True)
        np.subtract(ev, ev.dtype.type(1), out=t)
        np.power(x, t, out=t)
        np.multiply(t, ev, out=t)
        np.multiply(t, dy, out=t)
        self.reduce(t, x.shape, self.output(0, x.shape, dy.dtype), False)


# -- SumReduceLike ---------------------------------------------------------------------------------


def _srl_infer(args: Any, ins: list[TensorSpec]) -> list[TensorSpec]:
    return [TensorSpec(ins[1].shape, ins[0].dtype)]


@register_op(
    "SumReduceLike",
    inputs=2,
    args=[
        Arg("axis", INT, -1, "first axis of A that B aligns with (-1: suffix matching)"),
        Arg("axis_str", STRING, "", "the axis as a letter of `order`; excludes `axis`"),
        Arg("order", STRING, "NCHW", "layout that `axis_str` refers to"),
    ],
    input_docs=[("A", "tensor to reduce"), ("B", "tensor whose shape the result takes")],
    output_docs=[("C", "A summed over the dims B was broadcast along (legacy rules), shaped as B")],
    infer=_srl_infer,
    cost=pointwise_cost(1),
    category="math",
    input_types=["numeric", "any"],
)
class SumReduceLike(Operator):
    """Sums A down to B's shape, B being a scalar or a contiguous sub-shape of A at `axis`
    (Caffe2's legacy broadcast); the reduction that the gradient of a broadcast operand needs."""

    def setup(self) -> None:
        self.axis = named_axis(self.args, self.describe())
        if self.input_names[1] == self.output_names[0]:
            raise SchemaError(f"{self.describe()}: in-place with B is not allowed")

    def run(self) -> None:
        a, b = self.input(0), self.input(1)
        if int(np.prod(b.shape, dtype=np.int64)) != 1:
            legacy_sizes(a.shape, b.shape, self.axis, self.describe())
        out = self.output(0, b.shape, a.dtype)
        legacy_sum_to_shape(a, b.shape, self.axis, out, self.describe())


should_not_do_gradient("SumReduceLike")


# -- gradient makers -------------------------------------------------------------------------------


@gradient("Add")
def _add_grad(g):
    return [g.op("AddGradient", [g.GO(0), g.I(0), g.I(1)], [g.GI(0), g.GI(1)])]


@gradient("Sub")
def _sub_grad(g):
    return [g.op("SubGradient", [g.GO(0), g.I(0), g.I(1)], [g.GI(0), g.GI(1)])]


@gradient("Mul")
def _mul_grad(g):
    if g.O(0) in (g.I(0), g.I(1)):
        raise GradientError(
            f"gradient of Mul: cannot differentiate an in-place Mul (output '{g.O(0)}' overwrote an input "
            "that the gradient needs)"
        )
    return [g.op("MulGradient", [g.GO(0), g.I(0), g.I(1)], [g.GI(0), g.GI(1)])]


@gradient("Div")
def _div_grad(g):
    return [g.op("DivGradient", [g.GO(0), g.I(0), g.I(1), g.O(0)], [g.GI(0), g.GI(1)])]


@gradient("Pow", copy_arguments=False)
def _pow_grad(g):
    """Exponent argument e: Caffe2's GetPowGradient chain, Pow(X, e-1) -> Mul dY -> Scale e
    (in place X is gone, so Pow(Y, (e-1)/e) as Caffe2). Exponent tensor E: one PowGradient op
    (dY, X, E, Y) -> (dX, dE). Caffe2 emits a 9-op chain there (ConstantFill/Sub for E-1, Pow,
    Mul, Mul; Log, Mul, Mul, SumReduceLike); its ConstantFill makes E-1 float32, so that chain
    only works for float32, and it reduces broadcast dims of E only. PowGradient gives the same
    numbers in one pass (a test builds Caffe2's chain and compares), for float64 too, and
    reduces numpy-broadcast dims of X or E."""
    if len(g.def_.input) == 1:
        e = float(g.arg("exponent"))
        if g.I(0) != g.O(0):
            pe = e - 1.0
        else:
            if abs(e) <= 1e-12:
                raise GradientError("gradient of an in-place Pow with exponent 0 cannot be computed (Caffe2 refuses)")
            pe = (e - 1.0) / e
        return [
            g.op("Pow", [g.I(0)], [g.GI(0)], exponent=pe),
            g.op("Mul", [g.GI(0), g.GO(0)], [g.GI(0)]),
            g.op("Scale", [g.GI(0)], [g.GI(0)], scale=e),
        ]
    if g.O(0) in (g.I(0), g.I(1)):
        raise GradientError(
            f"gradient of Pow: cannot differentiate an in-place Pow with an exponent tensor (output '{g.O(0)}')"
        )
    bc = {k: g.arg(k) for k in ("broadcast", "axis", "axis_str", "order") if g.has_arg(k)}
    return [g.op("PowGradient", [g.GO(0), g.I(0), g.I(1), g.O(0)], [g.GI(0), g.GI(1)], **bc)]
