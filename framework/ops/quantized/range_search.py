"""Caffe2's greedy range search for n-bit row-wise quantization (``param_search_greedy`` of
``fused_rowwise_nbitfake_conversion_ops.cc``), the kernel its ``GREEDY`` engine runs.

Starting from a row's [min, max], the range is narrowed one step ((max - min) / 200) at a time from the side
whose move gives the smaller L2 quantization error, while the range spans more than 168 steps; the last
local optimum seen (a range better than both its moves and than every earlier optimum) is kept, else
[min, max]. The error of a range is Caffe2's ``compress_uniform_simplified_``: bias rounded to float16,
scale = float16(range / (2^bits - 1)) (1 for an empty range), codes rounded half-to-even and clamped,
summed in float32 over 8 lanes (the AVX loop), then the tail, then the square root (a compiled loop: the
search runs two such sums per step, about 64 per row).

numba is imported and the loop decorated on the first search, not at import: the quantized family registers
its ops without loading numba's compiler. Without numba (or with ``FRAMEWORK_NO_JIT``) a numpy pass computes
the same float32 sums in the same order; the loop's first call is guarded (kernel_support.call, family
``range_search``: a failed compile disables it with one RuntimeWarning and the numpy pass runs).
"""

from __future__ import annotations

import os

import numpy as np

from framework.kernels import kernel_support
from framework.kernels.kernel_support import KernelUnavailable
from framework.runtime.state import RUNTIME

FAMILY = "range_search"

F32, F16 = np.float32, np.float16
N_BINS, RATIO, LANES = 200, F32(0.16), 8


_COMPILED: list = RUNTIME.held("ops.quantized.range_search", list)  # the compiled _row_losses, once built


def _row_losses_kernel():
    """``_row_losses`` compiled by numba (decorated on the first call, in the kernels' cache folder; numba's
    disk cache keys it by this file and the function's name), or None: numba missing, FRAMEWORK_NO_JIT set,
    or its compile failed in this process."""
    if not _COMPILED:
        try:
            if os.environ.get("FRAMEWORK_NO_JIT", "") not in ("", "0"):
                raise ImportError("FRAMEWORK_NO_JIT is set")
            import numba

            from framework.kernels import machine

            with machine.numba_cache():
                _COMPILED.append(numba.njit(cache=True, nogil=True)(_row_losses))
        except ImportError:  # numba is optional: the numpy pass runs
            _COMPILED.append(None)
    return None if FAMILY in kernel_support.disabled() else _COMPILED[0]


def available() -> bool:
    """Whether the compiled loop may run in this process (the first call imports numba)."""
    return _row_losses_kernel() is not None


def warm_up() -> None:
    """Compile (or load from numba's cache) the loop with the argument types the search passes."""
    if available():
        one = np.ones(1, F32)
        quantization_losses(np.zeros((1, 9), F32), one - 1, one, 4)


def _row_losses_numpy(x, xmin, scale, inverse, qmax, out):
    """``_row_losses`` in numpy: the same float32 operations in the same order (8 lanes summed block by
    block, the lanes in order, then the tail)."""
    rows, cols = x.shape
    body = cols // LANES * LANES
    lo, s, inv = xmin[:, None], scale[:, None], inverse[:, None]
    q = np.minimum(np.maximum(np.rint((x - lo) * inv), F32(0.0)), qmax)
    e = x - (q * s + lo)
    sq = (e * e).astype(F32)
    lanes = np.zeros((rows, LANES), F32)
    for k in range(0, body, LANES):
        lanes += sq[:, k : k + LANES]
    norm = np.zeros(rows, F32)
    for j in range(LANES):
        norm += lanes[:, j]
    for k in range(body, cols):
        norm += sq[:, k]
    out[:] = np.sqrt(norm)


def _row_losses(x, xmin, scale, inverse, qmax, out):  # pragma: no cover - compiled
    rows, cols = x.shape
    body = cols // LANES * LANES
    zero = np.float32(0.0)
    lanes = np.zeros(LANES, np.float32)
    for r in range(rows):
        lo, s, inv = xmin[r], scale[r], inverse[r]
        lanes[:] = zero
        for k in range(0, body, LANES):
            for j in range(LANES):
                v = x[r, k + j]
                q = min(max(np.rint((v - lo) * inv), zero), qmax)
                e = v - (q * s + lo)
                lanes[j] += e * e
        norm = zero
        for j in range(LANES):
            norm += lanes[j]
        for k in range(body, cols):
            v = x[r, k]
            q = min(max(np.rint((v - lo) * inv), zero), qmax)
            e = v - (q * s + lo)
            norm += e * e
        out[r] = np.sqrt(norm)


def quantization_losses(x: np.ndarray, xmin: np.ndarray, xmax: np.ndarray, bits: int) -> np.ndarray:
    """Per row of the C-contiguous float32 matrix ``x``: the L2 error of quantizing it on [xmin, xmax] with
    ``bits`` bits, as Caffe2 sums it (8 float32 lanes in order, the lanes added in order, then the tail)."""
    xmin = xmin.astype(F16).astype(F32)
    data_range = (xmax - xmin).astype(F32)
    qmax = F32((1 << bits) - 1)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        scale = np.where(data_range == 0, F32(1.0), (data_range / qmax).astype(F16).astype(F32)).astype(F32)
        inverse = (F32(1.0) / scale).astype(F32)
    out = np.empty(len(x), F32)
    args = (x, xmin, scale, inverse, qmax, out)
    kernel = _row_losses_kernel()
    if kernel is not None:
        try:
            kernel_support.call(FAMILY, kernel, args)
            return out
        except KernelUnavailable:
            pass
    _row_losses_numpy(*args)
    return out


def greedy_row_ranges(flat: np.ndarray, bits: int) -> tuple[np.ndarray, np.ndarray]:
    """Per row of the 2-D float32 ``flat`` (at least one column): the (min, max) Caffe2's greedy search picks
    (module doc), all rows searched together."""
    x = np.ascontiguousarray(flat, F32)
    xmin, xmax = x.min(axis=1), x.max(axis=1)
    stepsize = ((xmax - xmin) / F32(N_BINS)).astype(F32)
    min_bins = int(F32(N_BINS) * (F32(1) - RATIO))
    thr = (F32(min_bins) * stepsize).astype(F32)
    cur = quantization_losses(x, xmin, xmax, bits)
    best = cur.copy()
    lo, hi = xmin.copy(), xmax.copy()
    active = (lo + thr).astype(F32) < hi
    while active.any():
        a = np.flatnonzero(active)
        up, down = (lo[a] + stepsize[a]).astype(F32), (hi[a] - stepsize[a]).astype(F32)
        rows = x if len(a) == len(x) else x[a]
        loss1 = quantization_losses(rows, up, hi[a], bits)
        loss2 = quantization_losses(rows, lo[a], down, bits)
        c = cur[a]
        found = (c < loss1) & (c < loss2) & (c < best[a])
        best[a[found]] = c[found]
        xmin[a[found]], xmax[a[found]] = lo[a[found]], hi[a[found]]
        left = loss1 < loss2
        lo[a[left]], cur[a[left]] = up[left], loss1[left]
        hi[a[~left]], cur[a[~left]] = down[~left], loss2[~left]
        active[a] = (lo[a] + thr[a]).astype(F32) < hi[a]
    return xmin, xmax
