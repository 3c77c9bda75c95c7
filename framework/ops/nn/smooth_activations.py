"""Smooth activations: Sigmoid, Tanh, HardSigmoid, Softplus, Softsign, Swish, Gelu, with
their gradient ops.

Every forward op may run in place (output blob == input blob). Gradient ops follow Caffe2's
input conventions: most read the forward *output* ``Y`` and ``dY`` (so the forward may run in
place); Softsign and Gelu read ``X``; Swish reads ``X`` and ``Y``. Registration (schemas,
checks, gradient makers) is ``framework.ops.pointwise``'s: each class here is its maths.
"""

from __future__ import annotations

import math

import numpy as np

from framework.kernels import activation_jit
from framework.ops.erf import erf
from framework.ops.pointwise import Activation, PointwiseGradient, activation_op, pointwise_gradient, scratch
from framework.ops.schema import BOOL, FLOAT, Arg


def sigmoid_into(x: np.ndarray, out: np.ndarray) -> np.ndarray:
    """out = 1 / (1 + exp(-x)), computed as 0.5 * tanh(x / 2) + 0.5: no overflow for any x."""
    t = out.dtype.type
    np.multiply(x, t(0.5), out=out)
    np.tanh(out, out=out)
    out *= t(0.5)
    out += t(0.5)
    return out


def softplus_into(x: np.ndarray, out: np.ndarray, tmp: np.ndarray) -> np.ndarray:
    """out = log(1 + exp(x)) as max(x, 0) + log1p(exp(-|x|)) (no overflow); ``tmp`` is scratch
    shaped as x; out may alias x."""
    np.abs(x, out=tmp)
    np.negative(tmp, out=tmp)
    np.exp(tmp, out=tmp)
    np.log1p(tmp, out=tmp)
    np.maximum(x, x.dtype.type(0), out=out)
    out += tmp
    return out


# -- Sigmoid / Tanh / HardSigmoid --------------------------------------------------------------


@activation_op("Sigmoid", 4)
class Sigmoid(Activation):
    """Logistic sigmoid: Y = 1 / (1 + exp(-X)), elementwise."""

    def forward(self, x: np.ndarray, y: np.ndarray) -> None:
        sigmoid_into(x, y)


@pointwise_gradient(Sigmoid)
class SigmoidGradient(PointwiseGradient):
    """dX = dY * Y * (1 - Y)."""

    def grad(self, y: np.ndarray, dy: np.ndarray, dx: np.ndarray) -> None:
        tmp = scratch(self, "_tmp", y.shape, y.dtype)
        np.subtract(y.dtype.type(1), y, out=tmp)
        tmp *= y
        np.multiply(dy, tmp, out=dx)


@activation_op("Tanh", 4)
class Tanh(Activation):
    """Hyperbolic tangent, elementwise."""

    def forward(self, x: np.ndarray, y: np.ndarray) -> None:
        np.tanh(x, out=y)


@pointwise_gradient(Tanh)
class TanhGradient(PointwiseGradient):
    """dX = dY * (1 - Y^2)."""

    def grad(self, y: np.ndarray, dy: np.ndarray, dx: np.ndarray) -> None:
        tmp = scratch(self, "_tmp", y.shape, y.dtype)
        np.multiply(y, y, out=tmp)
        np.subtract(y.dtype.type(1), tmp, out=tmp)
        np.multiply(dy, tmp, out=dx)


@activation_op("HardSigmoid", 4, args=[Arg("alpha", FLOAT, 0.2, "slope"), Arg("beta", FLOAT, 0.5, "offset")])
class HardSigmoid(Activation):
    """Y = clip(alpha * X + beta, 0, 1), elementwise."""

    def forward(self, x: np.ndarray, y: np.ndarray) -> None:
        t = x.dtype.type
        np.multiply(x, t(self.args.alpha), out=y)
        y += t(self.args.beta)
        np.clip(y, t(0), t(1), out=y)


@pointwise_gradient(HardSigmoid)
class HardSigmoidGradient(PointwiseGradient):
    """dX = alpha * dY where 0 < Y < 1, else 0."""

    def grad(self, y: np.ndarray, dy: np.ndarray, dx: np.ndarray) -> None:
        mask = scratch(self, "_mask", y.shape, np.dtype(bool))
        inner = scratch(self, "_inner", y.shape, np.dtype(bool))
        np.greater(y, 0, out=mask)
        np.less(y, 1, out=inner)
        mask &= inner
        np.multiply(dy, mask, out=dx)
        dx *= dy.dtype.type(float(self.args.alpha))


# -- Softplus / Softsign -------------------------------------------------------------------------


@activation_op("Softplus", 4)
class Softplus(Activation):
    """Y = log(1 + exp(X)), computed as max(X, 0) + log1p(exp(-|X|)) (no overflow)."""

    def forward(self, x: np.ndarray, y: np.ndarray) -> None:
        softplus_into(x, y, scratch(self, "_tmp", x.shape, x.dtype))


@pointwise_gradient(Softplus)
class SoftplusGradient(PointwiseGradient):
    """dX = dY * (1 - exp(-Y))."""

    def grad(self, y: np.ndarray, dy: np.ndarray, dx: np.ndarray) -> None:
        tmp = scratch(self, "_tmp", y.shape, y.dtype)
        np.negative(y, out=tmp)
        np.expm1(tmp, out=tmp)
        np.negative(tmp, out=tmp)
        np.multiply(dy, tmp, out=dx)


