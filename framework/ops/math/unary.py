"""Elementwise unary math: Negative, Abs, Exp, Log, Sqr, Sqrt, Rsqrt, Sign, Scale,
Clip, Cos, Sin, Reciprocal, with their gradients (Caffe2's gradient ops or
Caffe2's decompositions into other ops, e.g. Exp's gradient is Mul(Y, dY)).
All are in-place capable.
"""

from __future__ import annotations

from functools import partial
from typing import Any, Callable

import numpy as np

from framework.ops.gradient import gradient, should_not_do_gradient
from framework.ops.math.elementwise import bind_ufunc, check_kind
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import FLOAT, Arg, pointwise_cost, same_as_input

_IN = [("X", "input tensor")]


class _Unary(Operator):
    kinds = "f"
    kernel: Callable = None  # (op, x, out) -> None

    def run(self) -> None:
        x = self.input(0)
        if x.dtype.kind not in self.kinds:
            check_kind(self, 0, x, self.kinds)
        self.kernel(x, self.output(0, x.shape, x.dtype))

    def compile(self) -> Any:
        """The kernel bound to the current arrays (the nets' fast path, see framework.net.program)."""
        x, out = self.input(0), self.outputs[0].array
        uf = getattr(self.kernel, "ufunc", None)
        return bind_ufunc(uf, x, out=out) if uf is not None else partial(self.kernel, x, out)


def _unary(name: str, doc: str, kernel: Callable, *, kinds: str = "f", flops: float = 1, args: Any = ()) -> type:
    cls = type(name, (_Unary,), {"__doc__": doc, "kernel": kernel, "kinds": kinds})
    return register_op(
        name,
        args=args,
        input_docs=_IN,
        output_docs=[("Y", "result, shaped and typed as X")],
        allow_inplace={(0, 0)},
        infer=same_as_input(0),
        cost=pointwise_cost(flops),
        category="math",
    )(cls)


def _ufunc(f: Callable) -> Callable:
    def kernel(self: Operator, x: np.ndarray, out: np.ndarray) -> None:
        f(x, out=out)

    kernel.ufunc = f
    return kernel


def _rsqrt(self: Operator, x: np.ndarray, out: np.ndarray) -> None:
    np.sqrt(x, out=out)
    np.reciprocal(out, out=out)


def _sign(self: Operator, x: np.ndarray, out: np.ndarray) -> None:
    np.sign(x, out=out)


def _const(self: Operator, name: str, value: float, dtype: np.dtype) -> np.ndarray:
    """A 0-d constant of ``dtype`` cached on the op (0-d arrays are the fastest ufunc operands)."""
    cache = self.__dict__.setdefault("_consts", {})
    key = (name, dtype)
    c = cache.get(key)
    if c is None:
        c = cache[key] = np.array(value, dtype=dtype)
    return c


def _scale(self: Operator, x: np.ndarray, out: np.ndarray) -> None:
    np.multiply(x, _const(self, "scale", self.args.scale, x.dtype), out=out)


def _clip(self: Operator, x: np.ndarray, out: np.ndarray) -> None:
    lo = _const(self, "min", self.args.min, x.dtype)
    hi = _const(self, "max", self.args.max, x.dtype)
    np.clip(x, lo, hi, out=out)


_FMAX = float(np.finfo(np.float32).max)

Negative = _unary("Negative", "Y = -X, elementwise.", _ufunc(np.negative), kinds="iuf")
Abs = _unary("Abs", "Y = |X|, elementwise.", _ufunc(np.absolute), kinds="iuf")
Exp = _unary("Exp", "Y = exp(X), elementwise.", _ufunc(np.exp), flops=4)
Log = _unary("Log", "Y = log(X), elementwise (natural logarithm).", _ufunc(np.log), flops=4)
Sqr = _unary("Sqr", "Y = X * X, elementwise.", _ufunc(np.square), kinds="iuf")
Sqrt = _unary("Sqrt", "Y = sqrt(X), elementwise.", _ufunc(np.sqrt), flops=2)
Rsqrt = _unary("Rsqrt", "Y = 1 / sqrt(X), elementwise.", _rsqrt, flops=3)
Sign = _unary("Sign", "Y = sign(X): -1, 0 or 1, elementwise.", _sign, kinds="iuf")
Cos = _unary("Cos", "Y = cos(X), elementwise.", _ufunc(np.cos), flops=4)
Sin = _unary("Sin", "Y = sin(X), elementwise.", _ufunc(np.sin), flops=4)
Reciprocal = _unary("Reciprocal", "Y = 1 / X, elementwise.", _ufunc(np.reciprocal))
Scale = _unary(
    "Scale",
    "Y = scale * X, elementwise.",
    _scale,
    args=[Arg("scale", FLOAT, 1.0, "the factor (a float)")],
)
Clip = _unary(
    "Clip",
    "Y = min(max(X, min), max), elementwise.",
    _clip,
    flops=2,
    args=[
        Arg("min", FLOAT, -_FMAX, "lower bound (default: lowest float32)"),
        Arg("max", FLOAT, _FMAX, "upper bound (default: largest float32)"),
    ],
)
should_not_do_gradient("Sign")


# -- gradient ops ----------------------------------------------------------------------------------


