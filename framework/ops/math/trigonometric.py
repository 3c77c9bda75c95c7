"""Elementwise inverse trigonometric and hyperbolic maths: Acos, Asin, Atan, Tan, Cosh, Sinh,
with Caffe2's gradient ops (``<Op>Gradient``) wired with Caffe2's input orders:
Acos/Asin/Atan/Tan read (X, dY); Cosh/Sinh read (dY, X).

One table: each op is its numpy function and the derivative factor f'(X) its gradient op
multiplies dY by. Float tensors only (Caffe2 registers float; float64 is accepted here as well).
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from framework.ops.math.unary import _ufunc, _unary
from framework.ops.pointwise import PointwiseGradient, pointwise_gradient, scratch

_X_DY = [("X", "forward input"), ("dY", "gradient of Y")]
_DY_X = [("dY", "gradient of Y"), ("X", "forward input")]


def _inv_sqrt_one_minus_sq(x, t):
    np.multiply(x, x, out=t)
    np.subtract(x.dtype.type(1), t, out=t)
    np.sqrt(t, out=t)
    np.reciprocal(t, out=t)


def _neg_inv_sqrt_one_minus_sq(x, t):
    _inv_sqrt_one_minus_sq(x, t)
    np.negative(t, out=t)


def _inv_one_plus_sq(x, t):
    np.multiply(x, x, out=t)
    np.add(t, x.dtype.type(1), out=t)
    np.reciprocal(t, out=t)


def _inv_cos_sq(x, t):
    np.cos(x, out=t)
    np.multiply(t, t, out=t)
    np.reciprocal(t, out=t)


# name -> (forward doc, numpy function, derivative factor (x, out), gradient doc, gradient input order)
_TABLE: dict[str, tuple[str, Callable, Callable, str, list]] = {
    "Acos": (
        "Y = arccos(X), elementwise (NaN outside [-1, 1]).",
        np.arccos,
        _neg_inv_sqrt_one_minus_sq,
        "dX = -dY / sqrt(1 - X^2).",
        _X_DY,
    ),
    "Asin": (
        "Y = arcsin(X), elementwise (NaN outside [-1, 1]).",
        np.arcsin,
        _inv_sqrt_one_minus_sq,
        "dX = dY / sqrt(1 - X^2).",
        _X_DY,
    ),
    "Atan": ("Y = arctan(X), elementwise.", np.arctan, _inv_one_plus_sq, "dX = dY / (1 + X^2).", _X_DY),
    "Tan": ("Y = tan(X), elementwise.", np.tan, _inv_cos_sq, "dX = dY / cos(X)^2.", _X_DY),
    "Cosh": (
        "Y = cosh(X), elementwise.",
        np.cosh,
        lambda x, t: np.sinh(x, out=t),
        "dX = dY * sinh(X) (Caffe2 writes it (exp(X) - exp(-X)) / 2).",
        _DY_X,
    ),
    "Sinh": ("Y = sinh(X), elementwise.", np.sinh, lambda x, t: np.cosh(x, out=t), "dX = dY * cosh(X).", _DY_X),
}


class _FactorGradient(PointwiseGradient):
    """dX = dY * f'(X), f'(X) computed into a scratch buffer by ``factor``."""

    factor: Callable = None
    x_first = True

    def grad(self, a, b, dx):
        x, dy = (a, b) if self.x_first else (b, a)
        t = scratch(self, "_t", x.shape, x.dtype)
        type(self).factor(x, t)
        np.multiply(dy, t, out=dx)


for _name, (_doc, _fn, _factor, _gdoc, _order) in _TABLE.items():
    _fwd = _unary(_name, _doc, _ufunc(_fn), flops=4)
    _cls = type(
        f"{_name}Gradient", (_FactorGradient,), {"__doc__": _gdoc, "factor": _factor, "x_first": _order is _X_DY}
    )
    pointwise_gradient(_fwd, _order)(_cls)
    globals()[_name], globals()[f"{_name}Gradient"] = _fwd, _cls