@activation_op("Softsign", 3, y_doc="X / (1 + |X|), shaped as X")
class Softsign(Activation):
    """Y = X / (1 + |X|), elementwise."""

    def forward(self, x: np.ndarray, y: np.ndarray) -> None:
        tmp = scratch(self, "_tmp", x.shape, x.dtype)
        np.abs(x, out=tmp)
        tmp += x.dtype.type(1)
        np.divide(x, tmp, out=y)


@pointwise_gradient(Softsign, [("X", "input of Softsign"), ("dY", "gradient of Y")], refuse_in_place=True)
class SoftsignGradient(PointwiseGradient):
    """dX = dY / (1 + |X|)^2."""

    def grad(self, x: np.ndarray, dy: np.ndarray, dx: np.ndarray) -> None:
        tmp = scratch(self, "_tmp", x.shape, x.dtype)
        np.abs(x, out=tmp)
        tmp += x.dtype.type(1)
        np.multiply(tmp, tmp, out=tmp)
        np.divide(dy, tmp, out=dx)


# -- Swish / Gelu --------------------------------------------------------------------------------


@activation_op("Swish", 5)
class Swish(Activation):
    """Y = X * sigmoid(X) = X / (1 + exp(-X)), elementwise."""

    def forward(self, x: np.ndarray, y: np.ndarray) -> None:
        # x * sigmoid(x) = h * (1 + tanh(h)) with h = x / 2: four passes over the data instead of five
        t = x.dtype.type
        tmp = scratch(self, "_tmp", x.shape, x.dtype)
        h = tmp if y is x else y  # in place, h goes to the scratch buffer (x is read once more)
        np.multiply(x, t(0.5), out=h)
        other = y if h is tmp else tmp
        np.tanh(h, out=other)
        other += t(1)
        np.multiply(h, other, out=y)


@pointwise_gradient(Swish, [("X", "input of Swish"), ("Y", "output of Swish"), ("dY", "gradient of Y")])
class SwishGradient(PointwiseGradient):
    """dX = dY * (Y + sigmoid(X) * (1 - Y))."""

    def grad(self, x: np.ndarray, y: np.ndarray, dy: np.ndarray, dx: np.ndarray) -> None:
        s = sigmoid_into(x, scratch(self, "_sig", x.shape, x.dtype))
        tmp = scratch(self, "_tmp", x.shape, x.dtype)
        np.subtract(x.dtype.type(1), y, out=tmp)
        tmp *= s
        tmp += y
        np.multiply(dy, tmp, out=dx)


_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_INV_SQRT_2 = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_GELU_FAST_COEFF = 0.044715


def _fast_gelu_tanh(x: np.ndarray, out: np.ndarray) -> np.ndarray:
    """out = tanh(sqrt(2/pi) * (x + 0.044715 x^3))."""
    t = x.dtype.type
    np.multiply(x, x, out=out)
    out *= x
    out *= t(_GELU_FAST_COEFF)
    out += x
    out *= t(_SQRT_2_OVER_PI)
    np.tanh(out, out=out)
    return out


@activation_op(
    "Gelu",
    2,
    args=[
        Arg(
            "fast_gelu",
            BOOL,
            False,
            "use y = 0.5x * (1 + tanh(sqrt(2/pi) * (x + 0.044715x^3))) instead of the exact x * Phi(x)",
        )
    ],
)
class Gelu(Activation):
    """Gaussian error linear unit: Y = X * Phi(X), Phi the standard normal CDF (or the tanh form)."""

    def forward(self, x: np.ndarray, y: np.ndarray) -> None:
        if x.size >= 64 and activation_jit.fits(x, y) and activation_jit.gelu(x, y, self.args.fast_gelu):
            return  # one compiled pass (the same numbers for float32)
        t = x.dtype.type
        tmp = scratch(self, "_tmp", x.shape, x.dtype)
        if self.args.fast_gelu:
            _fast_gelu_tanh(x, tmp)
        else:
            np.multiply(x, t(_INV_SQRT_2), out=tmp)
            erf(tmp, out=tmp)
        tmp += t(1)
        tmp *= t(0.5)
        np.multiply(x, tmp, out=y)


@pointwise_gradient(Gelu, [("dY", "gradient of Y"), ("X", "input of Gelu")])
class GeluGradient(PointwiseGradient):
    """dX = dY * (Phi(X) + X * phi(X)) (or the derivative of the tanh form when fast_gelu)."""

    def grad(self, dy: np.ndarray, x: np.ndarray, dx: np.ndarray) -> None:
        t = x.dtype.type
        a = scratch(self, "_a", x.shape, x.dtype)
        b = scratch(self, "_b", x.shape, x.dtype)
        if self.args.fast_gelu:
            th = _fast_gelu_tanh(x, a)  # tanh(u)
            # d/dx [0.5 x (1 + tanh u)] = 0.5 (1 + tanh u) + 0.5 x (1 - tanh^2 u) u'
            # with u' = sqrt(2/pi) (1 + 3 * 0.044715 x^2)
            np.multiply(x, x, out=b)
            b *= t(3 * _GELU_FAST_COEFF * _SQRT_2_OVER_PI)
            b += t(_SQRT_2_OVER_PI)
            b *= x
            c = scratch(self, "_c", x.shape, x.dtype)
            np.multiply(th, th, out=c)
            np.subtract(t(1), c, out=c)
            b *= c
            b += th
            b += t(1)
            b *= t(0.5)
        else:
            np.multiply(x, t(_INV_SQRT_2), out=a)
            erf(a, out=a)
            a += t(1)
            a *= t(0.5)  # Phi(x)
            np.multiply(x, x, out=b)
            b *= t(-0.5)
            np.exp(b, out=b)
            b *= x
            b *= t(_INV_SQRT_2PI)  # x * phi(x)
            b += a
        np.multiply(dy, b, out=dx)
