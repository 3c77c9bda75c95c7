"""Root-mean-square normalization: RMSNorm and RMSNormGradient (Caffe2 2020's rms_norm_op): X viewed as
(prod(dims[:axis]), prod(dims[axis:])), each row scaled by the reciprocal of its root mean square, then by
gamma and shifted by beta."""

from __future__ import annotations

import math

import numpy as np

from framework.errors import ShapeError
from framework.ops.gradient import gradient
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import FLOAT, INT, UNKNOWN, Arg, TensorSpec
from framework.ops.validation import expect_axis, expect_shape, expect_size

_AXIS = Arg("axis", INT, 1, "normalize over the dims from axis on")
_EPS = Arg("eps", FLOAT, 0.0, "added to the mean square")


def _axis(axis: int, ndim: int, where: str) -> int:
    return expect_axis(where, axis, ndim)


def _infer(args, ins):
    x = ins[0]
    if x.shape is None or len(x.shape) < 2:
        return [x, UNKNOWN]
    a = _axis(args.axis, len(x.shape), "RMSNorm")
    return [x, TensorSpec(tuple(x.shape[:a]), x.dtype)]


@register_op(
    "RMSNorm",
    inputs=3,
    outputs=2,
    args=[_AXIS, _EPS],
    input_docs=[("X", "input, at least 2-d"), ("gamma", "scale, X.dims[axis:] elements"), ("beta", "shift, as gamma")],
    output_docs=[("Y", "X * rrms * gamma + beta"), ("rrms", "1 / sqrt(mean(X^2) + eps) per row, X.dims[:axis]")],
    infer=_infer,
    category="normalization",
    input_types="float",
    same_type=[(0, 1, 2)],
)
class RMSNorm(Operator):
    """RMS normalization (Zhang and Sennrich 2019): each row x of X (viewed as (prod(dims[:axis]),
    prod(dims[axis:]))) becomes x * rrms * gamma + beta with rrms = 1 / sqrt(mean(x^2) + eps)."""

    def run(self) -> None:
        x, gamma, beta = self.input(0), self.input(1), self.input(2)
        if x.ndim < 2:
            raise ShapeError(f"{self.describe()}: RMSNorm requires input dim >= 2, got {list(x.shape)}")
        a = _axis(self.args.axis, x.ndim, self.describe())
        rows, d = math.prod(x.shape[:a]), math.prod(x.shape[a:])
        expect_size(self, 1, gamma, d, f"X's dims from axis {self.args.axis}")
        expect_size(self, 2, beta, d, f"X's dims from axis {self.args.axis}")
        x2 = x.reshape(rows, d)
        rrms = self.output(1, x.shape[:a], x.dtype)
        r = rrms.reshape(rows, 1)
        np.mean(np.square(x2), axis=1, keepdims=True, out=r)
        np.add(r, x.dtype.type(self.args.eps), out=r)
        np.sqrt(r, out=r)
        np.divide(x.dtype.type(1), r, out=r)
        y = self.output(0, x.shape, x.dtype).reshape(rows, d)
        np.multiply(x2, r, out=y)
        np.multiply(y, gamma.reshape(1, d), out=y)
        np.add(y, beta.reshape(1, d), out=y)


@register_op(
    "RMSNormGradient",
    inputs=4,
    outputs=3,
    args=[_AXIS, _EPS],  # eps comes along with the forward op's arguments; the gradient reads rrms
    input_docs=[("dY", "gradient of Y"), ("X", "forward input"), ("gamma", "forward scale"), ("rrms", "forward rrms")],
    output_docs=[("dX", "gradient of X"), ("dgamma", "gradient of gamma"), ("dbeta", "gradient of beta")],
    infer=lambda args, ins: [ins[1], ins[2], ins[2]],
    category="normalization",
    private=True,
    input_types="float",
    same_type=[(0, 1, 2, 3)],
)
class RMSNormGradient(Operator):
    """Per row: dX = rrms * dY * gamma - (sum(dY * X * gamma) / N) * rrms^3 * X; dgamma = sum over rows of
    dY * X * rrms, dbeta = sum over rows of dY (both shaped as gamma)."""

    def run(self) -> None:
        dy, x, gamma, rrms = (self.input(i) for i in range(4))
        a = _axis(self.args.axis, x.ndim, self.describe())
        rows, d = math.prod(x.shape[:a]), math.prod(x.shape[a:])
        expect_shape(self, 0, dy, x.shape, "X's shape")
        expect_size(self, 2, gamma, d, f"X's dims from axis {self.args.axis}")
        expect_size(self, 3, rrms, rows, "one per normalized row")
        dy2, x2, g = dy.reshape(rows, d), x.reshape(rows, d), gamma.reshape(1, d)
        r = rrms.reshape(rows, 1)
        ds = np.sum(dy2 * x2 * g, axis=1, keepdims=True)
        dx = self.output(0, x.shape, x.dtype)
        dgamma = self.output(1, gamma.shape, x.dtype)
        dbeta = self.output(2, gamma.shape, x.dtype)
        dx.reshape(rows, d)[...] = r * dy2 * g - (ds / x.dtype.type(d)) * r**3 * x2
        np.sum(dy2 * x2 * r, axis=0, out=dgamma.reshape(d))
        np.sum(dy2, axis=0, out=dbeta.reshape(d))


@gradient("RMSNorm")
def _rms_norm_grad(g):
    return [g.op("RMSNormGradient", [g.GO(0), g.I(0), g.I(1), g.O(1)], [g.GI(0), g.GI(1), g.GI(2)])]
