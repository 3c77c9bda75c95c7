"""ONNXMeanVarianceNormalization: ONNX's ``MeanVarianceNormalization`` (opset 13).

``Y = (X - mean) / (sqrt(mean(X^2) - mean^2) + 1e-9)``, the means taken over ``axes`` (default
``[0, 2, 3]``), as ONNX's function body defines it; the variance is computed as mean((X - mean)^2),
equal but without the float32 cancellation. No gradient (an inference op of the ONNX backend).
"""

from __future__ import annotations

import numpy as np

from framework.errors import ShapeError
from framework.ops.gradient import no_gradient
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import INTS, Arg


@register_op(
    "ONNXMeanVarianceNormalization",
    args=[Arg("axes", INTS, [0, 2, 3], "axes the mean and variance are taken over (negative: from the end)")],
    input_docs=[("X", "input")],
    output_docs=[("Y", "X's shape and dtype")],
    infer=lambda args, ins: [ins[0]],
    category="onnx",
    input_types="float",
)
class ONNXMeanVarianceNormalization(Operator):
    """Zero mean, unit variance over ``axes``: ``(X - mean) / (std + 1e-9)``."""

    def run(self) -> None:
        x = self.input(0)
        axes = [int(a) for a in self.args.axes]
        if any(not -x.ndim <= a < x.ndim for a in axes) or len({a % max(x.ndim, 1) for a in axes}) != len(axes):
            raise ShapeError(f"{self.describe()}: axes {axes} do not fit the {x.ndim}-d X '{self.input_names[0]}'")
        ax = tuple(a % x.ndim for a in axes)
        with np.errstate(all="ignore"):
            mean = np.mean(x, axis=ax, keepdims=True)
            centered = x - mean
            # mean((X - mean)^2): ONNX's mean(X^2) - mean^2 in float32 cancels to noise when the values
            # lie close together (two values 1e-3 apart gave a 0.3% error)
            std = np.sqrt(np.mean(np.square(centered), axis=ax, keepdims=True))
            self.output(0, x.shape, x.dtype)[...] = centered / (std + x.dtype.type(1e-9))


no_gradient("ONNXMeanVarianceNormalization")
