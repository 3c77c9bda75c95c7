"""Elementwise inverse trigonometric and hyperbolic maths: Acos, Asin, Atan, Tan, Cosh, Sinh,
with Caffe2's gradient ops (``<Op>Gradient``) wired with Caffe2's input orders:
Acos/Asin/Atan/Tan read (X, dY); Cosh/Sinh read (dY, X).

Float tensors only (Caffe2 registers float; float64 is accepted here as well).
"""

from __future__ import annotations

import numpy as np

from framework.ops.math.unary import _unary
from framework.ops.operator import Operator
from framework.ops.pointwise import PointwiseGradient, pointwise_gradient, scratch


def _ufunc(f):
    def kernel(self: Operator, x: np.ndarray, out: np.ndarray) -> None:
        f(x, out=out)

    kernel.ufunc = f
    return kernel


Acos = _unary("Acos", "Y = arccos(X), elementwise (NaN outside [-1, 1]).", _ufunc(np.arccos), flops=4)
Asin = _unary("Asin", "Y = arcsin(X), elementwise (NaN outside [-1, 1]).", _ufunc(np.arcsin), flops=4)
Atan = _unary("Atan", "Y = arctan(X), elementwise.", _ufunc(np.arctan), flops=4)
Tan = _unary("Tan", "Y = tan(X), elementwise.", _ufunc(np.tan), flops=4)
Cosh = _unary("Cosh", "Y = cosh(X), elementwise.", _ufunc(np.cosh), flops=4)
Sinh = _unary("Sinh", "Y = sinh(X), elementwise.", _ufunc(np.sinh), flops=4)

_X_DY = [("X", "forward input"), ("dY", "gradient of Y")]
_DY_X = [("dY", "gradient of Y"), ("X", "forward input")]


def _one_minus_sq(op: Operator, x: np.ndarray) -> np.ndarray:
    t = scratch(op, "_t", x.shape, x.dtype)
    np.multiply(x, x, out=t)
    np.subtract(x.dtype.type(1), t, out=t)
    return t


@pointwise_gradient(Acos, _X_DY)
class AcosGradient(PointwiseGradient):
    """dX = -dY / sqrt(1 - X^2)."""

    def grad(self, x, dy, dx):
        t = _one_minus_sq(self, x)
        np.sqrt(t, out=t)
        np.divide(dy, t, out=dx)
        np.negative(dx, out=dx)


@pointwise_gradient(Asin, _X_DY)
class AsinGradient(PointwiseGradient):
    """dX = dY / sqrt(1 - X^2)."""

    def grad(self, x, dy, dx):
        t = _one_minus_sq(self, x)
        np.sqrt(t, out=t)
        np.divide(dy, t, out=dx)


@pointwise_gradient(Atan, _X_DY)
class AtanGradient(PointwiseGradient):
    """dX = dY / (1 + X^2)."""

    def grad(self, x, dy, dx):
        t = scratch(self, "_t", x.shape, x.dtype)
        np.multiply(x, x, out=t)
        np.add(t, x.dtype.type(1), out=t)
        np.divide(dy, t, out=dx)


@pointwise_gradient(Tan, _X_DY)
class TanGradient(PointwiseGradient):
    """dX = dY / cos(X)^2."""

    def grad(self, x, dy, dx):
        t = scratch(self, "_t", x.shape, x.dtype)
        np.cos(x, out=t)
        np.multiply(t, t, out=t)
        np.divide(dy, t, out=dx)


@pointwise_gradient(Cosh, _DY_X)
class CoshGradient(PointwiseGradient):
    """dX = dY * sinh(X) (Caffe2 writes it (exp(X) - exp(-X)) / 2)."""

    def grad(self, dy, x, dx):
        t = scratch(self, "_t", x.shape, x.dtype)
        np.sinh(x, out=t)
        np.multiply(dy, t, out=dx)


@pointwise_gradient(Sinh, _DY_X)
class SinhGradient(PointwiseGradient):
    """dX = dY * cosh(X)."""

    def grad(self, dy, x, dx):
        t = scratch(self, "_t", x.shape, x.dtype)
        np.cosh(x, out=t)
        np.multiply(dy, t, out=dx)
