"""Integer kernels of the QNNPACK-arithmetic int8 ops (Int8Conv/Int8ConvRelu/Int8FC), compiled by numba.

- ``requantize_into(acc, bias, mult, shift, y_zp, lo, out)``: the GEMM epilogue: ``out[p, m] =
  q31(wrap_int32(sum_c acc[c, p, m]) + bias[m])`` (``q31_requantize``'s arithmetic, in int64 per element) over
  float partial products of K-slices holding exact integers, summed in int64, written as uint8 in one pass;
- ``depthwise_into(x, x_zp, w, bias, geometry..., mult, shift, y_zp, lo, out)``: a depthwise NHWC conv
  (group = C = M) accumulated in int32 per output pixel straight from the uint8 codes (padding reads the zero
  point, so out-of-image taps are skipped), requantized as above in the same loop.

The loops are compiled on first use (numba's disk cache keeps them), not at import: registering the quantized
family loads no compiler. Without numba (an optional dependency) both run as numpy passes over int64 arrays
(``q31_requantize``, ``wrap_int32``); the compiled loops give those passes' results bit for bit: the
accumulator is the same exact integer (int32 wrap of the dot product, then the bias added in int64), and the
Q31 steps are the same int64 operations (a multiplication beyond int64 wraps in both). ``FRAMEWORK_NO_JIT``
selects the numpy passes too. The first call of each loop is guarded (kernel_support.call, family ``int8``): a
compile that fails disables the family for the process with one RuntimeWarning and the numpy passes run.
``warm_up()`` compiles the loops with the argument types the ops pass (``framework warmup``).
"""

from __future__ import annotations

import os

import numpy as np

from framework.kernels import kernel_support
from framework.kernels.kernel_support import KernelUnavailable
from framework.runtime.state import RUNTIME

FAMILY = "int8"


def q31_requantize(acc: np.ndarray, params: tuple[int, int], y_zp: int, lo: int) -> np.ndarray:
    """QNNPACK's q31_requantize over an int64 array of int32 accumulators."""
    mult, shift = params
    q = (acc * mult + (1 << 30)) >> 31
    mask = (1 << shift) - 1
    rem = (q & mask) - (acc < 0)
    n = (q >> shift) + (rem > (mask >> 1))
    return np.clip(n, lo - y_zp, 255 - y_zp) + y_zp


def wrap_int32(acc: np.ndarray) -> np.ndarray:
    """int32 wrap-around of exact integer accumulators (int64, or float holding integers; QNNPACK accumulates
    in int32)."""
    acc = np.asarray(acc)
    if acc.dtype.kind == "f":
        acc = np.rint(acc)
    return acc.astype(np.int64).astype(np.int32).astype(np.int64)


_COMPILED: dict = RUNTIME.held("ops.quantized.int8_kernels", dict)


def _compiled():
    """name -> compiled loop, built on the first call; empty without numba."""
    if not _COMPILED:
        try:
            if os.environ.get("FRAMEWORK_NO_JIT", "") not in ("", "0"):
                raise ImportError("FRAMEWORK_NO_JIT is set")
            from framework.kernels import cached_jit
        except ImportError:  # numba is optional: the numpy passes run instead
            _COMPILED[None] = None
            return _COMPILED
        from framework.kernels import machine

        jit = cached_jit.njit(cache=True, nogil=True, boundscheck=False)
        with machine.numba_cache():  # numba fixes a function's cache folder when it is decorated
            for fn in (_q31, _wrap32):  # after a RUNTIME.reset these globals are the dispatchers of before
                fn = getattr(fn, "py_func", fn)
                globals()[fn.__name__] = jit(fn)
            _COMPILED["requantize"] = jit(_requantize)
            _COMPILED["depthwise"] = jit(_depthwise)
            _COMPILED["add"] = jit(_add)
    return _COMPILED


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


def _wrap32(v):
    return ((v + (np.int64(1) << 31)) & np.int64(0xFFFFFFFF)) - (np.int64(1) << 31)


def _requantize(acc, bias, mult, shift, y_zp, lo, out):
    parts, p, m = acc.shape
    if parts == 1:
        for i in range(p):
            for j in range(m):
                out[i, j] = _q31(_wrap32(np.int64(acc[0, i, j])) + np.int64(bias[j]), mult, shift, y_zp, lo)
        return
    row = np.empty(m, np.int64)
    for i in range(p):  # each inner loop runs along a row, so it vectorizes
        for j in range(m):
            row[j] = np.int64(acc[0, i, j])
        for c in range(1, parts):
            for j in range(m):
                row[j] += np.int64(acc[c, i, j])
        for j in range(m):
            out[i, j] = _q31(_wrap32(row[j]) + np.int64(bias[j]), mult, shift, y_zp, lo)


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


def available() -> bool:
    """Whether the compiled loops may run in this process (the first call imports numba)."""
    return _kernel("add") is not None


def _kernel(name: str):
    """The compiled loop ``name``, or None (numba missing, FRAMEWORK_NO_JIT set, or the family disabled)."""
    if FAMILY in kernel_support.disabled():
        return None
    return _compiled().get(name)


def _guarded(kernel, args) -> bool:
    """``kernel(*args)`` with its first call guarded; False when it failed to compile (nothing was written)."""
    try:
        kernel_support.call(FAMILY, kernel, tuple(args))
    except KernelUnavailable:
        return False
    return True


def _run_into(kernel, args: list, out: np.ndarray) -> bool:
    dst = out if _canonical(out) else np.empty(out.shape, out.dtype)
    if not _guarded(kernel, [*args, dst]):
        return False
    if dst is not out:
        out[...] = dst
    return True


