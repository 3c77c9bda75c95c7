"""Int8RoIAlign: Mask R-CNN's RoIAlign on NHWC uint8 codes with Caffe2's own integer arithmetic
(``caffe2/operators/quantized/int8_roi_align_op.h``; gemmlowp's fixed-point helpers from ``int8_utils.h``).
No gradient.
"""

from __future__ import annotations

import math

import numpy as np

from framework.errors import ArgumentError, ShapeError, TypeMismatchError
from framework.memory.allocator import check_elements
from framework.ops.gradient import no_gradient
from framework.ops.operator import Operator
from framework.ops.quantized.int8_common import U8, Y_ARGS, check_y_scale, int8_input, int8_output
from framework.ops.registry import register_op
from framework.ops.schema import FLOAT, INT, STRING, Arg, TensorSpec
from framework.ops.validation import expect_rank

F32 = np.float32


def quantize_multiplier_smaller_than_one(m: float, where: str) -> tuple[int, int]:
    """gemmlowp's QuantizeMultiplierSmallerThanOne: (Q31 multiplier, right shift) of ``m`` in [0, 1)."""
    if not 0.0 <= m < 1.0:
        raise ArgumentError(f"{where}: requantization multiplier {m} must lie in [0, 1) (Caffe2 checks it)")
    if m == 0.0:
        return 0, 0
    q, exp = math.frexp(m)
    shift = -exp
    fixed = round(q * (1 << 31))  # Python's round: ties to even, as nearbyint
    if fixed == 1 << 31:
        fixed //= 2
        shift -= 1
    return fixed, shift


def multiply_by_quantized_multiplier(x: np.ndarray, mult: int, shift: int) -> np.ndarray:
    """RoundingDivideByPOT(SaturatingRoundingDoublingHighMul(x, mult), shift) over int64-held int32 values."""
    ab = x.astype(np.int64) * mult
    v = ab + np.where(ab >= 0, 1 << 30, 1 - (1 << 30))
    high = np.where(v >= 0, v >> 31, -((-v) >> 31))  # C division truncates toward zero
    mask = (1 << shift) - 1
    threshold = (mask >> 1) + (high < 0)
    return (high >> shift) + ((high & mask) > threshold)


def _bilinear(height, width, ph, pw, grid_h, grid_w, start_h, start_w, bin_h, bin_w):
    """Caffe2's pre_calc_for_bilinear_interpolate (float32): (4 flat positions, 4 uint8 weights) per sample,
    samples ordered (ph, pw, iy, ix)."""
    py = np.arange(ph, dtype=F32)[:, None] * bin_h  # ph * bin_size_h
    iy = (np.arange(grid_h, dtype=F32) + F32(0.5)) * bin_h / F32(grid_h)
    yy = (F32(start_h) + py) + iy[None, :]  # (ph, grid_h)
    px = np.arange(pw, dtype=F32)[:, None] * bin_w
    ix = (np.arange(grid_w, dtype=F32) + F32(0.5)) * bin_w / F32(grid_w)
    xx = (F32(start_w) + px) + ix[None, :]  # (pw, grid_w)
    y = np.broadcast_to(yy[:, None, :, None], (ph, pw, grid_h, grid_w)).reshape(-1).astype(F32)
    x = np.broadcast_to(xx[None, :, None, :], (ph, pw, grid_h, grid_w)).reshape(-1).astype(F32)
    empty = (y < -1.0) | (y > height) | (x < -1.0) | (x > width)
    y = np.where(y <= 0, F32(0), y)
    x = np.where(x <= 0, F32(0), x)
    y_low, x_low = y.astype(np.int64), x.astype(np.int64)
    y_edge, x_edge = y_low >= height - 1, x_low >= width - 1
    y_low = np.where(y_edge, height - 1, y_low)
    x_low = np.where(x_edge, width - 1, x_low)
    y_high = np.where(y_edge, y_low, y_low + 1)
    x_high = np.where(x_edge, x_low, x_low + 1)
    y = np.where(y_edge, y_low.astype(F32), y)
    x = np.where(x_edge, x_low.astype(F32), x)
    ly, lx = (y - y_low.astype(F32)).astype(F32), (x - x_low.astype(F32)).astype(F32)
    hy, hx = (1.0 - ly.astype(np.float64)).astype(F32), (1.0 - lx.astype(np.float64)).astype(F32)
    w255 = F32(255.0)
    weights = [np.rint((a * b) * w255).astype(np.int64) for a, b in ((hy, hx), (hy, lx), (ly, hx), (ly, lx))]
    pos = [y_low * width + x_low, y_low * width + x_high, y_high * width + x_low, y_high * width + x_high]
    pos = [np.where(empty, 0, p) for p in pos]
    weights = [np.where(empty, 0, w) for w in weights]
    return pos, weights


