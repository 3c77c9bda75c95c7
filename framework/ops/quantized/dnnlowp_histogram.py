"""The histogram-based parameter choices of Caffe2's DNNLOWP (``dynamic_histogram.cc``, ``p99.cc``,
``norm_minimization.cc``) over the values of a tensor, as QuantizationFactory::ChooseQuantizationParams
runs them: a ``Histogram(2048, min, max)`` of the values, then

- ``p99_qparams``: P99, the narrowest band of bins around the zero bin holding 99% of the values;
- ``l2_approx_qparams``: L2ErrorMinimization's NonlinearQuantizationParamsSearch, a greedy walk trimming
  the histogram's ends (quantile steps of 1e-5) while the L2 error of quantizing the bins (values uniform
  within a bin) to 256 levels decreases;

each followed by ChooseQuantizationParams of the band's ends with the default factory's settings. The
brute-force L2/L1 and KL searches are not ported. A histogram of width 0 (all values equal) gives the
min/max parameters (Caffe2 divides by zero there).
"""

from __future__ import annotations

import math

import numpy as np

from framework.ops.quantized.dnnlowp_qparams import QParams, choose_qparams

__all__ = ["NBINS", "histogram", "l2_approx_qparams", "p99_qparams"]

F32 = np.dtype(np.float32)
f32 = np.float32
NBINS = 1 << (8 + 3)  # QuantizationFactory: 8x more bins than codes at precision 8


def histogram(x: np.ndarray, lo: np.float32, hi: np.float32, nbins: int = NBINS) -> np.ndarray:
    """dnnlowp::Histogram(nbins, lo, hi).Add(v) for each v: bin ``int((v - lo) / width)`` in float32,
    clamped to [0, nbins - 1]; everything in bin 0 when the width is 0."""
    width = f32(f32(hi - lo) / f32(nbins))
    if width == 0:
        bins = np.zeros(nbins, np.int64)
        bins[0] = x.size
        return bins
    idx = np.trunc((x.astype(F32, copy=False) - lo) / width).astype(np.int64)
    return np.bincount(np.clip(idx, 0, nbins - 1), minlength=nbins)


def p99_qparams(x: np.ndarray) -> QParams:
    """dnnlowp::P99 on the histogram of ``x``: the narrowest band of bins around the zero bin holding 99%
    of the values, then ChooseQuantizationParams of its ends (precision 8, not symmetric: the default
    factory's). A histogram of width 0 (all values equal) falls back to min/max (Caffe2 divides by 0)."""
    lo, hi = f32(x.min()), f32(x.max())
    bins = histogram(x, lo, hi)
    nbins = bins.size
    width = f32(f32(hi - lo) / f32(nbins))
    if width == 0:
        return choose_qparams(float(lo), float(hi))
    zero_bin = int(np.ceil(f32(-lo / width)))
    total = float(bins.sum())
    csum = np.concatenate(([0], np.cumsum(bins)))
    best = 0
    for w in range(nbins):
        if lo == 0:
            a, b = 0, w - 1
        else:
            a, b = max(0, zero_bin - w), min(nbins - 1, zero_bin + w)
        selected = float(csum[b + 1] - csum[a]) if b >= a else 0.0
        if selected / total >= 0.99:
            best = w
            break
    if lo == 0:
        new_lo, new_hi = lo, f32(lo + f32(width * f32(best)))
    else:
        new_lo = f32(lo + f32(width * f32(zero_bin - best)))
        new_hi = f32(lo + f32(width * f32(zero_bin + best + 1)))
    return choose_qparams(float(new_lo), float(new_hi))


def _adjust_to_include_zero(bins: np.ndarray, lo: np.float32, hi: np.float32):
    """dnnlowp::adjust_hist_to_include_zero: pad with empty bins of the same width until 0 is inside."""
    nbins = bins.size
    width = f32(f32(hi - lo) / f32(nbins))
    extra = offset = 0
    if lo > 0:
        extra = offset = int(math.ceil(f32(lo / width)))
        lo = f32(lo - f32(f32(extra) * width))
    elif hi < 0:
        extra = int(math.ceil(f32(-hi / width)))
        hi = f32(hi + f32(f32(extra) * width))
    out = np.zeros(nbins + extra, np.float64)
    out[offset : offset + nbins] = bins
    return out, lo, hi


