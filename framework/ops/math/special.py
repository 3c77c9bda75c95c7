"""Elementwise powers, rounding and special functions: Cbrt, Cube, Ceil, Floor, Erf, Logit,
with Caffe2's gradient ops: CbrtGradient(dY, Y), CubeGradient(dY, X), ErfGradient(X, dY),
LogitGradient(X, dY). Ceil and Floor have no gradient in Caffe2 (asking for one is an error).
"""

from __future__ import annotations

import math

import numpy as np

from framework.ops.erf import erf
from framework.ops.gradient import should_not_do_gradient
from framework.ops.math.unary import _const, _ufunc, _unary
from framework.ops.operator import Operator
from framework.ops.pointwise import PointwiseGradient, pointwise_gradient, scratch
from framework.ops.schema import FLOAT, Arg


def _cube(self: Operator, x: np.ndarray, out: np.ndarray) -> None:
    t = scratch(self, "_sq", x.shape, x.dtype)
    np.multiply(x, x, out=t)
    np.multiply(t, x, out=out)


def _erf_kernel(self: Operator, x: np.ndarray, out: np.ndarray) -> None:
    erf(x, out=out)  # the framework's one erf (framework.ops.erf; Caffe2 calls std::erf)


def _logit(self: Operator, x: np.ndarray, out: np.ndarray) -> None:
    eps = _const(self, "eps", self.args.eps, x.dtype)
    hi = _const(self, "hi", 1.0 - self.args.eps, x.dtype)
    t = scratch(self, "_c", x.shape, x.dtype)
    np.clip(x, eps, hi, out=t)
    np.subtract(x.dtype.type(1), t, out=out)
    np.divide(t, out, out=out)
    np.log(out, out=out)


Cbrt = _unary("Cbrt", "Y = cube root of X, elementwise (negative X gives a negative root).", _ufunc(np.cbrt), flops=4)
Cube = _unary("Cube", "Y = X^3, elementwise (integer tensors too, wrapping as C++ does).", _cube, kinds="iuf", flops=2)
Ceil = _unary(
    "Ceil", "Y = ceil(X), elementwise. No gradient (Caffe2: not implemented; asking is an error).", _ufunc(np.ceil)
)
Floor = _unary(
    "Floor", "Y = floor(X), elementwise. No gradient (Caffe2: not implemented; asking is an error).", _ufunc(np.floor)
)
Erf = _unary("Erf", "Y = erf(X), the Gauss error function, elementwise.", _erf_kernel, flops=10)
_EPS = [Arg("eps", FLOAT, 1e-6, "X is clamped to [eps, 1 - eps] before the transform")]
Logit = _unary("Logit", "Y = log(C / (1 - C)) with C = X clamped to [eps, 1 - eps], elementwise.", _logit, args=_EPS)
should_not_do_gradient("Ceil", "Floor")


@pointwise_gradient(Cbrt, [("dY", "gradient of Y"), ("Y", "forward output")])
class CbrtGradient(PointwiseGradient):
    """dX = dY / (3 Y^2) (infinite where Y = 0, as Caffe2)."""

    def grad(self, dy, y, dx):
        t = scratch(self, "_t", y.shape, y.dtype)
        np.multiply(y, y, out=t)
        np.multiply(t, y.dtype.type(3), out=t)
        with np.errstate(divide="ignore", invalid="ignore"):
            np.divide(dy, t, out=dx)


@pointwise_gradient(Cube, [("dY", "gradient of Y"), ("X", "forward input")])
class CubeGradient(PointwiseGradient):
    """dX = 3 X^2 dY (float tensors; Caffe2 also runs it on integers)."""

    def grad(self, dy, x, dx):
        t = scratch(self, "_t", x.shape, x.dtype)
        np.multiply(x, x, out=t)
        np.multiply(t, x.dtype.type(3), out=t)
        np.multiply(dy, t, out=dx)


@pointwise_gradient(Erf, [("X", "forward input"), ("dY", "gradient of Y")])
class ErfGradient(PointwiseGradient):
    """dX = 2 / sqrt(pi) * exp(-X^2) * dY."""

    def grad(self, x, dy, dx):
        t = scratch(self, "_t", x.shape, x.dtype)
        np.multiply(x, x, out=t)
        np.negative(t, out=t)
        np.exp(t, out=t)
        np.multiply(t, x.dtype.type(2.0 / math.sqrt(math.pi)), out=t)
        np.multiply(t, dy, out=dx)


@pointwise_gradient(Logit, [("X", "forward input"), ("dY", "gradient of Y")])
class LogitGradient(PointwiseGradient):
    """dX = dY / (X (1 - X)) where eps <= X <= 1 - eps, else 0."""

    def grad(self, x, dy, dx):
        eps = self.args.eps
        t = scratch(self, "_t", x.shape, x.dtype)
        np.subtract(x.dtype.type(1), x, out=t)
        np.multiply(t, x, out=t)
        outside = (x < eps) | (x > 1.0 - eps)
        with np.errstate(divide="ignore", invalid="ignore"):
            np.divide(dy, t, out=dx)
        dx[outside] = 0
