"""More activations: ReluN (min(max(X, 0), n)), ThresholdedRelu (X where X > alpha), Mish
(X tanh(softplus(X))) with Caffe2's gradient ops ReluNGradient(Y, dY),
ThresholdedReluGradient(Y, dY), MishGradient(X, Y, dY); and Glu (gated linear unit, no
gradient in Caffe2)."""

from __future__ import annotations

from typing import Any

import numpy as np

from framework.errors import ShapeError
from framework.ops.gradient import should_not_do_gradient
from framework.ops.nn.smooth_activations import sigmoid_into, softplus_into
from framework.ops.operator import Operator
from framework.ops.pointwise import (
    Activation,
    PointwiseGradient,
    activation_op,
    float_input,
    pointwise_gradient,
    scratch,
)
from framework.ops.registry import register_op
from framework.ops.schema import FLOAT, INT, Arg, TensorSpec, pointwise_cost
from framework.ops.validation import expect_in_range


@activation_op("ReluN", 2, args=[Arg("n", FLOAT, 6.0, "the upper bound (must be positive)")])
class ReluN(Activation):
    """Y = min(max(X, 0), n), elementwise (n = 6: Relu6)."""

    def setup(self) -> None:
        if self.args.n <= 0:
            raise self.arg_error(f"'n' must be positive, got {self.args.n}")

    def forward(self, x: np.ndarray, y: np.ndarray) -> None:
        np.clip(x, x.dtype.type(0), x.dtype.type(self.args.n), out=y)


@pointwise_gradient(ReluN)
class ReluNGradient(PointwiseGradient):
    """dX = dY where 0 < Y < n, else 0."""

    def grad(self, y: np.ndarray, dy: np.ndarray, dx: np.ndarray) -> None:
        inside = (y > 0) & (y < y.dtype.type(self.args.n))
        np.multiply(dy, inside, out=dx)


@activation_op("ThresholdedRelu", 1, args=[Arg("alpha", FLOAT, 1.0, "the threshold")])
class ThresholdedRelu(Activation):
    """Y = X where X > alpha, else 0, elementwise."""

    def forward(self, x: np.ndarray, y: np.ndarray) -> None:
        np.multiply(x, x > x.dtype.type(self.args.alpha), out=y)


@pointwise_gradient(ThresholdedRelu)
class ThresholdedReluGradient(PointwiseGradient):
    """dX = dY where Y > 0, else 0 (Caffe2's rule: it reads Y, not X)."""

    def grad(self, y: np.ndarray, dy: np.ndarray, dx: np.ndarray) -> None:
        np.multiply(dy, y > 0, out=dx)


@activation_op("Mish", 6)
class Mish(Activation):
    """Y = X * tanh(softplus(X)), softplus(X) = log(1 + exp(X)), elementwise."""

    def forward(self, x: np.ndarray, y: np.ndarray) -> None:
        sp = scratch(self, "_sp", x.shape, x.dtype)
        tmp = scratch(self, "_tmp", x.shape, x.dtype)
        softplus_into(x, sp, tmp)
        np.tanh(sp, out=sp)
        np.multiply(x, sp, out=y)


@pointwise_gradient(
    Mish, [("X", "forward input"), ("Y", "forward output"), ("dY", "gradient of Y")], refuse_in_place=True
)
class MishGradient(PointwiseGradient):
    """dX = dY * (tanh(sp) + X sigmoid(X) (1 - tanh(sp)^2)), sp = softplus(X)."""

    def grad(self, x: np.ndarray, y: np.ndarray, dy: np.ndarray, dx: np.ndarray) -> None:
        sp = scratch(self, "_sp", x.shape, x.dtype)
        tmp = scratch(self, "_tmp", x.shape, x.dtype)
        softplus_into(x, sp, tmp)
        np.tanh(sp, out=sp)
        sigmoid_into(x, tmp)
        t = x * tmp * (1 - sp * sp) + sp
        np.multiply(dy, t, out=dx)


def _glu_split(args: Any, shape: tuple, where: str) -> int:
    d = args.dim if args.dim != -1 else len(shape) - 1
    return expect_in_range(where, "dim", d, 0, len(shape), of=f"a {len(shape)}-D input")


def _glu_infer(args: Any, ins: list) -> list:
    x = ins[0]
    if x.shape is None or not x.shape:
        return [TensorSpec(None, x.dtype)]
    d = _glu_split(args, tuple(x.shape), "Glu")
    s = list(x.shape)
    s[d] = s[d] // 2 if s[d] is not None else None
    return [TensorSpec(tuple(s), x.dtype)]


@register_op(
    "Glu",
    args=[Arg("dim", INT, -1, "the dimension split in two halves A, B (-1: the last)")],
    input_docs=[("X", "float tensor whose `dim` size is even")],
    output_docs=[("Y", "A * sigmoid(B), half as large along `dim`")],
    infer=_glu_infer,
    cost=pointwise_cost(5),
    category="activation",
)
class Glu(Operator):
    """Gated linear unit: X is split along `dim` into halves A and B; Y = A * sigmoid(B).
    Only -1 counts from the end (as Caffe2). No gradient (Caffe2 registers none)."""

    def run(self) -> None:
        x = float_input(self, 0)
        if x.ndim == 0:
            raise ShapeError(f"{self.describe()}: X ('{self.input_names[0]}') must have at least 1 dim")
        d = _glu_split(self.args, x.shape, self.describe())
        if x.shape[d] % 2:
            raise ShapeError(f"{self.describe()}: X ('{self.input_names[0]}') has odd size {x.shape[d]} along dim {d}")
        a, b = np.split(x, 2, axis=d)
        s = np.empty_like(b)
        sigmoid_into(b, s)
        np.multiply(a, s, out=self.output(0, a.shape, x.dtype))


should_not_do_gradient("Glu")
