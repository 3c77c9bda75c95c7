"""DNNLOWP quantization arithmetic: Caffe2's ``quantization/server`` (``dnnlowp.h``, ``caffe2_dnnlowp_utils.cc``)
on fbgemm's ``QuantUtils`` (the newest fbgemm, the one Caffe2's last releases built with), step for step in
fbgemm's float32/double mix so results are Caffe2's bit for bit:

- ``choose_qparams(lo, hi, precision, preserve_sparsity, power_of_two)``: fbgemm's
  ChooseQuantizationParams for the unsigned range [0, 2^precision - 1]: [lo, hi] widened to hold 0, scale
  ``(hi - lo) / (qmax - qmin)`` in double stored as float32, 0.1 when it is 0 or its reciprocal overflows,
  a power of two on request, at least 6.1e-5 (fbgemm's SMALL_SCALE_THRESHOLD, the range stretched to
  match), the zero point from the end with the smaller rounding error, nudged into range (ties to even);
  symmetric (``preserve_sparsity``) ranges get the middle code;
- ``quantize(x, qp, out)``: fbgemm's Quantize<uint8_t>. At precision 8 Caffe2 runs fbgemm's AVX2 kernel,
  ``cvtps(min(fma(x, 1/scale, zero_point), 2^31 - 128))`` clamped to [0, 255] (one rounding for the fused
  multiply-add; NaN gives 255, -inf 0), emulated here in float64 (the product of two float32 is exact
  there); other precisions take the scalar ``nearbyint(zero_point + x * (1/scale))`` (two float32 roundings,
  NaN gives 0). Ties round to even;
- ``dequantize(q, qp)``: ``scale * (q - zero_point)`` in float32;
- ``requantization_multiplier(real, precision)``: fbgemm's ChooseRequantizationMultiplier (a fixed-point
  multiplier in [2^30, 2^31) and a right shift); ``rounding_mul_shift``, ``requantize_int32`` and
  ``requantize_float`` are fbgemm's Requantize variants;
- ``QFactory``: the per-op quantization settings of Caffe2's GetQuantizationFactoryOf (the DNNLOWP
  arguments ``activation_precision``... with the gflags' defaults), ``QFACTORY_ARGS`` their schema;
- ``choose_from_values(x, precision, preserve_sparsity)``: FindMinMax then ChooseQuantizationParams
  (Caffe2 refuses nothing; non-finite values give meaningless parameters there, an error here).
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np

from framework.errors import ShapeError
from framework.ops.schema import BOOL, FLOAT, INT, STRING, Arg

__all__ = [
    "DNNLOWP_ARGS",
    "QFACTORY_ARGS",
    "QFactory",
    "QParams",
    "choose_from_values",
    "choose_qparams",
    "dequantize",
    "quantize",
    "requantization_multiplier",
    "requantize_float",
    "requantize_int32",
    "rounding_mul_shift",
]

f32 = np.float32
F32 = np.dtype(np.float32)
SMALL_SCALE_THRESHOLD = f32(6.1e-5)
INT32_FLOAT_MAX = f32(2**31 - 128)  # the largest float below INT32_MAX (fbgemm's int32_float_max_val)


class QParams(NamedTuple):
    """fbgemm's TensorQuantizationParams: ``real = scale * (q - zero_point)``; scale is a float32 value."""

    scale: float
    zero_point: int
    precision: int = 8

    def max(self) -> float:
        """The real value of the top code (TensorQuantizationParams::Max)."""
        return float(f32(self.scale) * f32((1 << self.precision) - 1 - self.zero_point))


