"""The requantization epilogue of ONNX's integer GEMMs (QLinearConv, QLinearMatMul), compiled by numba.

``rescale_into(parts, bias, ratio, y_zp, lo, hi, out)``: ``out[m, p] = clip(rint(acc * ratio[m] + y_zp), lo, hi)``
with ``acc = sum_c parts[c, m, p] + bias[m]``: the parts are float32 products of K-slices holding exact integers
(summed in float64, exact), the ratio the float32 ``x_scale * w_scale / y_scale`` widened to float64, as ONNX's
reference multiplies its int32 result; rint rounds half to even. One pass instead of numpy's five.

``quantize_into`` / ``dequantize_into``: QuantizeLinear / DequantizeLinear with one scale and zero point on 8-bit
codes in one pass each; ``depthwise_into``: a depthwise QLinearConv / ConvInteger as one int32 loop with the
rescale (or the int32 sums) per output pixel.

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


# -- depthwise QLinearConv / ConvInteger (group = C = M) -----------------------------------------------------
def _depthwise(x, x_zp, w, fbias, ratio, sh, sw, dh, dw, head_h, head_w, oh, ow, fzp, lo, hi, mode, out):
    """A depthwise NHWC conv of uint8 codes accumulated in int32 per output pixel (out-of-image taps skipped: they
    read the zero point) with ONNX's epilogues: mode 2 ``clip(rint((acc + fbias) * ratio +
    fzp), lo, hi)`` per channel (QLinearConv), mode 1 the int32 sum (ConvInteger)."""
    n, h, wd, c = x.shape
    kh, kw = w.shape[0], w.shape[1]
    acc = np.empty(c, np.int32)
    flo, fhi = np.float64(lo), np.float64(hi)
    for b in range(n):
        for oy in range(oh):
            for ox in range(ow):
                acc[:] = 0
                for ky in range(kh):
                    iy = oy * sh - head_h + ky * dh
                    if iy < 0 or iy >= h:
                        continue
                    for kx in range(kw):
                        ix = ox * sw - head_w + kx * dw
                        if ix < 0 or ix >= wd:
                            continue
                        xr, wr = x[b, iy, ix], w[ky, kx]
                        for ch in range(c):
                            acc[ch] += (np.int32(xr[ch]) - x_zp) * wr[ch]
                o = out[b, oy, ox]
                if mode == 1:
                    for ch in range(c):
                        o[ch] = acc[ch]
                else:
                    for ch in range(c):
                        v = np.rint((np.float64(acc[ch]) + fbias[ch]) * ratio[ch] + fzp)
                        o[ch] = min(max(v, flo), fhi)


def depthwise_into(x, x_zp: int, wc, fbias, ratio, geo, fzp: float, lo: int, hi: int, out) -> bool:
    """A depthwise conv of NHWC uint8 ``x`` (N, H, W, C; contiguous) with centred int32 taps ``wc`` (KH, KW, C)
    into contiguous ``out`` (N, OH, OW, C): ONNX's float64 rescale (``ratio`` float64 per channel, with the
    float64 ``fbias``) into int8/uint8, or (``ratio`` None) the int32 sums. ``geo``: the resolved geometry.
    False (nothing written) without numba or when the compile failed (family ``int8``, guarded)."""
    from framework.kernels import kernel_support
    from framework.kernels.kernel_support import KernelUnavailable

    kernel = _flat_kernel("depthwise", _depthwise)
    if kernel is None or "int8" in kernel_support.disabled():
        return False
    c = x.shape[3]
    zeros = np.zeros(c, np.float64)
    (sh, sw), (dh, dw), (hh, hw), (oh, ow) = geo.stride, geo.dilation, geo.head, geo.out
    args = (
        x, np.int32(x_zp), wc, zeros if fbias is None else fbias, zeros if ratio is None else ratio,
        int(sh), int(sw), int(dh), int(dw), int(hh), int(hw), int(oh), int(ow), np.float64(fzp), np.int64(lo),
        np.int64(hi), np.int64(1 if ratio is None else 2), out,
    )  # fmt: skip
    try:
        kernel_support.call("int8", kernel, args)
    except KernelUnavailable:
        return False
    return True
