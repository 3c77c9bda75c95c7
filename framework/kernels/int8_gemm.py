"""An integer GEMM micro-kernel for the 8-bit ops: uint8 rows times packed int8 columns into int32, with the
requantization of each band of rows right after its products (an LLVM IR intrinsic under a numba driver).
Imported only when first needed (``framework/kernels/int8_gemm_path.py`` guards and dispatches); see
``_gemm`` for the contract.

The product ``C[p, m] = sum_k A[p, k] * B[k, m]`` runs on AVX-512 VNNI's ``vpdpbusd``: per 32-bit lane it adds
four uint8 x int8 products to an int32 accumulator (the products and their sum are exact; the accumulator wraps
modulo 2**32, as QNNPACK's int32 accumulators do). A register block holds R rows x V vectors of 16 output
columns: per step of four k it loads V vectors of the packed B, broadcasts the four A bytes of each row and issues
R x V ``vpdpbusd``. B is packed once per weight tensor (``pack``): columns padded to a multiple of 16, cut into
panels of at most four vectors, each panel k-group-major (64 bytes per vector per four k, zeros past K).

A is read in four-byte groups along K: rows ``lda`` bytes apart with ``lda`` >= K rounded up to 4 (what lies
between K and that is multiplied by B's zero padding, so it may hold anything); or, for conv windows read in
place (implicit GEMM), a table of tap offsets each followed by ``cg`` groups of channels (see ``_make_block``).
The zero points enter through ``corr`` (per column, added to every sum: ``-x_zero_point * sum_k B[k, m]``, as
the callers compute it).

Epilogues (``mode``), on each band of MB rows while it is in cache:
- ``Q31``: QNNPACK's q31 requantization of ``wrap32(C + corr) + ibias`` into [lo, 255] (uint8 out);
- ``INT32``: ``wrap32(C + corr)`` (ONNX ConvInteger / MatMulInteger);
- ``RESCALE``: ONNX's ``clip(rint((wrap32(C + corr) + fbias) * ratio + fzp), lo, hi)`` in float64.
``transposed``: ``out[m, p]`` instead of ``out[p, m]`` (the NCHW output of ONNX's convs). Modes + 3
(``WRAP_FREE``): the same results where no sum can leave int32 (K * 255 * 128 < 2**31), without the wrap and
with the bias folded into ``corr`` (one add per output instead of four operations: the epilogue bounds the
small-K GEMMs).
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from framework.kernels import cached_jit, simd_ir

LANES = 16  # int32 lanes of a 512-bit vector: output columns per vector
GROUP = 4  # k per 32-bit lane (vpdpbusd)
MB = 48  # rows per band (requantized while in cache); a multiple of every R
Q31, INT32, RESCALE = 0, 1, 2
WRAP_FREE = 3  # added to a mode: sums that cannot wrap, the bias folded into corr
WRAP_FREE_K = (2**31 - 1) // (255 * 128)  # the longest K whose centred uint8 x int8 sums stay within int32
# (vectors per panel) -> rows per register block: R x V accumulators + V loads + a broadcast within 32 registers
ROWS = {4: 6, 3: 8, 2: 12, 1: 12}

_jit = cached_jit.njit(cache=simd_ir.CACHE, nogil=True, boundscheck=False)
_I32 = ir.IntType(32)
_VI = ir.VectorType(_I32, LANES)


def _make_block(R: int, V: int):
    def block(typingctx, a, a_off, lda, rows, bp, b_off, taps, cg, c, c_off, ldc):
        sig = types.void(a, a_off, lda, rows, bp, b_off, taps, cg, c, c_off, ldc)

        def codegen(context, builder, signature, args):
            _, a_off_v, lda_v, rows_v, _, b_off_v, _, cg_v, _, c_off_v, ldc_v = args
            tys = signature.args

            def data(i):
                return context.make_array(tys[i])(context, builder, args[i]).data

            ad, bd, td, cd = data(0), data(4), data(6), data(8)
            ntap = builder.extract_value(context.make_array(tys[6])(context, builder, args[6]).shape, 0)
            module = builder.module
            dot = simd_ir.function(module, "llvm.x86.avx512.vpdpbusd.512", ir.FunctionType(_VI, [_VI, _VI, _VI]))
            one = simd_ir.const(1)
            last = builder.sub(rows_v, one)
            rowp = []  # row r of the block (absent rows read the last present one; their sums are not stored)
            for r in range(R):
                rr = builder.select(builder.icmp_signed("<", simd_ir.const(r), rows_v), simd_ir.const(r), last)
                at = builder.add(a_off_v, builder.mul(rr, lda_v))
                rowp.append(at)
            bp = builder.bitcast(builder.gep(bd, [b_off_v]), _VI.as_pointer())
            zero = ir.Constant(_VI, [0] * LANES)
            accs = [[cgutils.alloca_once_value(builder, zero) for _ in range(V)] for _ in range(R)]
            kk = cgutils.alloca_once_value(builder, simd_ir.const(0))  # the k-group of (tap, group): B's row
            with cgutils.for_range(builder, ntap) as tl:
                tap = builder.load(builder.gep(td, [tl.index]))
                words = [builder.bitcast(builder.gep(ad, [builder.add(at, tap)]), _I32.as_pointer()) for at in rowp]
                with cgutils.for_range(builder, cg_v) as gl:
                    g = gl.index
                    bvec = builder.gep(bp, [builder.mul(builder.load(kk), simd_ir.const(V))])
                    bv = [builder.load(builder.gep(bvec, [simd_ir.const(v)]), align=1) for v in range(V)]
                    for r in range(R):
                        word = builder.load(builder.gep(words[r], [g]), align=1)
                        one_ = builder.insert_element(ir.Constant(_VI, ir.Undefined), word, ir.Constant(_I32, 0))
                        av = builder.shuffle_vector(one_, one_, ir.Constant(_VI, [0] * LANES))
                        for v in range(V):
                            builder.store(builder.call(dot, [builder.load(accs[r][v]), av, bv[v]]), accs[r][v])
                    builder.store(builder.add(builder.load(kk), simd_ir.const(1)), kk)
            cp = builder.gep(cd, [c_off_v])
            for r in range(R):
                with builder.if_then(builder.icmp_signed("<", simd_ir.const(r), rows_v)):
                    row = builder.gep(cp, [builder.mul(simd_ir.const(r), ldc_v)])
                    for v in range(V):
                        dst = builder.bitcast(builder.gep(row, [simd_ir.const(v * LANES)]), _VI.as_pointer())
                        builder.store(builder.load(accs[r][v]), dst, align=4)
            return context.get_dummy_value()

        return sig, codegen

    block.__doc__ = f"""int32 sums of {R} rows of A (row r from byte a_off + r * lda; rows < ``rows`` stored) times
    the {V}-vector panel of B at byte b_off, stored at c[c_off + r * ldc + 16 v + lane]. Row r's k-group
    t * cg + g (four k) is read at byte a_off + r * lda + taps[t] + 4 g: the taps of a window over NHWC pixels
    (implicit GEMM), or taps = [0] and cg = K / 4 for plain rows."""
    return intrinsic(block)


_B4, _B3, _B2, _B1 = (_make_block(ROWS[v], v) for v in (4, 3, 2, 1))


@_jit
def _q31(a, mult, shift, mask, half, y_zp, lo):  # pragma: no cover - compiled
    """QNNPACK's q31_requantize of the int64 ``a`` (mask = 2**shift - 1, half = mask >> 1), clamped to [lo, 255]
    after the zero point; branch-free (``a >> 63`` is -1 below zero) so the loops over it vectorize."""
    q = (a * mult + (1 << 30)) >> 31
    rem = (q & mask) + (a >> 63)
    n = (q >> shift) + (rem > half) + y_zp
    return min(max(n, lo), 255)


@_jit
def _wrap32(v):  # pragma: no cover - compiled
    return ((v + (np.int64(1) << 31)) & np.int64(0xFFFFFFFF)) - (np.int64(1) << 31)


@_jit
def _epilogue(c, ldc, pr, p0, corr, ibias, fbias, ratio, mult, shift, y_zp, fzp, lo, hi, mode, out):
    """Rows [0, pr) of the band's sums ``c`` into output rows p0 + i. One loop per mode, over 1-D views: the
    inner loops vectorize (not with the mode tested inside, nor with 2-D indexing)."""  # pragma: no cover
    m = corr.shape[0]
    mask = (np.int64(1) << shift) - 1
    half = mask >> 1
    flo, fhi = np.float64(lo), np.float64(hi)
    for i in range(pr):
        cr = c[i * ldc : i * ldc + m]
        o = out[p0 + i]
        if mode == 0:
            for j in range(m):
                o[j] = _q31(_wrap32(np.int64(cr[j]) + corr[j]) + ibias[j], mult, shift, mask, half, y_zp, lo)
        elif mode == 1:
            for j in range(m):
                o[j] = _wrap32(np.int64(cr[j]) + corr[j])
        elif mode == 2:
            for j in range(m):
                v = np.rint((np.float64(_wrap32(np.int64(cr[j]) + corr[j])) + fbias[j]) * ratio[j] + fzp)
                o[j] = min(max(v, flo), fhi)
        elif mode == 3:  # the modes + 3: sums that cannot wrap, corr holding the bias too (module doc)
            for j in range(m):
                o[j] = _q31(np.int64(cr[j]) + corr[j], mult, shift, mask, half, y_zp, lo)
        elif mode == 4:
            for j in range(m):
                o[j] = np.int64(cr[j]) + corr[j]
        else:
            for j in range(m):
                v = np.rint(np.float64(np.int64(cr[j]) + corr[j]) * ratio[j] + fzp)
                o[j] = min(max(v, flo), fhi)


@_jit
def _panel(
    a, a_off, lda, ow, oh, row_step, img_step, p0, pr, bp, b_off, taps, cg, c, c_off, ldc, nv
):  # pragma: no cover
    """Rows p0 .. p0 + pr of A times the nv-vector panel at b_off, into c from c_off (row p0 first). Row p starts
    at byte a_off + img * img_step + oy * row_step + ox * lda with (img, oy, ox) = p in (., oh, ow): register
    blocks stay within one run of ow rows (an output row of a conv; plain rows: ow = p, oh = 1)."""
    q = 0
    while q < pr:
        p = p0 + q
        ox, t = p % ow, p // ow
        base = a_off + (t // oh) * img_step + (t % oh) * row_step + ox * lda
        seg = min(pr - q, ow - ox)
        at = c_off + q * ldc
        if nv == 4:
            for r0 in range(0, seg, 6):
                _B4(a, base + r0 * lda, lda, min(6, seg - r0), bp, b_off, taps, cg, c, at + r0 * ldc, ldc)
        elif nv == 3:
            for r0 in range(0, seg, 8):
                _B3(a, base + r0 * lda, lda, min(8, seg - r0), bp, b_off, taps, cg, c, at + r0 * ldc, ldc)
        elif nv == 2:
            for r0 in range(0, seg, 12):
                _B2(a, base + r0 * lda, lda, min(12, seg - r0), bp, b_off, taps, cg, c, at + r0 * ldc, ldc)
        else:
            for r0 in range(0, seg, 12):
                _B1(a, base + r0 * lda, lda, min(12, seg - r0), bp, b_off, taps, cg, c, at + r0 * ldc, ldc)
        q += seg


@_jit
def _gemm(
    a,
    a_off,
    lda,
    geo,
    p,
    bp,
    taps,
    cg,
    c,
    corr,
    ibias,
    fbias,
    ratio,
    mult,
    shift,
    y_zp,
    fzp,
    lo,
    hi,
    mode,
    transposed,
    out,
):  # pragma: no cover - compiled
    """Rows p of A (uint8, flat; row addressing ``geo`` = (ow, oh, row_step, img_step) and ``taps``/``cg``: see
    ``_panel`` and the block) times the packed B (``pack``, K / 4 rounded up = len(taps) * cg groups) into
    ``out`` with the epilogue ``mode`` (module doc). ``c``: int32 scratch of MB rows of ``padded_columns(M)``;
    ``corr``/``ibias`` int64 (M,), ``fbias``/``ratio`` float64 (M,)."""
    ow, oh, row_step, img_step = geo
    kg = taps.shape[0] * cg
    ldc = c.shape[0] // MB
    nvec = ldc // LANES
    tmp = np.empty((MB if transposed else 0, corr.shape[0]), out.dtype)  # one band of a transposed output
    for p0 in range(0, p, MB):
        pr = min(MB, p - p0)
        for v0 in range(0, nvec, 4):
            nv = min(4, nvec - v0)
            _panel(
                a, a_off, lda, ow, oh, row_step, img_step, p0, pr, bp, v0 * kg * 64, taps, cg, c, v0 * LANES, ldc, nv
            )
        if not transposed:
            _epilogue(c, ldc, pr, p0, corr, ibias, fbias, ratio, mult, shift, y_zp, fzp, lo, hi, mode, out)
            continue
        # requantized row by row into ``tmp`` (vectorized), then transposed into out's columns p0:p0 + pr
        _epilogue(c, ldc, pr, 0, corr, ibias, fbias, ratio, mult, shift, y_zp, fzp, lo, hi, mode, tmp)
        for j in range(tmp.shape[1]):
            o = out[j, p0 : p0 + pr]
            for i in range(pr):
                o[i] = tmp[i, j]


def padded_columns(m: int) -> int:
    """Output columns rounded up to whole vectors: the width of the packed B and of the scratch rows."""
    return -(-m // LANES) * LANES


def packed_size(k: int, m: int) -> int:
    """Bytes of ``pack``'s output for B (K, M)."""
    return -(-k // GROUP) * GROUP * padded_columns(m)


def pack(b: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """B (K, M) int8 (or any integers in [-128, 127]) packed for the kernel (module doc): int8 (packed_size)."""
    k, m = b.shape
    kg, mp = -(-k // GROUP), padded_columns(m)
    full = np.zeros((kg * GROUP, mp), np.int8)
    full[:k, :m] = b
    # (kg, 4, nvec, 16) -> per panel of up to four vectors: (kg, vectors, 16, 4)
    blocks = full.reshape(kg, GROUP, mp // LANES, LANES)
    if out is None:
        out = np.empty(packed_size(k, m), np.int8)
    at = 0
    for v0 in range(0, mp // LANES, 4):
        panel = blocks[:, :, v0 : v0 + 4, :].transpose(0, 2, 3, 1)
        out[at : at + panel.size] = panel.reshape(-1)
        at += panel.size
    return out
