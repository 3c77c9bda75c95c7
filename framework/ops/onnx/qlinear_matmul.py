"""ONNX's integer matrix products: ONNXMatMulInteger and ONNXQLinearMatMul.

Both take numpy ``matmul`` operands (2-D, or N-D batched with broadcasting) of 8-bit integers. With a 2-D B
whose centred codes fit int8 and a scalar a_zero_point they run the integer GEMM kernel
(``framework/kernels/int8_gemm_path.py``: exact int32 sums, the requantization below in its epilogue).
Else they subtract the zero points first (scalars, or per row of A / per column of B), and multiply the centred
operands in float32 BLAS over K-slices short enough to stay exact (every partial sum below 2**24), summed in
float64. MatMulInteger returns the exact int32 product. QLinearMatMul requantizes it:
``saturate(rint(C * (a_scale * b_scale / y_scale)) + y_zero_point)`` in y_zero_point's type
(round half to even), as ONNX's reference computes it. No gradient (integer ops).
"""

from __future__ import annotations

import numpy as np

from framework.errors import ShapeError
from framework.kernels import int8_gemm_path
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


def _integer_product(op: Operator, ab: tuple, zab: tuple, ratio, y_zp: float, lo: int, hi: int, dtype) -> bool:
    """(A - za) @ (B - zb) on the integer GEMM kernel into output 0 (``dtype``, A's shape with B's columns):
    int32 sums, or (``ratio`` given, float64 per column) requantized; False where it does not apply (B not 2-D,
    a per-row a_zero_point, B's centred codes outside int8, no VNNI): the output untouched."""
    a, b = op.input(ab[0]), op.input(ab[1])
    q8 = (np.dtype(np.uint8), np.dtype(np.int8))
    if b.ndim != 2 or a.ndim < 2 or a.shape[-1] != b.shape[0] or a.dtype not in q8 or b.dtype not in q8:
        return False
    if not int8_gemm_path.available() or (ratio is not None and not np.isfinite(ratio).all()):
        return False
    za = op.input(zab[0]) if zab[0] is not None else np.zeros((), a.dtype)
    zb = op.input(zab[1]) if zab[1] is not None else np.zeros((), b.dtype)
    if za.size != 1 or za.dtype != a.dtype or zb.dtype != b.dtype or zb.size not in (1, b.shape[1]) or zb.ndim > 1:
        return False  # a per-row zero point or a malformed one: the float path (and its errors)
    key = (op.input_tensor(ab[1]).version, zb.tobytes(), zb.shape)
    packed = int8_gemm_path.cached_weights(op, b, key, lambda: (b.astype(np.int32) - zb.astype(np.int32)).T)
    if packed is None:
        return False
    flip = a.dtype == np.int8  # int8 codes as uint8 codes shifted by 128
    x_zp = int(za.reshape(-1)[0]) + (128 if flip else 0)
    rows = int8_gemm_path.rows(op, a.view(np.uint8) if flip else a, flip)
    p = a.size // a.shape[-1] if a.shape[-1] else 0
    out = op.output(0, (*a.shape[:-1], b.shape[1]), dtype)
    if not out.flags.c_contiguous:
        return False
    mode = 1 if ratio is None else 2
    return int8_gemm_path.run(op, rows, p, packed, x_zp, None, None, ratio, (0, 0, 0, y_zp, lo, hi), mode,
                              False, out.reshape(p, b.shape[1]))  # fmt: skip


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
        zab = (2 if n > 2 and self.inputs[2] else None, 3 if n > 3 else None)
        if _integer_product(self, (0, 1), zab, None, 0.0, 0, 0, _I32):
            return
        c = _product(self, (0, 1), a, b, *zab)
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
        info = np.iinfo(yz.dtype)
        if a.ndim >= 2 and b.ndim == 2 and a.shape[-1] == b.shape[0]:
            with np.errstate(all="ignore"):
                ratio = np.broadcast_to(np.asarray(self.input(1) * bs / self.input(6), np.float64), b.shape[1:]).copy()
            if _integer_product(self, (0, 3), (2, 5), ratio, float(yz.reshape(-1)[0]), info.min, info.max, yz.dtype):
                return
        c = _product(self, (0, 3), a, b, 2, 5)
        with np.errstate(all="ignore"):
            d = c * (self.input(1) * bs / self.input(6))
            d = d + yz
        self.output(0, c.shape, yz.dtype)[...] = np.clip(np.rint(d), info.min, info.max)


no_gradient("ONNXMatMulInteger", "ONNXQLinearMatMul")
