"""ONNXDet: ONNX's Det, the determinant of the trailing square matrices (LU, numpy.linalg).
Not differentiable here (inference op)."""

from __future__ import annotations

from typing import Any

import numpy as np

from framework.errors import ShapeError
from framework.ops.gradient import no_gradient
from framework.ops.onnx.reduce import _check_kind
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import TensorSpec


def _infer(args: Any, ins: list) -> list:
    s = ins[0].shape
    return [TensorSpec(None if s is None else tuple(s[:-2]), ins[0].dtype)]


@register_op(
    "ONNXDet",
    input_docs=[("X", "floats, shape [*, M, M]")],
    output_docs=[("Y", "the determinants, shape [*]")],
    infer=_infer,
    category="onnx",
    input_types="any",
    ranks={0: (2, None)},
)
class ONNXDet(Operator):
    """ONNX Det: Y[...] = det(X[..., :, :]) for each trailing M x M matrix (LU factorization;
    float16/bfloat16 compute in float32 and round back)."""

    def run(self) -> None:
        x = self.input(0)
        low = _check_kind(self, x, ("float",))
        if x.shape[-1] != x.shape[-2]:
            raise ShapeError(
                f"{self.describe()}: input '{self.input_names[0]}' has shape {list(x.shape)}; "
                "its last two dims must be equal (square matrices)"
            )
        v = x.astype(np.float32) if low else x
        with np.errstate(all="ignore"):
            y = np.linalg.det(v) if x.size else np.ones(x.shape[:-2], v.dtype)
        out = self.output(0, x.shape[:-2], x.dtype)
        out[...] = y


no_gradient("ONNXDet")
