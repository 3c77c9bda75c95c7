"""The requantization epilogue of ONNX's integer GEMMs (QLinearConv, QLinearMatMul), compiled by numba.

``rescale_into(parts, bias, ratio, y_zp, lo, hi, out)``: ``out[m, p] = clip(rint(acc * ratio[m] + y_zp), lo, hi)``
with ``acc = sum_c parts[c, m, p] + bias[m]``: the parts are float32 products of K-slices holding exact integers
(summed in float64, exact), the ratio the float32 ``x_scale * w_scale / y_scale`` widened to float64, as ONNX's
reference multiplies its int32 result; rint rounds half to even. One pass instead of numpy's five.

Compiled on first use (numba's disk cache keeps it); without numba (optional) the same float64 arithmetic runs as
numpy passes, giving the same codes.
"""

from __future__ import annotations

import numpy as np

from framework.runtime.state import RUNTIME

_COMPILED: dict = RUNTIME.held("ops.onnx.qlinear_kernels", dict)


def _rescale(parts, bias, ratio, y_zp, lo, hi, out):
    n_parts, m, p = parts.shape
    row = np.empty(p, np.float64)
    for i in range(m):
        for j in range(p):  # each inner loop runs along a row, so it vectorizes
            row[j] = np.float64(parts[0, i, j])
        for c in range(1, n_parts):
            for j in range(p):
                row[j] += np.float64(parts[c, i, j])
        b, r = bias[i], ratio[i]
        for j in range(p):
            v = np.rint((row[j] + b) * r + y_zp)
            out[i, j] = min(max(v, lo), hi)


def _kernel():
    if "rescale" not in _COMPILED:
        try:
            from framework.kernels import cached_jit
        except ImportError:  # numba is optional: the numpy passes run instead
            _COMPILED["rescale"] = None
        else:
            _COMPILED["rescale"] = cached_jit.njit(cache=True, nogil=True, boundscheck=False)(_rescale)
    return _COMPILED["rescale"]


def rescale_numpy(parts: np.ndarray, bias: np.ndarray, ratio: np.ndarray, y_zp: float, lo: int, hi: int):
    """The float64 codes ``rescale_into`` writes, as numpy passes."""
    acc = parts.astype(np.float64).sum(axis=0) + bias[:, None]
    return np.clip(np.rint(acc * ratio[:, None] + y_zp), lo, hi)


def rescale_into(parts, bias, ratio, y_zp: float, lo: int, hi: int, out: np.ndarray) -> None:
    """``out`` ((M, P), int8 or uint8) = the requantized sum of ``parts`` ((parts, M, P) float32) plus ``bias``
    (float64 (M,)), scaled by ``ratio`` (float64 (M,)) (module doc)."""
    kernel = _kernel()
    if kernel is None or not (parts.flags.c_contiguous and out.flags.c_contiguous):
        out[...] = rescale_numpy(parts, bias, ratio, y_zp, lo, hi)
        return
    kernel(parts, bias, ratio, np.float64(y_zp), np.float64(lo), np.float64(hi), out)


# -- QuantizeLinear / DequantizeLinear with one scale and zero point, 8-bit codes, float32 ---------------------
def _quantize(x, s, z, lo, hi, out):
    for i in range(x.size):
        v = np.rint(x[i] / s)  # float32 / float32, as numpy's x / scale
        if v != v:
            q = np.float32(0.0)
        elif v == np.inf:  # numpy's nan_to_num puts +-inf at the type's ends before the zero point is added
            q = np.float32(hi)
        elif v == -np.inf:
            q = np.float32(lo)
        else:
            q = min(max(v, np.float32(lo - 2**17)), np.float32(hi + 2**17))
        n = np.int64(q) + z
        out[i] = min(max(n, lo), hi)


def _dequantize(x, z, s, out):
    for i in range(x.size):
        out[i] = (np.float32(x[i]) - z) * s


def _flat_kernel(name: str, fn):
    if name not in _COMPILED:
        try:
            from framework.kernels import cached_jit
        except ImportError:  # numba is optional: the numpy passes run instead
            _COMPILED[name] = None
        else:
            _COMPILED[name] = cached_jit.njit(cache=True, nogil=True, boundscheck=False)(fn)
    return _COMPILED[name]


def quantize_into(x: np.ndarray, scale: np.float32, zero_point: int, lo: int, hi: int, out: np.ndarray) -> bool:
    """ONNX QuantizeLinear of float32 ``x`` with one float32 scale into 8-bit ``out`` in one compiled pass:
    ``clip(int(clip(rint(x / scale), lo - 2**17, hi + 2**17)) + zero_point, lo, hi)`` with NaN as 0 and +-inf
    as hi / lo before the zero point is added (the numpy passes' arithmetic); False (nothing written) without
    numba or when an array is not contiguous."""
    kernel = _flat_kernel("quantize", _quantize)
    if kernel is None or not (x.flags.c_contiguous and out.flags.c_contiguous):
        return False
    kernel(x.reshape(-1), np.float32(scale), np.int64(zero_point), np.int64(lo), np.int64(hi), out.reshape(-1))
    return True


def dequantize_into(x: np.ndarray, zero_point: np.float32, scale: np.float32, out: np.ndarray) -> bool:
    """ONNX DequantizeLinear of 8-bit ``x`` with one zero point and float32 scale into float32 ``out`` in one
    compiled pass: ``(float32(x) - zero_point) * scale``; False (nothing written) as ``quantize_into``."""
    kernel = _flat_kernel("dequantize", _dequantize)
    if kernel is None or not (x.flags.c_contiguous and out.flags.c_contiguous):
        return False
    kernel(x.reshape(-1), np.float32(zero_point), np.float32(scale), out.reshape(-1))
    return True
