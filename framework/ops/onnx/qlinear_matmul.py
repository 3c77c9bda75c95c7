"""ONNX's integer matrix products: ONNXMatMulInteger and ONNXQLinearMatMul.

Both take numpy ``matmul`` operands (2-D, or N-D batched with broadcasting) of 8-bit integers and
subtract the zero points first (scalars, or per row of A / per column of B), and multiply the centred
operands in float32 BLAS over K-slices short enough to stay exact (every partial sum below 2**24), summed in
float64. MatMulInteger returns the exact int32 product. QLinearMatMul requantizes it:
``saturate(rint(C * (a_scale * b_scale / y_scale)) + y_zero_point)`` in y_zero_point's type
(round half to even), as ONNX's reference computes it. No gradient (integer ops).
"""

from __future__ import annotations

import numpy as np

from framework.errors import ShapeError
from framework.ops.gradient import no_gradient
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import UNKNOWN, TensorSpec

_I32 = np.dtype(np.int32)


def _mm_shape(a, b):
    if a.shape is None or b.shape is None or len(a.shape) < 2 or len(b.shape) < 2:
        return None
    try:
        batch = np.broadcast_shapes(tuple(a.shape[:-2]), tuple(b.shape[:-2]))
    except (ValueError, TypeError):
        return None
    return tuple(batch) + (a.shape[-2], b.shape[-1])


def _centered(op: Operator, i: int, x: np.ndarray, zi: int | None, row: bool) -> tuple[np.ndarray, int]:
    """(x - zero point as float32, the largest magnitude it can have); the zero point a scalar or one per row
    (A) / column (B)."""
    info = np.iinfo(x.dtype)
    if zi is None:
        return x.astype(np.float32), max(-info.min, info.max)
    z = op.input(zi)
    if z.dtype != x.dtype:
        raise ShapeError(f"{op.describe()}: zero point '{op.input_names[zi]}' is {z.dtype}, its operand {x.dtype}")
    if z.size == 1:
        zc = z.reshape(-1)[:1].astype(np.int32)
    else:
        n = x.shape[-2] if row else x.shape[-1]
        if z.ndim != 1 or z.size != n:
            raise ShapeError(
                f"{op.describe()}: zero point '{op.input_names[zi]}' has shape {z.shape}; expected a scalar or ({n},)"
            )
        zc = z.astype(np.int32)
    amax = max(int(zc.max()) - info.min, info.max - int(zc.min())) if zc.size else 0
    zf = zc.astype(np.float32)
    if z.size == 1:
        zf = zf[0]
    elif row:
        zf = zf.reshape(-1, 1)
    return np.subtract(x, zf, dtype=np.float32), amax


def _product(op: Operator, ab: tuple, a: np.ndarray, b: np.ndarray, za: int | None, zb: int | None) -> np.ndarray:
    """(A - za) @ (B - zb), exact, as float64; ``ab`` the input indices of A and B. The centred operands are
    multiplied in float32 over K-slices short enough that every partial sum stays below 2**24 (exact whatever
    order the BLAS sums in); the slices' products are summed in float64, exactly."""
    if a.ndim < 2 or b.ndim < 2 or a.shape[-1] != b.shape[-2]:
        raise ShapeError(
            f"{op.describe()}: cannot multiply '{op.input_names[ab[0]]}' {a.shape} by "
            f"'{op.input_names[ab[1]]}' {b.shape}"
        )
    try:
        np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    except ValueError as e:
        raise ShapeError(f"{op.describe()}: batch dimensions {a.shape[:-2]} and {b.shape[:-2]} differ") from e
    (ac, a_amax), (bc, b_amax) = _centered(op, ab[0], a, za, True), _centered(op, ab[1], b, zb, False)
    k = a.shape[-1]
    step = a_amax * b_amax
    ks = k if step == 0 else max(1, min(k, (2**24 - 1) // step))
    total = np.matmul(ac[..., :ks], bc[..., :ks, :]).astype(np.float64)
    for k0 in range(ks, k, ks):
        total += np.matmul(ac[..., k0 : k0 + ks], bc[..., k0 : k0 + ks, :])
    return total


@register_op(
    "ONNXMatMulInteger",
    inputs=(2, 4),
    input_docs=[("A", "int8/uint8"), ("B", "int8/uint8"), ("a_zero_point", "optional"), ("b_zero_point", "optional")],
    output_docs=[("Y", "int32 (A - a_zero_point) @ (B - b_zero_point)")],
    infer=lambda args, ins: [TensorSpec(_mm_shape(ins[0], ins[1]), _I32)],
    category="onnx",
    input_types="int",
)
class ONNXMatMulInteger(Operator):
    """ONNX MatMulInteger: the exact int32 product of zero-point-centred 8-bit matrices."""

    def run(self) -> None:
        a, b = self.input(0), self.input(1)
        n = len(self.inputs)
        c = _product(self, (0, 1), a, b, 2 if n > 2 and self.inputs[2] else None, 3 if n > 3 else None)
        self.output(0, c.shape, _I32)[...] = c


@register_op(
    "ONNXQLinearMatMul",
    inputs=8,
    input_docs=[
        ("a", "int8/uint8"),
        ("a_scale", "scalar"),
        ("a_zero_point", "a's type"),
        ("b", "int8/uint8"),
        ("b_scale", "scalar or per column"),
        ("b_zero_point", "b's type"),
        ("y_scale", "scalar"),
        ("y_zero_point", "output type"),
    ],
    output_docs=[("y", "requantized product, y_zero_point's type")],
    infer=lambda args, ins: [TensorSpec(_mm_shape(ins[0], ins[3]), ins[7].dtype) if ins[7] is not UNKNOWN else UNKNOWN],
    category="onnx",
    input_types={0: "int", 1: "float", 2: "int", 3: "int", 4: "float", 5: "int", 6: "float", 7: "int"},
)
class ONNXQLinearMatMul(Operator):
    """ONNX QLinearMatMul: the integer product of the centred operands requantized to y's scale
    and zero point."""

    def run(self) -> None:
        a, b, yz = self.input(0), self.input(3), self.input(7)
        if yz.dtype not in (np.dtype(np.int8), np.dtype(np.uint8)):
            raise ShapeError(f"{self.describe()}: y_zero_point '{self.input_names[7]}' must be int8 or uint8")
        for i in (1, 6):
            if self.input(i).size != 1:
                raise ShapeError(f"{self.describe()}: '{self.input_names[i]}' must be a scalar")
        bs = self.input(4)
        if bs.size != 1 and (bs.ndim != 1 or bs.size != b.shape[-1]):
            raise ShapeError(f"{self.describe()}: b_scale '{self.input_names[4]}' must be a scalar or per column")
        c = _product(self, (0, 3), a, b, 2, 5)
        with np.errstate(all="ignore"):
            d = c * (self.input(1) * bs / self.input(6))
            d = d + yz
        info = np.iinfo(yz.dtype)
        self.output(0, c.shape, yz.dtype)[...] = np.clip(np.rint(d), info.min, info.max)


no_gradient("ONNXMatMulInteger", "ONNXQLinearMatMul")