def _l2_norm(begin: np.ndarray, end: np.ndarray, density: np.ndarray) -> np.ndarray:
    """GetNorm(begin, end, density, L2) in float32: ``density * (end^3 - begin^3) / 3``."""
    b, e, d = begin.astype(F32), end.astype(F32), density.astype(F32)
    return (d * (((e * e * e) - (b * b * b)) / f32(3))).astype(F32)


def _norm(bins_f, width, start, stop, precision) -> float:
    """The L2 error (double, summed bin by bin in order) of mapping bins [start, stop] to 2^precision levels."""
    nbins = bins_f.size
    dst_w = float(f32(f32(width * f32(stop - start + 1)) / f32(1 << precision)))
    top = float((1 << precision) - 1)
    src = np.arange(nbins)
    begin = (f32(1) * (src - start).astype(F32) * width).astype(F32).astype(np.float64)
    end = begin + float(width)
    d_begin = np.minimum(top, np.maximum(0.0, np.floor(begin / dst_w))).astype(np.int64)
    d_end = np.minimum(top, np.maximum(0.0, np.floor(end / dst_w))).astype(np.int64)
    center_b = d_begin * dst_w + dst_w / 2
    density = (bins_f.astype(F32) / width).astype(F32)
    same = d_begin == d_end
    terms = np.zeros((nbins, 3), np.float64)
    terms[:, 0] = _l2_norm(begin - center_b, np.where(same, end - center_b, dst_w / 2), density)
    full = _l2_norm(np.full(nbins, -dst_w / 2), np.full(nbins, dst_w / 2), density)
    terms[:, 1] = np.where(same, 0.0, ((d_end - d_begin - 1).astype(F32) * full).astype(F32))
    center_e = d_end * dst_w + dst_w / 2
    tail = _l2_norm(np.full(nbins, -dst_w / 2), end - center_e, density)
    terms[:, 2] = np.where(same, 0.0, tail)
    return float(np.cumsum(terms.reshape(-1))[-1]) if terms.size else 0.0


def l2_approx_qparams(x: np.ndarray, precision: int = 8) -> QParams:
    """L2ErrorMinimization::NonlinearQuantizationParamsSearch on the histogram of ``x`` (not symmetric)."""
    lo0, hi0 = f32(x.min()), f32(x.max())
    if f32(f32(hi0 - lo0) / f32(NBINS)) == 0:
        return choose_qparams(float(lo0), float(hi0), precision)
    bins_f, lo, hi = _adjust_to_include_zero(histogram(x, lo0, hi0), lo0, hi0)
    nbins = bins_f.size
    width = f32(f32(hi - lo) / f32(nbins))
    if width == 0:
        return choose_qparams(float(lo), float(hi), precision)
    cdf = np.cumsum(bins_f.astype(np.int64))
    total = float(cdf[-1])
    alpha, beta, step = 0.0, 1.0, 0.00001
    start, stop, norm_min = 0, nbins - 1, math.inf
    while alpha < beta:
        next_alpha, next_beta = alpha + step, beta - step
        i, j = start, stop
        while i < stop and cdf[i] < next_alpha * total:
            i += 1
        while j > start and cdf[j] > next_beta * total:
            j -= 1
        new_start, new_stop = start, stop
        if i - start > stop - j:
            new_start, alpha = i, next_alpha
        else:
            new_stop, beta = j, next_beta
        if new_start == start and new_stop == stop:
            continue
        norm = _norm(bins_f, width, new_start, new_stop, precision)
        if norm > norm_min:
            break
        norm_min, start, stop = norm, new_start, new_stop
    new_hi = f32(lo + f32(width * f32(stop + 1)))
    new_lo = f32(lo + f32(width * f32(start)))
    return choose_qparams(float(new_lo), float(new_hi), precision)