class _UnaryGrad(Operator):
    """Two inputs (a forward value and dY, in ``order``), one output dX shaped as dY."""

    dy_index = 1
    kernel: Callable = None  # (op, v, dy, out)

    def run(self) -> None:
        v = self.input(1 - self.dy_index)
        dy = self.input(self.dy_index)
        out = self.output(0, dy.shape, dy.dtype)
        if dy.ndim == 0:  # numpy ufuncs on 0-d arrays return scalars: compute on 1-element views
            v, dy, out = v.reshape(1), dy.reshape(1), out.reshape(1)
        self.kernel(v, dy, out)


def _unary_grad(
    name: str, doc: str, first: tuple[str, str], kernel: Callable, *, dy_index: int = 1, args: Any = ()
) -> type:
    """Register the gradient op ``name`` = ``<Forward>Gradient`` reading ``first`` (X: the forward
    input, or Y: its output) and dY in that order (dY first with ``dy_index=0``), and the forward
    op's gradient maker that wires them."""
    dy = ("dY", "gradient of Y")
    docs = [first, dy] if dy_index == 1 else [dy, first]
    cls = type(name, (_UnaryGrad,), {"__doc__": doc, "kernel": kernel, "dy_index": dy_index})
    forward = name[: -len("Gradient")]

    def maker(g):
        value = g.I(0) if first[0] == "X" else g.O(0)
        return [g.op(name, [value, g.GO(0)] if dy_index == 1 else [g.GO(0), value], [g.GI(0)])]

    maker.__name__ = maker.__qualname__ = f"_{forward.lower()}_grad_maker"  # the name the catalogue shows
    gradient(forward)(maker)
    return register_op(
        name,
        inputs=2,
        args=args,
        input_docs=docs,
        output_docs=[("dX", "gradient of X")],
        allow_inplace={(dy_index, 0)},
        infer=same_as_input(dy_index),
        cost=pointwise_cost(2),
        category="math",
        private=True,
        input_types="float",
        same_type=[(0, 1)],
        same_shape=[(0, 1)],
    )(cls)


def _abs_grad(self: Operator, x: np.ndarray, dy: np.ndarray, out: np.ndarray) -> None:
    np.multiply(np.sign(x), dy, out=out)


def _sin_grad(self: Operator, x: np.ndarray, dy: np.ndarray, out: np.ndarray) -> None:
    np.multiply(np.cos(x), dy, out=out)


def _cos_grad(self: Operator, x: np.ndarray, dy: np.ndarray, out: np.ndarray) -> None:
    t = np.sin(x)
    np.negative(t, out=t)
    np.multiply(t, dy, out=out)


def _rsqrt_grad(self: Operator, y: np.ndarray, dy: np.ndarray, out: np.ndarray) -> None:
    t = y * y
    np.multiply(t, y, out=t)
    np.multiply(t, _const(self, "h", -0.5, t.dtype), out=t)
    np.multiply(t, dy, out=out)


def _reciprocal_grad(self: Operator, y: np.ndarray, dy: np.ndarray, out: np.ndarray) -> None:
    t = y * y
    np.negative(t, out=t)
    np.multiply(t, dy, out=out)


def _clip_grad(self: Operator, y: np.ndarray, dy: np.ndarray, out: np.ndarray) -> None:
    lo = _const(self, "min", self.args.min, y.dtype)
    hi = _const(self, "max", self.args.max, y.dtype)
    inside = (y > lo) & (y < hi)
    np.multiply(dy, inside, out=out)


_unary_grad("AbsGradient", "dX = sign(X) * dY.", ("X", "forward input"), _abs_grad)
_unary_grad("SinGradient", "dX = cos(X) * dY.", ("X", "forward input"), _sin_grad)
_unary_grad("CosGradient", "dX = -sin(X) * dY.", ("X", "forward input"), _cos_grad)
_unary_grad("RsqrtGradient", "dX = -0.5 * Y^3 * dY.", ("Y", "forward output"), _rsqrt_grad, dy_index=0)
_unary_grad("ReciprocalGradient", "dX = -Y^2 * dY.", ("Y", "forward output"), _reciprocal_grad)
_unary_grad(
    "ClipGradient",
    "dX = dY where min < Y < max, else 0.",
    ("Y", "forward output"),
    _clip_grad,
    args=[Arg("min", FLOAT, -_FMAX, "forward lower bound"), Arg("max", FLOAT, _FMAX, "forward upper bound")],
)


# -- gradient makers that decompose into other ops (as Caffe2's) ---------------------------------


@gradient("Negative", copy_arguments=False)
def _negative_grad(g):
    return [g.op("Negative", [g.GO(0)], [g.GI(0)])]


@gradient("Scale")
def _scale_grad(g):
    return [g.op("Scale", [g.GO(0)], [g.GI(0)])]


@gradient("Exp", copy_arguments=False)
def _exp_grad(g):
    return [g.op("Mul", [g.O(0), g.GO(0)], [g.GI(0)])]


@gradient("Log", copy_arguments=False)
def _log_grad(g):
    return [g.op("Div", [g.GO(0), g.I(0)], [g.GI(0)])]


@gradient("Sqr", copy_arguments=False)
def _sqr_grad(g):
    return [
        g.op("Scale", [g.GO(0)], [g.GI(0)], scale=2.0),
        g.op("Mul", [g.GI(0), g.I(0)], [g.GI(0)]),
    ]


@gradient("Sqrt", copy_arguments=False)
def _sqrt_grad(g):
    return [
        g.op("Scale", [g.GO(0)], [g.GI(0)], scale=0.5),
        g.op("Div", [g.GI(0), g.O(0)], [g.GI(0)]),
    ]
