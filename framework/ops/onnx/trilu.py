"""ONNX Trilu and EyeLike: triangular and diagonal masks of matrices.

- ``ONNXTrilu(x)``: the upper (``upper=1``) or lower triangle of each matrix in x's last two dims,
  from diagonal ``k`` (positive above the main diagonal); the rest is zero.
- ``ONNXEyeLike(x)``: a 2-D tensor of x's shape with ones on diagonal ``k`` and zeros elsewhere, of
  x's type or the ``dtype`` argument (an ONNX TensorProto type code, 0 = x's type).

No gradients: these ops serve the ONNX backend (inference).
"""

from __future__ import annotations

import numpy as np

from framework.errors import ArgumentError
from framework.ops.gradient import no_gradient
from framework.ops.onnx.common import MOVABLE, NUM_OR_BOOL
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import INT, Arg, TensorSpec, same_as_input


@register_op(
    "ONNXTrilu",
    inputs=1,
    args=[
        Arg("k", INT, 0, "the diagonal: 0 main, > 0 above, < 0 below"),
        Arg("upper", INT, 1, "1: keep the upper triangle, 0: the lower", choices=(0, 1)),
    ],
    input_docs=[("x", "tensor of rank >= 2 (matrices in the last two dims)")],
    output_docs=[("y", "x with the other triangle zeroed")],
    input_types=MOVABLE,
    ranks={0: (2, None)},
    infer=same_as_input(0),
    category="onnx",
)
class ONNXTrilu(Operator):
    """ONNX Trilu (opset 14): keeps x[..., i, j] where j - i >= k (upper) or j - i <= k (lower)."""

    def run(self) -> None:
        x = self.input(0)
        y = self.output(0, x.shape, x.dtype)
        n, m = x.shape[-2:]
        j_minus_i = np.arange(m)[None, :] - np.arange(n)[:, None]
        keep = j_minus_i >= self.args.k if self.args.upper else j_minus_i <= self.args.k
        y[...] = np.where(keep, x, np.zeros((), x.dtype))


_ONNX_TYPES = {1: np.float32, 2: np.uint8, 3: np.int8, 4: np.uint16, 5: np.int16, 6: np.int32, 7: np.int64,
               9: np.bool_, 10: np.float16, 11: np.float64, 12: np.uint32, 13: np.uint64}  # fmt: skip


def _eye_dtype(args, x_dtype):
    return np.dtype(_ONNX_TYPES[args.dtype]) if args.dtype else x_dtype


@register_op(
    "ONNXEyeLike",
    inputs=1,
    args=[
        Arg("k", INT, 0, "the diagonal of ones: 0 main, > 0 above, < 0 below"),
        Arg(
            "dtype", INT, 0, "ONNX TensorProto type code of the output; 0: x's type", choices=(0,) + tuple(_ONNX_TYPES)
        ),  # fmt: skip
    ],
    input_docs=[("x", "2-D tensor: only its shape (and type) is used")],
    output_docs=[("y", "ones on diagonal k, zeros elsewhere")],
    input_types=NUM_OR_BOOL,
    ranks={0: 2},
    infer=lambda args, ins: [TensorSpec(ins[0].shape, _eye_dtype(args, ins[0].dtype) if ins[0].dtype else None)],
    category="onnx",
)
class ONNXEyeLike(Operator):
    """ONNX EyeLike (opsets 9, 22): y[i, j] = 1 where j - i == k."""

    def setup(self) -> None:
        if self.args.dtype not in (0,) + tuple(_ONNX_TYPES):
            raise ArgumentError(f"{self.describe()}: dtype {self.args.dtype} is not a supported ONNX type")

    def run(self) -> None:
        x = self.input(0)
        y = self.output(0, x.shape, _eye_dtype(self.args, x.dtype))
        y[...] = np.eye(x.shape[0], x.shape[1], self.args.k, dtype=y.dtype)


no_gradient("ONNXTrilu", "ONNXEyeLike")
