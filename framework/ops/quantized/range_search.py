"""Caffe2's greedy range search for n-bit row-wise quantization (``param_search_greedy`` of
``fused_rowwise_nbitfake_conversion_ops.cc``), the kernel its ``GREEDY`` engine runs.

Starting from a row's [min, max], the range is narrowed one step ((max - min) / 200) at a time from the side
whose move gives the smaller L2 quantization error, while the range spans more than 168 steps; the last
local optimum seen (a range better than both its moves and than every earlier optimum) is kept, else
[min, max]. The error of a range is Caffe2's ``compress_uniform_simplified_``: bias rounded to float16,
scale = float16(range / (2^bits - 1)) (1 for an empty range), codes rounded half-to-even and clamped,
summed in float32 over 8 lanes (the AVX loop), then the tail, then the square root.
"""

from __future__ import annotations

import numpy as np

F32, F16 = np.float32, np.float16
N_BINS, RATIO, LANES = 200, F32(0.16), 8


def quantization_loss(x: np.ndarray, xmin: np.float32, xmax: np.float32, bits: int) -> np.float32:
    """L2 error of quantizing the float32 row ``x`` on [xmin, xmax] with ``bits`` bits, as Caffe2 sums it."""
    xmin = F32(F16(xmin))
    data_range = F32(xmax - xmin)
    qmax = F32((1 << bits) - 1)
    scale = F32(1.0) if data_range == 0 else F32(F16(data_range / qmax))
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        inverse = F32(1.0) / scale
        q = np.clip(np.rint((x - xmin) * inverse), F32(0), qmax).astype(F32)
        err = x - (q * scale + xmin)
        sq = (err * err).astype(F32)
    body = len(x) // LANES * LANES
    lanes = np.zeros(LANES, F32)
    for row in sq[:body].reshape(-1, LANES):
        lanes += row
    norm = F32(0)
    for v in lanes:
        norm = F32(norm + v)
    for v in sq[body:]:
        norm = F32(norm + v)
    return F32(np.sqrt(norm))


def param_search_greedy(x: np.ndarray, bits: int) -> tuple[np.float32, np.float32]:
    """The (xmin, xmax) Caffe2's greedy search picks for the float32 row ``x`` (see the module doc)."""
    xmin, xmax = F32(x.min()), F32(x.max())
    stepsize = F32((xmax - xmin) / F32(N_BINS))
    min_bins = int(F32(N_BINS) * (F32(1) - RATIO))
    best = cur = quantization_loss(x, xmin, xmax, bits)
    lo, hi = xmin, xmax
    thr = F32(F32(min_bins) * stepsize)
    while F32(lo + thr) < hi:
        loss1 = quantization_loss(x, F32(lo + stepsize), hi, bits)
        loss2 = quantization_loss(x, lo, F32(hi - stepsize), bits)
        if cur < loss1 and cur < loss2 and cur < best:
            best, xmin, xmax = cur, lo, hi
        if loss1 < loss2:
            lo, cur = F32(lo + stepsize), loss1
        else:
            hi, cur = F32(hi - stepsize), loss2
    return xmin, xmax


def greedy_row_ranges(flat: np.ndarray, bits: int) -> tuple[np.ndarray, np.ndarray]:
    """Per row of the 2-D float32 ``flat``: the greedy (min, max) arrays."""
    mn, mx = np.empty(len(flat), F32), np.empty(len(flat), F32)
    for r, row in enumerate(flat):
        mn[r], mx[r] = param_search_greedy(row, bits)
    return mn, mx
