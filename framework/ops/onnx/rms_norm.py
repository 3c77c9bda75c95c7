"""ONNXRMSNormalization: ONNX's ``RMSNormalization`` (opset 23).

``Y = X / sqrt(mean(X^2 over the axes from axis on) + epsilon) * scale``, with ``scale``
broadcast to ``X.shape[axis:]`` (numpy rules, right-aligned). Computed in X's dtype, as ONNX's
reference does with ``stash_type`` 1 on float32 input. No gradient here (an inference op of the
ONNX backend).
"""

from __future__ import annotations

import numpy as np

from framework.errors import ShapeError
from framework.ops.gradient import no_gradient
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import FLOAT, INT, Arg


@register_op(
    "ONNXRMSNormalization",
    inputs=2,
    args=[
        Arg("axis", INT, -1, "first normalized axis (negative: from the end)"),
        Arg("epsilon", FLOAT, 1e-5, "added to the mean square"),
    ],
    input_docs=[("X", "input"), ("scale", "broadcastable to X.shape[axis:]")],
    output_docs=[("Y", "X's shape and dtype")],
    infer=lambda args, ins: [ins[0]],
    category="onnx",
    input_types="float",
    same_type=[(0, 1)],
    ranks={0: (1, None)},
    axes={"axis": 0},
)
class ONNXRMSNormalization(Operator):
    """RMS normalization over the axes from ``axis`` on, then scaled: ``X / sqrt(mean(X^2) + eps) * scale``."""

    def run(self) -> None:
        x, scale = self.input(0), self.input(1)
        axis = int(self.args.axis) % x.ndim
        inner = x.shape[axis:]
        if scale.ndim > len(inner) or any(s not in (1, d) for s, d in zip(scale.shape[::-1], inner[::-1])):
            raise ShapeError(
                f"{self.describe()}: scale '{self.input_names[1]}' shape {scale.shape} does not "
                f"broadcast to X.shape[{axis}:] = {inner}"
            )
        y = self.output(0, x.shape, x.dtype)
        with np.errstate(all="ignore"):
            ms = np.mean(np.square(x), axis=tuple(range(axis, x.ndim)), keepdims=True) if x.size else x
            y[...] = x * np.reciprocal(np.sqrt(ms + x.dtype.type(self.args.epsilon))) * scale


no_gradient("ONNXRMSNormalization")
