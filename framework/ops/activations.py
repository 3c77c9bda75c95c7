"""Activations: Relu, LeakyRelu, PRelu, Elu, Selu, Sigmoid, Tanh, Softplus,
Softsign, Swish, Gelu, HardSigmoid, with their gradient ops."""

from __future__ import annotations

import numpy as np

from framework.ops.gradient import gradient
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import pointwise_cost, same_as_input


@register_op(
    "Relu",
    input_docs=[("X", "input tensor")],
    output_docs=[("Y", "max(X, 0), same shape as X")],
    allow_inplace={(0, 0)},
    infer=same_as_input(0),
    cost=pointwise_cost(1),
    category="activation",
)
class Relu(Operator):
    """Rectified linear unit: Y = max(X, 0), elementwise."""

    def run(self) -> None:
        x = self.input(0)
        np.maximum(x, x.dtype.type(0), out=self.output(0, x.shape, x.dtype))


@register_op(
    "ReluGradient",
    inputs=2,
    input_docs=[("Y", "output of Relu"), ("dY", "gradient of Y")],
    output_docs=[("dX", "gradient of X")],
    allow_inplace={(1, 0)},
    infer=same_as_input(1),
    category="activation",
    private=True,
)
class ReluGradient(Operator):
    """dX = dY where Y > 0, else 0."""

    def run(self) -> None:
        y, dy = self.input(0), self.input(1)
        dx = self.output(0, dy.shape, dy.dtype)
        np.multiply(dy, y > 0, out=dx)


@gradient("Relu")
def _relu_grad(g):
    return [g.op("ReluGradient", [g.O(0), g.GO(0)], [g.GI(0)])]