def choose_qparams(
    lo: float, hi: float, precision: int = 8, preserve_sparsity: bool = False, power_of_two: bool = False
) -> QParams:
    """fbgemm::ChooseQuantizationParams(lo, hi, 0, 2^precision - 1, ...) with Caffe2's precision."""
    qmin, qmax = 0, (1 << precision) - 1
    mn, mx = f32(lo), f32(hi)
    with np.errstate(all="ignore"):
        if mn < 0 and mx > 0 and preserve_sparsity:
            sym_qmin, sym_qmax = -((qmax - qmin) // 2 + 1), (qmax - qmin) // 2
            max_scale = max(abs(mn / f32(sym_qmin)), abs(mx / f32(sym_qmax)))  # float arithmetic
            mn, mx = f32(float(max_scale) * sym_qmin), f32(float(max_scale) * sym_qmax)  # double, stored as float
        mn, mx = min(mn, f32(0)), max(mx, f32(0))
        scale = f32((float(mx) - float(mn)) / (qmax - qmin))
        if scale == 0 or np.isinf(f32(1) / scale):
            scale = f32(0.1)
        if power_of_two:
            if scale < 1:
                scale = f32(1.0 / (1 << int(math.floor(math.log2(1.0 / float(scale))))))
            else:
                scale = f32(1 << int(math.ceil(math.log2(float(scale)))))
        if scale < SMALL_SCALE_THRESHOLD:
            org, scale = scale, SMALL_SCALE_THRESHOLD
            if mn == 0:
                mx = f32(SMALL_SCALE_THRESHOLD * f32(qmax - qmin))
            elif mx == 0:
                mn = f32(-SMALL_SCALE_THRESHOLD * f32(qmax - qmin))
            else:
                amp = f32(SMALL_SCALE_THRESHOLD / org)
                mn, mx = f32(mn * amp), f32(mx * amp)
    s = float(scale)
    from_min, from_max = qmin - float(mn) / s, qmax - float(mx) / s
    err_min, err_max = abs(qmin) + abs(float(mn) / s), abs(qmax) + abs(float(mx) / s)
    initial = from_min if err_min < err_max else from_max
    if mn < 0 and mx > 0 and preserve_sparsity:
        initial = (qmin + qmax) / 2
    if initial < qmin:
        zp = qmin
    elif initial > qmax:
        zp = qmax
    else:
        zp = int(np.rint(initial))
    return QParams(float(scale), zp, precision)


def quantize(x: np.ndarray, qp: QParams, out: np.ndarray) -> np.ndarray:
    """fbgemm's Quantize<uint8_t> (LEGACY) of float32 ``x`` into ``out`` (uint8), see the module doc."""
    inv = f32(1) / f32(qp.scale)
    top = (1 << qp.precision) - 1
    with np.errstate(all="ignore"):
        if qp.precision == 8:  # the AVX2 kernel: one fused multiply-add, then cvtps (min first: NaN -> max)
            v = (x.astype(np.float64) * float(inv) + qp.zero_point).astype(F32)
            v = np.where(np.isnan(v) | (v > INT32_FLOAT_MAX), INT32_FLOAT_MAX, v)
        else:  # the scalar loop: float32 product, float32 sum, nearbyint (NaN: x86's conversion gives 0)
            v = (x.astype(F32, copy=False) * inv).astype(F32) + f32(qp.zero_point)
            v = np.where(np.isnan(v), f32(-1), v)
        r = np.rint(np.clip(v, -1.0, 1024.0))
    out[...] = np.clip(r, 0, top)
    return out


def dequantize(q: np.ndarray, qp: QParams, out: np.ndarray | None = None) -> np.ndarray:
    """fbgemm's Dequantize: ``scale * (q - zero_point)`` (the int difference converted to float32)."""
    diff = (q.astype(np.int64) - qp.zero_point).astype(F32)
    res = np.multiply(diff, f32(qp.scale), dtype=F32)
    if out is None:
        return res
    out[...] = res
    return out


def choose_from_values(
    x: np.ndarray, precision: int, preserve_sparsity: bool, power_of_two: bool, where: str
) -> QParams:
    """FindMinMax over ``x`` (0, 0 when empty) then ``choose_qparams``."""
    if x.size == 0:
        return choose_qparams(0.0, 0.0, precision, preserve_sparsity, power_of_two)
    lo, hi = x.min(), x.max()
    if not (np.isfinite(lo) and np.isfinite(hi)):
        raise ShapeError(
            f"{where} holds NaN or infinite values: no quantization parameters can be chosen (min {lo}, max {hi})"
        )
    return choose_qparams(float(lo), float(hi), precision, preserve_sparsity, power_of_two)


def requantization_multiplier(real: float, precision: int = 32) -> tuple[int, int]:
    """fbgemm::ChooseRequantizationMultiplier: (multiplier, right_shift) with real ~ multiplier / 2^shift."""
    m, s = f32(real), 31
    if not (np.isfinite(m) and m > 0):
        raise ShapeError(f"requantization multiplier {real} must be positive and finite")
    while m < 0.5:
        m, s = f32(m * 2), s + 1
    while m > 1:
        m, s = f32(m / 2), s - 1
    q = int(np.rint(f32(m * f32(1 << (precision - 1)))))
    if q == 1 << (precision - 1):
        q, s = q // 2, s - 1
    if not 0 <= s < 64:
        raise ShapeError(f"requantization multiplier {real} needs a right shift of {s}, outside [0, 64)")
    return q, s


def rounding_mul_shift(a: np.ndarray, multiplier: int, shift: int) -> np.ndarray:
    """fbgemm::SaturatingRoundingMulWithShift: ``(a * multiplier + 2^(shift-1)) >> shift`` in int64."""
    ab = a.astype(np.int64) * np.int64(multiplier)
    return (ab + np.int64(1 << (shift - 1) if shift > 0 else 0)) >> np.int64(shift)


def requantize_int32(src: np.ndarray, multiplier: int, shift: int, zero_point: int = 0) -> np.ndarray:
    """fbgemm::Requantize<int32_t>(..., precision 32, signed): fixed point, clamped to int32."""
    v = zero_point + rounding_mul_shift(src, multiplier, shift)
    return np.clip(v, -(2**31), 2**31 - 1).astype(np.int32)


def requantize_float(src: np.ndarray, real_multiplier: float, qp: QParams, out: np.ndarray) -> np.ndarray:
    """fbgemm::Requantize<uint8_t> with a float multiplier: ``zero_point + lrintf(float(src) * m)`` clamped."""
    with np.errstate(all="ignore"):
        v = np.multiply(src.astype(F32), f32(real_multiplier), dtype=F32)
        r = np.rint(np.clip(v, -(2.0**40), 2.0**40)) + qp.zero_point
    out[...] = np.clip(r, 0, (1 << qp.precision) - 1)
    return out


# -- the DNNLOWP arguments -------------------------------------------------------------------------------
KINDS = ("min_max", "l1", "l2", "l2_approx", "kl", "p99")
KIND_NAMES = {
    "MIN_MAX_QUANTIZATION": "min_max",
    "L1_MIN_QUANTIZATION": "l1",
    "L2_MIN_QUANTIZATION": "l2",
    "L2_MIN_QUANTIZATION_APPROX": "l2_approx",
    "KL_MIN_QUANTIZATION": "kl",
    "P99_QUANTIZATION": "p99",
}


def kind_of(name: str) -> str | None:
    """dnnlowp::StringToKind: a kind's short name (any case) or enum name; None if unknown."""
    if name in KIND_NAMES:
        return KIND_NAMES[name]
    low = name.lower()
    return low if low in KINDS else None


QFACTORY_ARGS = (
    Arg("activation_precision", INT, 8, "bits of the activation codes (1..8: the codes are uint8)", low=1, high=8),
    Arg("weight_precision", INT, 8, "bits of weight codes", low=1, high=16),
    Arg(
        "requantization_multiplier_precision", INT, 32, "bits of fixed-point requantization multipliers", low=2, high=32
    ),
    Arg("eltwise_quantization_precision", INT, 16, "accepted (Caffe2: precision of element-wise intermediates)"),
    Arg("preserve_activation_sparsity", BOOL, False, "symmetric activation quantization (0 maps to the middle code)"),
    Arg("preserve_weight_sparsity", BOOL, False, "symmetric weight quantization"),
    Arg("force_scale_power_of_two", BOOL, False, "round scales to a power of two"),
    Arg("activation_quantization_kind", STRING, "min_max", "accepted: these ops choose activation ranges by min/max"),
    Arg("weight_quantization_kind", STRING, "min_max", "only min_max is ported (ops quantizing weights refuse others)"),
)

DNNLOWP_ARGS = (
    Arg("Y_scale", FLOAT, None, "static output scale (absent: chosen from each run's output range)"),
    Arg("Y_zero_point", INT, 0, "static output zero point (with Y_scale)"),
    Arg("dequantize_output", BOOL, False, "write a float32 tensor (the dequantized codes) instead of int8"),
    Arg("measure_quantization_error", BOOL, False, "accepted; Caffe2 only logs the error against float32"),
    Arg("followed_by", STRING, None, "the only consumer: 'Relu' narrows the output range to [0, max]"),
    *QFACTORY_ARGS,
)


class QFactory(NamedTuple):
    """Caffe2's per-op QuantizationFactory (what the arguments set)."""

    activation_precision: int
    weight_precision: int
    requantization_multiplier_precision: int
    preserve_activation_sparsity: bool
    preserve_weight_sparsity: bool
    force_scale_power_of_two: bool

    @classmethod
    def of(cls, args: Any) -> QFactory:
        return cls(
            args.activation_precision,
            args.weight_precision,
            args.requantization_multiplier_precision,
            bool(args.preserve_activation_sparsity),
            bool(args.preserve_weight_sparsity),
            bool(args.force_scale_power_of_two),
        )

    def choose(self, lo: float, hi: float, is_weight: bool = False) -> QParams:
        if is_weight:
            return choose_qparams(
                lo, hi, self.weight_precision, self.preserve_weight_sparsity, self.force_scale_power_of_two
            )
        return choose_qparams(
            lo, hi, self.activation_precision, self.preserve_activation_sparsity, self.force_scale_power_of_two
        )

    def choose_values(self, x: np.ndarray, where: str, is_weight: bool = False) -> QParams:
        if is_weight:
            return choose_from_values(
                x, self.weight_precision, self.preserve_weight_sparsity, self.force_scale_power_of_two, where
            )
        return choose_from_values(
            x, self.activation_precision, self.preserve_activation_sparsity, self.force_scale_power_of_two, where
        )

    def requantization(self, real: float) -> tuple[int, int]:
        return requantization_multiplier(real, self.requantization_multiplier_precision)
