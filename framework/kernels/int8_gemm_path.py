"""The integer GEMM path of the 8-bit GEMM ops (Int8Conv/Int8ConvRelu/Int8FC, ONNX QLinearConv/ConvInteger/
QLinearMatMul/MatMulInteger): when it applies, what it caches on the op, and the guarded call of the compiled
kernel (``framework.kernels.int8_gemm``: uint8 x int8 -> int32 on AVX-512 VNNI, the requantization fused).

It applies when the kernel may run here (numba present, ``FRAMEWORK_NO_JIT`` unset, the CPU has AVX-512 BW and
VNNI, family ``int8_gemm`` not disabled by a failed compile) and the centred weights ``w - w_zero_point`` fit
int8 ([-128, 127]: weights quantized with zero point 128 as uint8, or symmetric int8); otherwise the ops keep
their exact float32 GEMM. Activations enter as uint8 codes (int8 codes shifted by 128, with their zero point);
their zero point is folded into a per-column correction ``-x_zero_point * sum_k (w - w_zero_point)``, so the
window columns hold the raw codes (padding holds the zero point). The results are the exact integer sums the
float path computes (both are exact; the kernel's int32 accumulator wraps modulo 2**32, as QNNPACK's).

The first call of each kernel signature is guarded (``kernel_support.call``): a compile that fails disables the
family for the process with one RuntimeWarning and the callers run the float path.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from framework.kernels import kernel_support
from framework.kernels.kernel_support import KernelUnavailable
from framework.runtime.state import RUNTIME

FAMILY = "int8_gemm"
_MODULE: list = RUNTIME.held("kernels.int8_gemm_path", list)


class Packed(NamedTuple):
    """Weights as the kernel reads them: ``data`` (``int8_gemm.pack``), K, M, ``kg`` (K / 4 rounded up), and the
    column sums of the centred weights (int64, (M,))."""

    data: np.ndarray
    k: int
    m: int
    kg: int
    colsum: np.ndarray


class Rows(NamedTuple):
    """The A operand as the kernel reads it: ``data`` (flat uint8), ``lda`` (bytes between consecutive rows of
    a run), ``geo`` = (ow, oh, row_step, img_step): row p = (img, oy, ox) in (., oh, ow) starts at byte
    ``offset`` + img * img_step + oy * row_step + ox * lda; its k-groups (four k) t * cg + g at + taps[t] + 4 g
    (cg 0: plain rows, all of B's k-groups from the row's start); ``image``:
    bytes between the rows of consecutive images (for per-image calls)."""

    data: np.ndarray
    lda: int
    geo: tuple
    taps: np.ndarray
    cg: int
    image: int
    offset: int = 0


_ZERO_TAP = np.zeros(1, np.int64)


def _plain(data: np.ndarray, lda: int, p: int, n: int = 1) -> Rows:
    """Rows of ``lda`` bytes, one after another (K rounded up to 4 <= lda)."""
    return Rows(data, lda, (max(p, 1), 1, 0, 0), _ZERO_TAP, 0, (p // n if n else 0) * lda)


def _module():
    """framework.kernels.int8_gemm (imported, with numba's cache in the user cache folder, on first use), or
    None without numba or with FRAMEWORK_NO_JIT set."""
    if not _MODULE:
        from framework.kernels import machine

        _MODULE.append(machine.import_kernels("int8_gemm"))
    return _MODULE[0]


def available() -> bool:
    """Whether the integer GEMM kernel may run in this process (CPU features, numba, no failed compile)."""
    return kernel_support.usable(FAMILY) and _module() is not None


def pack_centered(centered: np.ndarray) -> Packed | None:
    """``centered`` (M, K) integers ``w - w_zero_point`` packed as B = centered^T, or None when a value lies
    outside int8 (the kernel multiplies uint8 by int8)."""
    m, k = centered.shape
    if centered.size and (centered.min() < -128 or centered.max() > 127):
        return None
    mod = _module()
    data = mod.pack(np.ascontiguousarray(centered.T))
    return Packed(data, k, m, -(-k // 4), centered.sum(axis=1, dtype=np.int64))


def cached_weights(op, arr: np.ndarray, key: tuple, centered, groups: int = 1):
    """The op's packed weights for ``arr`` under ``key`` (its version and zero points...), made by
    ``pack_centered`` of ``centered()`` ((M, K) integers) when the op holds none for them (the op holds ``arr``,
    so the identity test cannot be fooled); None (cached too) when they do not fit int8. ``groups`` > 1: a list
    of ``groups`` Packed, one per consecutive block of M / groups rows."""
    cache = getattr(op, "_int8_gemm_w", None)
    if cache is not None and cache[0] is arr and cache[1] == (key, groups):
        return cache[2]
    wc = centered()
    if groups == 1:
        packed = pack_centered(wc)
    else:
        parts = [pack_centered(part) for part in np.split(wc, groups)]
        packed = None if any(q is None for q in parts) else parts
    op._int8_gemm_w = (arr, (key, groups), packed)
    return packed


def buffer(op, name: str, shape: tuple, dtype) -> np.ndarray:
    """A scratch array the op keeps between runs (a new one when the shape or dtype changes); its contents are
    whatever the last run left."""
    bufs = op.__dict__.setdefault("_int8_gemm_bufs", {})
    buf = bufs.get(name)
    if buf is None or buf.shape != tuple(shape) or buf.dtype != dtype:
        buf = bufs[name] = np.empty(shape, dtype)
    return buf


def copy_codes(dst: np.ndarray, src: np.ndarray, flip: bool) -> None:
    """dst = src (uint8), or with the top bit flipped (``flip``: int8 codes read as uint8 codes shifted by 128)."""
    if flip:
        np.bitwise_xor(src, np.uint8(0x80), out=dst)
    else:
        np.copyto(dst, src)


def rows(op, a: np.ndarray, flip: bool = False, n: int = 1) -> Rows:
    """The uint8 matrix ``a`` (P, K) as the kernel reads it (``a`` may be any uint8 view whose leading dims
    flatten to P and last is K; ``n`` images): ``a`` itself when it is contiguous, K is a multiple of 4 and
    nothing is flipped (``copy_codes``), else a copy with rows padded to a multiple of 4."""
    k = a.shape[-1]
    p = a.size // k if k else 0
    if k % 4 == 0 and a.flags.c_contiguous and not flip:
        return _plain(a.reshape(-1), k, p, n)
    k4 = -(-k // 4) * 4
    buf = buffer(op, "rows", (max(p, 1), k4), np.uint8)
    copy_codes(buf[:p, :k].reshape(a.shape), a, flip)
    return _plain(buf.reshape(-1), k4, p, n)


# Output rows at least this long read the windows in place (implicit GEMM: register blocks run along an
# output row, so shorter rows leave blocks part empty); shorter ones are copied as window rows.
IMPLICIT_MIN_WIDTH = 14


def _implicit(op, x: np.ndarray, x_zp: int, geo, flip: bool, cg: int = 0) -> Rows | None:
    """The windows of NHWC uint8 ``x`` read in place from the (zero-point padded) image: one tap per kernel
    position, C / 4 k-groups each (``cg`` > 0: the windows of the first cg channels only, for grouped convs);
    None where that does not apply (channels not a multiple of 4, short output rows, cropping pads)."""
    n, h, w, c = x.shape
    cg = cg or c
    if cg % 4 or c % 4 or geo.out[1] < IMPLICIT_MIN_WIDTH or min(geo.head) < 0 or len(geo.kernel) != 2:
        return None
    xp = x
    if geo.padded or flip or not x.flags.c_contiguous:
        (ht, hl), (tb, tr) = ((max(v, 0) for v in geo.head), (max(v, 0) for v in geo.tail))
        xp = _padded(op, x, x_zp, (ht, hl, tb, tr), flip)
    hp, wp = xp.shape[1:3]
    (kh, kw), (sh, sw), (dh, dw) = geo.kernel, geo.stride, geo.dilation
    key = ("taps", wp, c, kh, kw, dh, dw)
    taps = op.__dict__.get("_int8_gemm_taps")
    if taps is None or taps[0] != key:
        t = np.array([(ky * dh * wp + kx * dw) * c for ky in range(kh) for kx in range(kw)], np.int64)
        taps = op._int8_gemm_taps = (key, t)
    img = hp * wp * c
    return Rows(xp.reshape(-1), sw * c, (geo.out[1], geo.out[0], sh * wp * c, img), taps[1], cg // 4, img)


def group_rows(op, x: np.ndarray, x_zp: int, geo, groups: int) -> list[Rows] | None:
    """The windows of each channel group of NHWC uint8 ``x`` (a grouped conv: C / groups channels each) as
    kernel rows, read in place (the 1x1 stride-1 image rows, or ``_implicit``'s windows, from the group's first
    channel); None where that does not apply (group channels not a multiple of 4, short output rows...)."""
    n, h, w, c = x.shape
    cg = c // groups
    if cg % 4 or not x.flags.c_contiguous:
        return None
    if tuple(geo.kernel) == (1, 1) and tuple(geo.stride) == (1, 1) and not geo.padded:
        p = n * h * w
        base = Rows(x.reshape(-1), c, (max(p, 1), 1, 0, 0), _ZERO_TAP, cg // 4, h * w * c)
    else:
        base = _implicit(op, x, x_zp, geo, False, cg)
    if base is None:
        return None
    return [base._replace(offset=gi * cg) for gi in range(groups)]


def _padded(op, x: np.ndarray, x_zp: int, pads: tuple, flip: bool) -> np.ndarray:
    """``x`` (NHWC uint8 view) copied into the op's padded buffer, the border at ``x_zp`` (kept between runs:
    only the interior is rewritten)."""
    n, h, w, c = x.shape
    ht, hl, tb, tr = pads
    xp = buffer(op, "padded", (n, h + ht + tb, w + hl + tr, c), np.uint8)
    border = getattr(op, "_int8_gemm_border", None)
    if border is None or border[0] is not xp or border[1] != x_zp:
        xp[...] = x_zp
        op._int8_gemm_border = (xp, x_zp)
    copy_codes(xp[:, ht : ht + h, hl : hl + w], x, flip)
    return xp


def window_rows(op, x: np.ndarray, x_zp: int, geo, window_view, flip: bool = False) -> Rows:
    """The windows of the NHWC uint8 view ``x`` (N, H, W, C; any strides) under the resolved geometry ``geo``
    as kernel rows: one per output pixel, K = KH * KW * C in (kh, kw, c) order, out-of-image taps holding
    ``x_zp`` (``flip``: see ``copy_codes``; x_zp is then already shifted). A 1x1 stride-1 unpadded conv reads the
    image rows themselves; wide outputs with C a multiple of 4 read the windows in place (``_implicit``);
    others copy them once as rows."""
    n, h, w, c = x.shape
    if tuple(geo.kernel) == (1, 1) and tuple(geo.stride) == (1, 1) and not geo.padded:
        return rows(op, x, flip, n)
    implicit = _implicit(op, x, x_zp, geo, flip)
    if implicit is not None:
        return implicit
    xp = x
    if geo.padded:
        (ht, hl), (tb, tr) = ((max(v, 0) for v in geo.head), (max(v, 0) for v in geo.tail))
        xp = _padded(op, x, x_zp, (ht, hl, tb, tr), flip)
        flip = False
    view = window_view(xp, geo, "NHWC")  # (N, OH, OW, KH, KW, C)
    p = view.shape[0] * view.shape[1] * view.shape[2]
    k = view.shape[3] * view.shape[4] * c
    k4 = -(-k // 4) * 4
    cols = buffer(op, "cols", (max(p, 1), k4), np.uint8)
    copy_codes(cols[:p, :k].reshape(view.shape), view, flip)
    return _plain(cols.reshape(-1), k4, p, n)


def run(op, a: Rows, p: int, packed: Packed, x_zp: int, ibias, fbias, ratio, params, mode: int, transposed, out,
        image: int = 0):  # fmt: skip
    """The kernel over ``p`` rows of ``a`` (``rows``/``window_rows``; of image ``image``) into ``out``; False
    when the family is unavailable (nothing written: the caller runs its float path). ``params`` = (mult, shift,
    y_zp, fzp, lo, hi) (int8_gemm._gemm). Zero vectors stand in for the bias arguments the mode does not read;
    ``fbias`` must hold integers (an int32 bias as float64)."""
    mod = _module()
    m = packed.m
    corr = packed.colsum * np.int64(-x_zp)
    zi = ibias if ibias is not None else np.zeros(m, np.int64)
    zf = fbias if fbias is not None else np.zeros(m, np.float64)
    zr = ratio if ratio is not None else np.zeros(m, np.float64)
    if packed.k <= mod.WRAP_FREE_K:  # no sum leaves int32: fold the bias into the correction (int8_gemm doc)
        if mode == mod.Q31:
            corr = corr + zi
        elif mode == mod.RESCALE:
            corr = corr + zf.astype(np.int64)  # fbias holds integers (an int32 bias)
        mode += mod.WRAP_FREE
    c = buffer(op, "sums", (mod.MB * mod.padded_columns(m),), np.int32)
    mult, shift, y_zp, fzp, lo, hi = params
    args = (
        a.data, np.int64(image * a.image + a.offset), np.int64(a.lda), tuple(np.int64(v) for v in a.geo), np.int64(p),
        packed.data, a.taps, np.int64(a.cg or packed.kg), c, corr, zi, zf, zr,
        np.int64(mult), np.int64(shift), np.int64(y_zp), np.float64(fzp), np.int64(lo), np.int64(hi),
        np.int64(mode), bool(transposed), out,
    )  # fmt: skip
    try:
        kernel_support.call(FAMILY, mod._gemm, args)
    except KernelUnavailable:
        return False
    return True


def warm_up() -> None:
    """Compile (or load from numba's cache) the kernel with the signatures the ops pass, on tiny arrays."""
    if not available():
        return
    mod = _module()
    packed = pack_centered(np.ones((2, 4), np.int32))
    a = _plain(np.zeros(4, np.uint8), 4, 1)
    one = np.ones(2, np.int64)
    grouped = np.empty((1, 4), np.uint8)[:, :2]  # a column block of the output (grouped convs)
    for mode, out in (
        (mod.Q31, np.empty((1, 2), np.uint8)),
        (mod.INT32, np.empty((2, 1), np.int32)),
        (mod.Q31, grouped),
    ):
        run(_Holder(), a, 1, packed, 0, one, None, None, (1 << 30, 1, 0, 0.0, 0, 255), mode, mode != mod.Q31, out)
    for dtype in (np.uint8, np.int8):
        run(_Holder(), a, 1, packed, 0, None, one * 1.0, one * 1.0, (0, 0, 0, 0.0, -128, 127), mod.RESCALE, True,
            np.empty((2, 1), dtype))  # fmt: skip
        run(_Holder(), a, 1, packed, 0, None, one * 1.0, one * 1.0, (0, 0, 0, 0.0, -128, 127), mod.RESCALE, False,
            np.empty((1, 2), dtype))  # fmt: skip


class _Holder:
    """Stands in for an op in ``warm_up`` (holds the scratch arrays)."""
