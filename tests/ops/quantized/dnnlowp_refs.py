"""Independent references of fbgemm's / Caffe2 DNNLOWP's quantization arithmetic for the DNNLOWP op tests,
written element by element from the C++ (exact rational arithmetic where fbgemm rounds once)."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

f32 = np.float32


def ref_choose(lo, hi, precision=8, symmetric=False, pow2=False):
    """fbgemm::ChooseQuantizationParams(lo, hi, 0, 2^p - 1, symmetric, pow2) -> (float32 scale, zero point)."""
    qmin, qmax = 0, 2**precision - 1
    lo, hi = f32(lo), f32(hi)
    if lo < 0 < hi and symmetric:
        half = (qmax - qmin) // 2
        ms = max(abs(f32(lo / f32(-(half + 1)))), abs(f32(hi / f32(half))))
        lo, hi = f32(float(ms) * -(half + 1)), f32(float(ms) * half)
    lo, hi = min(lo, f32(0)), max(hi, f32(0))
    scale = f32((float(hi) - float(lo)) / (qmax - qmin))
    if scale == 0 or float(scale) < 2.0**-126 / 4:  # 1/scale would overflow float32
        scale = f32(0.1)
    if pow2:
        scale = (
            f32(2.0 ** -math.floor(math.log2(1 / float(scale))))
            if scale < 1
            else f32(2.0 ** math.ceil(math.log2(scale)))
        )
    thr = f32(6.1e-5)
    if scale < thr:
        org, scale = scale, thr
        if lo == 0:
            hi = f32(thr * f32(qmax))
        elif hi == 0:
            lo = f32(-thr * f32(qmax))
        else:
            amp = f32(thr / org)
            lo, hi = f32(lo * amp), f32(hi * amp)
    s = float(scale)
    zmin, zmax = qmin - float(lo) / s, qmax - float(hi) / s
    z = zmin if abs(qmin) + abs(float(lo) / s) < abs(qmax) + abs(float(hi) / s) else zmax
    if lo < 0 < hi and symmetric:
        z = (qmin + qmax) / 2
    z = qmin if z < qmin else qmax if z > qmax else round(z)  # Python's round: ties to even
    return scale, int(z)


def ref_quantize8(x, scale, zp):
    """fbgemm's AVX2 QuantizeAvx2<uint8_t>: float32(x * (1/scale) + zp) rounded once (exact sum), min with
    2^31 - 128 (NaN -> that), rounded to nearest even, clamped to [0, 255]."""
    inv = Fraction(float(f32(1) / f32(scale)))
    out = np.empty(np.shape(x), np.uint8)
    for idx, v in np.ndenumerate(np.asarray(x, np.float32)):
        if np.isnan(v) or v == np.inf:
            out[idx] = 255
            continue
        if v == -np.inf:
            out[idx] = 0
            continue
        t = float(f32(float(Fraction(float(v)) * inv + zp)))
        out[idx] = min(max(round(t), 0), 255)
    return out


def ref_quantize_scalar(x, scale, zp, precision):
    """fbgemm's scalar Quantize<uint8_t, LEGACY>: nearbyint(float32(zp + float32(x * float32(1/scale))))."""
    inv = f32(1) / f32(scale)
    top = 2**precision - 1
    out = np.empty(np.shape(x), np.uint8)
    for idx, v in np.ndenumerate(np.asarray(x, np.float32)):
        t = f32(f32(zp) + f32(v * inv))
        out[idx] = 0 if np.isnan(t) else min(max(round(float(t)), 0), top)
    return out


def ref_dequantize(q, scale, zp):
    out = np.empty(np.shape(q), np.float32)
    for idx, v in np.ndenumerate(np.asarray(q)):
        out[idx] = f32(scale) * f32(int(v) - zp)
    return out
