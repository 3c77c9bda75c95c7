"""``caffe2.python.operator_test.fused_nbit_rowwise_test_helper``: the greedy range search of Caffe2's
n-bit row-wise quantizers (engine ``GREEDY``), as the float32 numerics of its kernel compute it.

A row ``x`` is quantized to ``bit_rate`` bits over a range ``[xmin, xmax]``: ``scale = (xmax -
xmin) / (2**bit_rate - 1)`` (1 for an empty range), with ``xmin`` and ``scale`` rounded through
float16 (the fused row stores them as float16), ``q = clip(round((x - xmin) / scale), 0, 2**bit_rate
- 1)``. The search starts from the row's min and max and, ``n_bins`` steps of ``(max - min) / n_bins``
at a time, moves whichever end lowers the L2 error more, while the range stays wider than ``(1 -
ratio) * n_bins`` steps; it returns the best local optimum seen (the full range if none).
"""

from __future__ import annotations

import numpy as np

_LANES = 8  # the kernel sums squared errors in 8 float32 lanes, then the lanes, then the tail


def _l2_error(x: np.ndarray, xq: np.ndarray) -> np.float32:
    err = np.square((x - xq).astype(np.float32))
    body = len(err) // _LANES * _LANES
    lanes = np.zeros(_LANES, dtype=np.float32)
    for start in range(0, body, _LANES):
        lanes += err[start : start + _LANES]
    total = np.float32(0)
    for v in lanes:
        total = np.float32(total + v)
    for v in err[body:]:
        total = np.float32(total + v)
    return np.sqrt(total)


def _compress_uniform_simplified(
    X: np.ndarray, bit_rate: int, xmin: np.float32, xmax: np.float32, fp16_scale_bias: bool = True
) -> tuple[np.ndarray, np.float32]:
    """``X`` quantized over ``[xmin, xmax]`` and dequantized back (float32), and its L2 error."""
    levels = np.float32(2**bit_rate - 1)
    if fp16_scale_bias:
        xmin = np.float32(np.float16(xmin))
    span = np.float32(xmax - xmin)
    scale = np.float32(1) if span == 0 else np.float32(span / levels)
    if fp16_scale_bias:
        scale = np.float32(np.float16(scale))
    q = np.clip(np.round((X - xmin) * (np.float32(1) / scale)), 0, levels)
    xq = (q * scale + xmin).astype(np.float32)
    return xq, _l2_error(X, xq)


def param_search_greedy(
    x: np.ndarray, bit_rate: int, n_bins: int = 200, ratio: float = 0.16
) -> tuple[np.float32, np.float32]:
    """The ``(xmin, xmax)`` the greedy search picks for one row ``x`` (float32)."""
    lo, hi = np.min(x), np.max(x)
    step = (hi - lo) / np.float32(n_bins)
    narrowest = np.float32(n_bins) * (np.float32(1) - np.float32(ratio)) * step
    _, loss = _compress_uniform_simplified(x, bit_rate, lo, hi)
    best = None
    while lo + narrowest < hi:
        _, loss_left = _compress_uniform_simplified(x, bit_rate, lo + step, hi)
        _, loss_right = _compress_uniform_simplified(x, bit_rate, lo, hi - step)
        if loss < loss_left and loss < loss_right and (best is None or loss < best[2]):
            best = (lo, hi, loss)
        if loss_left < loss_right:
            lo, loss = lo + step, loss_left
        else:
            hi, loss = hi - step, loss_right
    return (best[0], best[1]) if best is not None else (np.min(x), np.max(x))