def _add(a, b, am, bm, offset, shift, y_zp, lo, out):
    mask = (np.int64(1) << shift) - 1
    half = mask >> 1
    for i in range(a.size):
        acc = np.int64(a[i]) * am + np.int64(b[i]) * bm - offset
        rem = (acc & mask) - (1 if acc < 0 else 0)
        n = (acc >> shift) + (1 if rem > half else 0) + y_zp
        out[i] = min(max(n, lo), 255)


def add_into(a: np.ndarray, a_zp: int, b: np.ndarray, b_zp: int, params: tuple, y_zp: int, lo: int, out) -> bool:
    """QNNPACK's q8 add (``int8_elementwise.add_quantized``'s arithmetic) of two same-shape uint8 arrays into
    uint8 ``out`` in one compiled pass (in place over ``a`` or ``b`` allowed); False without numba."""
    kernel = _kernel("add")
    if kernel is None:
        return False
    am, bm, shift = params
    flat = [x if _canonical(x) else x.copy() for x in (a, b)]
    args = [f.reshape(-1) for f in flat] + [np.int64(am), np.int64(bm), np.int64(am * a_zp + bm * b_zp)]
    args += [np.int64(shift), np.int64(y_zp), np.int64(lo)]
    if _canonical(out):
        return _run_into(kernel, args, out.reshape(-1))
    tmp = np.empty(out.size, out.dtype)
    if not _run_into(kernel, args, tmp):
        return False
    out[...] = tmp.reshape(out.shape)
    return True


def requantize_into(acc: np.ndarray, bias: np.ndarray, params: tuple[int, int], y_zp: int, lo: int, out: np.ndarray):
    """``out`` (uint8, (P, M)) = Q31 requantization of ``wrap_int32(sum of acc's parts) + bias`` (module doc);
    ``acc``: (P, M), or (parts, P, M) partial products holding exact integers, summed exactly."""
    if acc.ndim == 2:
        acc = acc[None]
    kernel = _kernel("requantize")
    mult, shift = params
    args = [_c(acc), _c(bias), np.int64(mult), np.int64(shift), np.int64(y_zp), np.int64(lo)]
    if kernel is None or not _run_into(kernel, args, out):
        total = acc[0].astype(np.int64)
        for part in acc[1:]:
            total += part.astype(np.int64)
        out[...] = q31_requantize(wrap_int32(total) + bias, params, y_zp, lo)


def depthwise_into(x, x_zp, wc, bias, geo, params, y_zp, lo, out) -> None:
    """Depthwise conv of NHWC uint8 ``x`` with centered int32 taps ``wc`` (KH, KW, C) into uint8 ``out``
    (N, OH, OW, C); ``geo``: the resolved conv geometry (stride, dilation, head pads, output size)."""
    kernel = _kernel("depthwise")
    if kernel is not None:
        mult, shift = params
        (sh, sw), (dh, dw), (hh, hw), (oh, ow) = geo.stride, geo.dilation, geo.head, geo.out
        args = [
            _c(x), np.int32(x_zp), _c(wc), _c(bias), int(sh), int(sw), int(dh), int(dw), int(hh), int(hw),
            int(oh), int(ow), np.int64(mult), np.int64(shift), np.int64(y_zp), np.int64(lo),
        ]  # fmt: skip
        if _run_into(kernel, args, out):
            return
    out[...] = q31_requantize(_depthwise_numpy(x, x_zp, wc, geo) + bias, params, y_zp, lo)


def warm_up() -> None:
    """Compile (or load from numba's cache) the three loops with the argument types the ops pass, on tiny
    arrays; nothing without numba. A failed compile disables the family (one RuntimeWarning)."""
    from framework.kernels.geometry import Geometry

    if not available():
        return
    u8 = np.zeros(4, np.uint8)
    add_into(u8, 0, u8, 0, (1, 1, 1), 0, 0, np.empty(4, np.uint8))
    requantize_into(
        np.zeros((1, 2, 2), np.float32), np.zeros(2, np.int64), (1 << 30, 1), 0, 0, np.empty((2, 2), np.uint8)
    )
    geo = Geometry((2, 2), (1, 1), (1, 1), (1, 1), (0, 0), (0, 0), (2, 2))
    x = np.zeros((1, 2, 2, 2), np.uint8)
    depthwise_into(
        x, 0, np.zeros((1, 1, 2), np.int32), np.zeros(2, np.int64), geo, (1 << 30, 1), 0, 0, np.empty_like(x)
    )


def _depthwise_numpy(x, x_zp, wc, geo) -> np.ndarray:
    """int64 accumulators (int32-wrapped) of the depthwise conv, one strided window slice per tap."""
    (sh, sw), (dh, dw), (oh, ow) = geo.stride, geo.dilation, geo.out
    pads = ((0, 0), *((max(h, 0), max(t, 0)) for h, t in zip(geo.head, geo.tail)), (0, 0))
    xp = np.pad(x.astype(np.int64) - x_zp, pads)
    y0, x0 = (max(-h, 0) for h in geo.head)
    acc = np.zeros((x.shape[0], oh, ow, x.shape[3]), np.int64)
    for ky in range(wc.shape[0]):
        for kx in range(wc.shape[1]):
            r, c = y0 + ky * dh, x0 + kx * dw
            acc += xp[:, r : r + (oh - 1) * sh + 1 : sh, c : c + (ow - 1) * sw + 1 : sw, :] * wc[ky, kx]
    return wrap_int32(acc)
