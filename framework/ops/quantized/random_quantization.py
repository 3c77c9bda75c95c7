"""Stochastic row-wise quantization (Caffe2's ``fused_rowwise_random_quantization_ops``,
``perfkernels/math_cpu_base.cc``): ``FloatToFusedRandRowwiseQuantized`` / ``FusedRandRowwiseQuantizedToFloat``.

Row layout: ``| bitwidth (1 B) | tail (1 B) | min f32 | max f32 | data |``; the row is cut into
``8 / bitwidth`` segments of ``ceil(cols / (8 / bitwidth))`` values and bits ``[b * bitwidth, (b + 1) *
bitwidth)`` of data byte i hold value i of segment b; ``tail`` counts the unused slots. With ``gap = (max -
min) / (2^bitwidth - 1)``: codes ``clamp(floor((x - min) / (gap + 1e-8) + u))`` with u uniform in [0, 1)
(``random``, unbiased), else ``nearbyint`` of the clamped value; dequantization ``code * (gap + 1e-8) +
min``. The layout and the non-random codes are bit-exact with Caffe2; random draws come from the op's
generator (not Caffe2's). No gradients.
"""

from __future__ import annotations

import numpy as np

from framework.errors import ShapeError, TypeMismatchError
from framework.ops.gradient import no_gradient
from framework.ops.operator import Operator
from framework.ops.quantized.embedding_quantization import row_min_max
from framework.ops.registry import register_op
from framework.ops.schema import BOOL, INT, Arg, TensorSpec

F32, U8 = np.dtype(np.float32), np.dtype(np.uint8)


@register_op(
    "FloatToFusedRandRowwiseQuantized",
    args=[
        Arg("bitwidth", INT, 8, "bits per value: 1, 2, 4 or 8"),
        Arg("random", BOOL, True, "stochastic rounding (False: nearest, for tests)"),
    ],
    input_docs=[("input", "float32 matrix")],
    output_docs=[("output", "uint8 [rows, 10 + ceil(cols / (8 / bitwidth))]")],
    infer=lambda args, ins: [
        TensorSpec(
            (ins[0].shape[0], 10 + -(-ins[0].shape[1] // (8 // args.bitwidth)))
            if ins[0].shape is not None and len(ins[0].shape) == 2 and args.bitwidth in (1, 2, 4, 8)
            else None,
            U8,
        )
    ],
    category="quantized",
)
class FloatToFusedRandRowwiseQuantized(Operator):
    """Row-wise (stochastic) quantization to 1, 2, 4 or 8 bits with min/max per row (module doc)."""

    def setup(self) -> None:
        if self.args.bitwidth not in (1, 2, 4, 8):
            raise self.arg_error(f"bitwidth must be 1, 2, 4 or 8, got {self.args.bitwidth}")

    def run(self) -> None:
        x = self.input(0)
        if x.dtype != F32 or x.ndim != 2:
            raise TypeMismatchError(f"{self.describe()}: input must be a float32 matrix, got {x.dtype} {list(x.shape)}")
        bits = self.args.bitwidth
        per = 8 // bits
        rows, cols = x.shape
        seg = -(-cols // per)
        tail = (per - cols % per) % per
        out = self.output(0, (rows, 10 + seg), U8)
        out.fill(0)
        if not rows:
            return
        mn, mx = row_min_max(x) if cols else (np.full(rows, np.inf, F32), np.full(rows, -np.inf, F32))
        out[:, 0] = bits
        out[:, 1] = tail
        out[:, 2:6] = mn.astype(F32).view(U8).reshape(rows, 4)
        out[:, 6:10] = mx.astype(F32).view(U8).reshape(rows, 4)
        gap = ((mx - mn) / np.float32((1 << bits) - 1.0)).astype(F32)
        inv = (1.0 / (gap.astype(np.float64) + 1e-8)).astype(F32)  # Caffe2: 1. / (gap + QEPSILON) in double
        t = ((x - mn[:, None]) * inv[:, None]).astype(F32)
        max_q = np.float32((1 << bits) - 1)
        if self.args.random:
            q = np.floor(t + self.rng.random(x.shape, dtype=np.float32))
            q = np.clip(q, 0, max_q)
        else:
            q = np.rint(np.clip(t, 0, max_q))
        with np.errstate(invalid="ignore"):
            codes = q.astype(U8)
        padded = np.zeros((rows, seg * per), U8)
        padded[:, :cols] = codes
        data = np.zeros((rows, seg), U8)
        for b in range(per):
            data |= padded[:, b * seg : (b + 1) * seg] << np.uint8(b * bits)
        out[:, 10:] = data


@register_op(
    "FusedRandRowwiseQuantizedToFloat",
    input_docs=[("quantized_input", "rows made by FloatToFusedRandRowwiseQuantized")],
    output_docs=[("float_input", "float32 matrix")],
    infer=lambda args, ins: [TensorSpec(None, F32)],
    category="quantized",
)
class FusedRandRowwiseQuantizedToFloat(Operator):
    """Dequantize rows of FloatToFusedRandRowwiseQuantized: ``code * (gap + 1e-8) + min``."""

    def run(self) -> None:
        q = self.input(0)
        if q.dtype != U8 or q.ndim != 2 or q.shape[1] < 10:
            raise TypeMismatchError(f"{self.describe()}: input must be a uint8 matrix of >= 10 columns")
        rows = q.shape[0]
        if not rows:
            self.output(0, (0, 0), F32)
            return
        bits, tail = int(q[0, 0]), int(q[0, 1])
        if bits not in (1, 2, 4, 8) or (q[:, 0] != bits).any() or (q[:, 1] != tail).any():
            raise ShapeError(f"{self.describe()}: unsupported or inconsistent bitwidth/tail headers")
        per = 8 // bits
        seg = q.shape[1] - 10
        cols = seg * per - tail
        if cols < 0:
            raise ShapeError(f"{self.describe()}: tail {tail} exceeds the {seg * per} slots")
        mn = np.ascontiguousarray(q[:, 2:6]).view(F32).reshape(rows)
        mx = np.ascontiguousarray(q[:, 6:10]).view(F32).reshape(rows)
        gap = (((mx - mn) / np.float32((1 << bits) - 1.0)).astype(np.float64) + 1e-8).astype(F32)
        mask = np.uint8((1 << bits) - 1)
        codes = np.concatenate([(q[:, 10:] >> np.uint8(b * bits)) & mask for b in range(per)], axis=1)[:, :cols]
        out = self.output(0, (rows, cols), F32)
        out[...] = codes.astype(F32) * gap[:, None] + mn[:, None]


no_gradient("FloatToFusedRandRowwiseQuantized", "FusedRandRowwiseQuantizedToFloat")