@register_op(
    "Int8RoIAlign",
    inputs=2,
    args=[
        Arg("order", STRING, "NHWC", "storage order: only NHWC"),
        Arg("spatial_scale", FLOAT, 1.0, "scale of X relative to the image the RoIs are in (e.g. 1/16)"),
        Arg("pooled_h", INT, 1, "pooled output height (> 0)"),
        Arg("pooled_w", INT, 1, "pooled output width (> 0)"),
        Arg("sampling_ratio", INT, -1, "sampling points per bin side; <= 0: adaptive ceil(roi size / pooled)"),
        *Y_ARGS,
    ],
    input_docs=[
        ("X", "4-D NHWC Int8TensorCPU feature map (N, H, W, C)"),
        ("RoIs", "float32 (R, 4 or 5): [batch index,] x1, y1, x2, y2 in image coordinates"),
    ],
    output_docs=[("Y", "Int8TensorCPU (R, pooled_h, pooled_w, C)")],
    infer=lambda args, ins: [
        TensorSpec(
            (ins[1].shape[0], args.pooled_h, args.pooled_w, ins[0].shape[3])
            if ins[0].known and ins[1].known and len(ins[0].shape) == 4 and len(ins[1].shape) == 2
            else None,
            U8,
        )
    ],
    category="quantized",
)
class Int8RoIAlign(Operator):
    """RoIAlign (Mask R-CNN) on NHWC codes with Caffe2's integer arithmetic: per RoI, bins of
    ``max(roi size, 1) / pooled`` sampled on a ``sampling_ratio`` (or adaptive) grid; each sample's four bilinear
    weights are ``nearbyint(w * 255)`` as uint8 (float32 math, so they need not sum to 255), the int32 accumulator
    adds ``sum(w_i * x_i) - 255 * X.zero_point`` per sample, and is requantized with gemmlowp's fixed point by
    ``X.scale / (Y_scale * 255 * samples)`` (must be < 1), plus ``Y_zero_point``, clamped to [0, 255]. Samples
    outside [-1, size] contribute only the ``-255 * zero point`` term, as Caffe2's. Departures: RoI batch indices
    outside [0, N) and non-float32 RoIs are errors (Caffe2 reads out of bounds / reinterprets); ``pooled_h``,
    ``pooled_w`` and ``spatial_scale`` must be positive (Caffe2: debug-build checks). No gradient."""

    def setup(self) -> None:
        if self.args.order != "NHWC":
            raise self.arg_error(f"only NHWC order is supported, got {self.args.order}")
        if self.args.pooled_h <= 0 or self.args.pooled_w <= 0:
            raise self.arg_error(f"pooled_h and pooled_w must be > 0, got {self.args.pooled_h}, {self.args.pooled_w}")
        if not (np.isfinite(self.args.spatial_scale) and self.args.spatial_scale > 0):
            raise self.arg_error(f"spatial_scale must be a positive number, got {self.args.spatial_scale}")
        self.scale = check_y_scale(self)

    def run(self) -> None:
        q = int8_input(self, 0)
        x = q.t.array
        rois = self.input(1)
        ph, pw = self.args.pooled_h, self.args.pooled_w
        expect_rank(self, 0, x, 4, "NHWC")
        n, h, w, c = x.shape
        y_zp = self.args.Y_zero_point
        if rois.size == 0:
            int8_output(self, 0, (0, ph, pw, c), self.scale, y_zp)
            return
        if rois.dtype != F32:
            raise TypeMismatchError(
                f"{self.describe()}: RoIs '{self.input_names[1]}' must be float32, got {rois.dtype}"
            )
        if rois.ndim != 2 or rois.shape[1] not in (4, 5):
            raise ShapeError(
                f"{self.describe()}: RoIs '{self.input_names[1]}' must be (R, 4 or 5), got {list(rois.shape)}"
            )
        if not np.all(np.isfinite(rois)):
            raise ShapeError(f"{self.describe()}: RoIs '{self.input_names[1]}' hold NaN or infinite values")
        r = rois.shape[0]
        batch = rois[:, 0].astype(np.int64) if rois.shape[1] == 5 else np.zeros(r, np.int64)
        if np.any((batch < 0) | (batch >= n)) or h == 0 or w == 0:
            raise ShapeError(
                f"{self.describe()}: RoI batch indices must lie in [0, {n}) of a non-empty X {list(x.shape)}"
            )
        boxes = rois[:, -4:]
        check_elements((r, ph, pw, c), 1, f"output 0 of {self.describe()}")
        out = np.empty((r, ph, pw, c), np.int64)
        sr = self.args.sampling_ratio
        ss = F32(self.args.spatial_scale)
        flat = x.reshape(n, h * w, c).astype(np.int64)
        for k in range(r):
            sw, sh, ew, eh = (F32(v) * ss for v in boxes[k])
            roi_w, roi_h = max(F32(ew - sw), F32(1.0)), max(F32(eh - sh), F32(1.0))
            bin_h, bin_w = F32(roi_h / F32(ph)), F32(roi_w / F32(pw))
            gh = sr if sr > 0 else int(math.ceil(F32(roi_h / F32(ph))))
            gw = sr if sr > 0 else int(math.ceil(F32(roi_w / F32(pw))))
            check_elements((ph, pw, gh, gw), 64, f"the sampling grid of {self.describe()}")
            mult, shift = quantize_multiplier_smaller_than_one(
                float(q.scale) / (float(self.scale) * 255.0 * float(F32(gh * gw))), self.describe()
            )
            pos, wts = _bilinear(h, w, ph, pw, gh, gw, sh, sw, bin_h, bin_w)
            data = flat[batch[k]]
            acc = sum(wt[:, None] * data[p] for p, wt in zip(pos, wts)) - 255 * q.zero_point  # (samples, C)
            acc = acc.reshape(ph * pw, gh * gw, c).sum(axis=1)
            acc = acc.astype(np.int32).astype(np.int64)  # Caffe2's int32 accumulator
            out[k] = (multiply_by_quantized_multiplier(acc, mult, shift) + y_zp).reshape(ph, pw, c)
        int8_output(self, 0, out.shape, self.scale, y_zp)[...] = np.clip(out, 0, 255)


no_gradient("Int8RoIAlign")
