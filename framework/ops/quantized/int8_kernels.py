"""Compiled integer kernels of the QNNPACK-arithmetic int8 ops (Int8Conv/Int8ConvRelu/Int8FC).

- ``requantize_into(acc, bias, mult, shift, y_zp, lo, out)``: the GEMM epilogue: ``out[p, m] =
  q31(wrap_int32(acc[p, m]) + bias[m])`` (``int8_conv.q31_requantize``'s arithmetic, in int64 per element)
  over a float accumulator holding exact integers, written as uint8 in one pass;
- ``depthwise_into(x, x_zp, w, bias, geometry..., mult, shift, y_zp, lo, out)``: a depthwise NHWC conv
  (group = C = M) accumulated in int32 per output pixel straight from the uint8 codes (padding reads the zero
  point, so out-of-image taps are skipped), requantized as above in the same loop.

Both give the numpy path's results bit for bit: the accumulator is the same exact integer (int32 wrap of the
dot product, then the bias added in int64), and the Q31 steps are the same int64 operations (a multiplication
beyond int64 wraps in both).
"""

from __future__ import annotations

import numpy as np

from framework.kernels import cached_jit

_jit = cached_jit.njit(cache=True, nogil=True, boundscheck=False)


@_jit
def _q31(a, mult, shift, y_zp, lo):
    q = (a * mult + (1 << 30)) >> 31
    mask = (np.int64(1) << shift) - 1
    rem = (q & mask) - (1 if a < 0 else 0)
    n = (q >> shift) + (1 if rem > (mask >> 1) else 0)
    n += y_zp
    if n < lo:
        n = lo
    if n > 255:
        n = 255
    return n


@_jit
def _wrap32(v):
    return ((v + (np.int64(1) << 31)) & np.int64(0xFFFFFFFF)) - (np.int64(1) << 31)


@_jit
def _requantize(acc, bias, mult, shift, y_zp, lo, out):
    p, m = acc.shape
    for i in range(p):
        for j in range(m):
            a = _wrap32(np.int64(acc[i, j])) + np.int64(bias[j])
            out[i, j] = _q31(a, mult, shift, y_zp, lo)


@_jit
def _depthwise(x, x_zp, w, bias, sh, sw, dh, dw, head_h, head_w, oh, ow, mult, shift, y_zp, lo, out):
    n, h, wd, c = x.shape
    kh, kw = w.shape[0], w.shape[1]
    acc = np.empty(c, np.int32)
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
                        for ch in range(c):
                            acc[ch] += (np.int32(x[b, iy, ix, ch]) - x_zp) * w[ky, kx, ch]
                for ch in range(c):
                    a = np.int64(acc[ch]) + np.int64(bias[ch])
                    out[b, oy, ox, ch] = _q31(a, mult, shift, y_zp, lo)


def _canonical(a: np.ndarray) -> bool:
    """C-contiguous with the strides numba's C-layout code assumes (numpy may give size-1 dims any stride)."""
    step, want = a.itemsize, []
    for d in reversed(a.shape):
        want.append(step)
        step *= d
    return a.flags.c_contiguous and a.strides == tuple(reversed(want))


def _c(a: np.ndarray) -> np.ndarray:
    return a if _canonical(a) else a.copy()


def _run_into(kernel, args: list, out: np.ndarray) -> None:
    dst = out if _canonical(out) else np.empty(out.shape, out.dtype)
    kernel(*args, dst)
    if dst is not out:
        out[...] = dst


def requantize_into(acc: np.ndarray, bias: np.ndarray, params: tuple[int, int], y_zp: int, lo: int, out: np.ndarray):
    """``out`` (uint8, acc's 2-D shape) = Q31 requantization of ``wrap_int32(acc) + bias`` (module doc)."""
    mult, shift = params
    _run_into(_requantize, [_c(acc), _c(bias), np.int64(mult), np.int64(shift), np.int64(y_zp), np.int64(lo)], out)


def depthwise_into(x, x_zp, wc, bias, geo, params, y_zp, lo, out) -> None:
    """Depthwise conv of NHWC uint8 ``x`` with centered int32 taps ``wc`` (KH, KW, C) into uint8 ``out``
    (N, OH, OW, C); ``geo``: the resolved conv geometry (stride, dilation, head pads, output size)."""
    mult, shift = params
    (sh, sw), (dh, dw), (hh, hw), (oh, ow) = geo.stride, geo.dilation, geo.head, geo.out
    args = [
        _c(x), np.int32(x_zp), _c(wc), _c(bias), sh, sw, dh, dw, hh, hw, oh, ow,
        np.int64(mult), np.int64(shift), np.int64(y_zp), np.int64(lo),
    ]  # fmt: skip
    _run_into(_depthwise, args, out)
