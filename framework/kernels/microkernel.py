"""A register-blocked direct convolution micro-kernel in LLVM IR (a numba ``intrinsic``), and the numba
drivers that run it over an image: window_jit.direct (group 1), window_jit.pointwise (1x1) and
window_jit.direct_depthwise (a one-row block over each channel's own planes); see window_jit's doc.
Imported only when first needed.

numba's own loops cannot keep a block of accumulators in vector registers across a reduction: LLVM
keeps them in memory, one load and one store per multiply-add, which bounds a numba-loop direct
kernel well below the FMA units' rate. This kernel
holds R x 2 vectors of outputs (R output channels, two runs of L output pixels) in registers while it
runs over every (input channel, tap): per step two vector loads of the zero-bordered input planes
(the taps are fixed offsets into them), R broadcasts of the packed filter, 2R fused multiply-adds;
then bias, residual and the activation (simd_ir.activate) on the registers and masked stores straight into the
output rows.

Implicit GEMM over K = C x taps: the filter packed k-major, R rows interleaved (``pack``), tap t of
input channel c read at planes[c * cstride + taps[t] + offset of the output run].
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from framework.kernels import cached_jit, native_pool_kernels, simd_ir
from framework.kernels.simd_ir import activate
from framework.kernels.window_kernels import _direct_fill, _store_wide

L = simd_ir.L  # float32 lanes per vector
# Output channels per register block: R x V accumulators + V loads + a broadcast fit the registers
# (16 lanes: 8 x 2 of 32; 8 lanes: 6 x 2 of 16).
R = 8 if L == 16 else 6
V = 2  # output runs (vectors) per block
_jit = cached_jit.njit(cache=simd_ir.CACHE, fastmath={"contract"}, nogil=True, boundscheck=False)

_F32, _I64, _I32, _I1, _VEC = simd_ir.F32, simd_ir.I64, simd_ir.I32, simd_ir.I1, simd_ir.VEC
_function, _splat, _c = simd_ir.function, simd_ir.splat, simd_ir.const


def _c32(v: int):
    """An i32 constant (the prefetch intrinsic's arguments)."""
    return ir.Constant(_I32, v)


def _make_block(R, V, PF=0):
    """The register block intrinsic for R filter rows on V runs (see ``_block``); PF > 0: each step also
    prefetches its input row PF elements ahead (the next runs of a 1x1 conv's rows)."""

    def block(typingctx, wp, w0, planes, cstride, taps, c, xo, y, yo, ldy, n, b, b0, rows, res, flags):
        sig = types.void(wp, w0, planes, cstride, taps, c, xo, y, yo, ldy, n, b, b0, rows, res, flags)
        return sig, _codegen(R, V, PF)

    block.__doc__ = f"""Outputs of {R} filter rows (from w0 in ``wp``, rows < ``rows`` kept) on {V} runs of output
    pixels: run v reads planes[ch * cstride + taps[t] + xo[v]] for tap t of input channel ch < c and writes
    its first n[v] lanes at y[yo[v] + r * ldy] (+ b[b0 + r] unless flags & 1, + the residual at the same
    index of ``res`` when flags & 2 (may be y itself), Relu when flags & 4: "0 if v < 0 else v", NaN
    stays; capped at 6 when flags & 8 as well: Relu6, "6 if v > 6 else v"; HardSwish when flags & 16, Swish when
    flags & 32: simd_ir.activate)."""
    return intrinsic(block)


def _codegen(R, V, PF=0):
    def codegen(context, builder, signature, args):
        wp_v, w0_v, pl_v, cs_v, taps_v, c_v, xo_v, y_v, yo_v, ldy_v, n_v, b_v, b0_v, rows_v, res_v, flags_v = args
        tys = signature.args
        module = builder.module
        ptr, mty = ir.PointerType(), ir.VectorType(_I1, L)
        vt = f"v{L}f32"
        fma = _function(module, f"llvm.fma.{vt}", ir.FunctionType(_VEC, [_VEC, _VEC, _VEC]))
        prefetch = _function(module, "llvm.prefetch.p0", ir.FunctionType(ir.VoidType(), [ptr, _I32, _I32, _I32]))
        mload = _function(module, f"llvm.masked.load.{vt}.p0", ir.FunctionType(_VEC, [ptr, _I32, mty, _VEC]))
        mstore = _function(module, f"llvm.masked.store.{vt}.p0", ir.FunctionType(ir.VoidType(), [_VEC, ptr, _I32, mty]))

        def data(i):
            return context.make_array(tys[i])(context, builder, args[i]).data

        wd, pd, td, xod, yd, yod, nd, bd, rd = (data(i) for i in (0, 2, 4, 6, 7, 8, 10, 11, 14))
        ntap = context.make_array(tys[4])(context, builder, taps_v).shape
        ntap = builder.extract_value(ntap, 0)
        lanes = ir.Constant(ir.VectorType(_I64, L), list(range(L)))
        xo = [builder.load(builder.gep(xod, [_c(v)])) for v in range(V)]
        yo = [builder.load(builder.gep(yod, [_c(v)])) for v in range(V)]
        masks = [
            builder.icmp_signed("<", lanes, _splat(builder, builder.load(builder.gep(nd, [_c(v)])), lanes.type))
            for v in range(V)
        ]
        zero = ir.Constant(_VEC, [0.0] * L)
        align = ir.Constant(_I32, 4)
        accs = [[cgutils.alloca_once_value(builder, zero) for _ in range(V)] for _ in range(R)]
        kk = cgutils.alloca_once_value(builder, w0_v)  # filter index of (ch, tap), row 0
        with cgutils.for_range(builder, c_v) as chl:
            base = builder.mul(chl.index, cs_v)
            with cgutils.for_range(builder, ntap) as tl:
                at = builder.add(base, builder.load(builder.gep(td, [tl.index])))
                # masked loads: nothing past a run's n pixels is read (the input may be the tensor itself)
                xv = [
                    builder.call(mload, [builder.gep(pd, [builder.add(at, xo[v])]), align, masks[v], zero])
                    for v in range(V)
                ]
                for line in range(0, V * L, 16) if PF else ():  # a prefetch never faults
                    ahead = builder.gep(pd, [builder.add(at, builder.add(xo[0], _c(PF + line)))])
                    builder.call(prefetch, [ahead, _c32(0), _c32(3), _c32(1)])
                wrow = builder.load(kk)
                for r in range(R):
                    a = _splat(builder, builder.load(builder.gep(wd, [builder.add(wrow, _c(r))])), _VEC)
                    for v in range(V):
                        builder.store(builder.call(fma, [a, xv[v], builder.load(accs[r][v])]), accs[r][v])
                builder.store(builder.add(wrow, _c(R)), kk)
        has_r = builder.icmp_signed("!=", builder.and_(flags_v, _c(2)), _c(0))
        no_bias = builder.icmp_signed("!=", builder.and_(flags_v, _c(1)), _c(0))
        rmasks = [builder.and_(mask, _splat(builder, has_r, mty)) for mask in masks]  # all off: res not read
        for r in range(R):
            with builder.if_then(builder.icmp_signed("<", _c(r), rows_v)):
                bias = builder.load(builder.gep(bd, [builder.add(b0_v, _c(r))]))
                bias = _splat(builder, builder.select(no_bias, ir.Constant(_F32, 0.0), bias), _VEC)
                for v in range(V):
                    at = builder.add(yo[v], builder.mul(_c(r), ldy_v))
                    added = builder.call(mload, [builder.gep(rd, [at]), align, rmasks[v], zero])
                    val = builder.fadd(builder.fadd(builder.load(accs[r][v]), bias), added)
                    val = activate(builder, val, flags_v, _c)
                    builder.call(mstore, [val, builder.gep(yd, [at]), align, masks[v]])
        return context.get_dummy_value()

    return codegen


_block = _make_block(R, V)  # R output channels: the convs
# 1x1 convs over whole rows (not in chunks): each step prefetches the two lines PF elements ahead in its
# input row (the runs after the next), because a block walks as many input rows as channels, more streams
# than the hardware prefetchers follow. Not in chunks: there the next band's data is read much later.
PF = 64
_block_pf = _make_block(R, V, PF)
# A 1x1 conv's last run when it fits one vector (196 pixels of a 14x14 image: six blocks of two vectors
# and 4 pixels): a one-vector block does half the multiply-adds of a block whose second run is empty.
_tail = _make_block(R, 1)
# One output channel over its own input channel (the depthwise conv), on VD runs of up to L pixels: two
# runs measured fastest on the depthwise convs of small images (against 4 or 8).
VD = 2
_block1 = _make_block(1, VD)


@_jit
def _blocks(wp, k, xf, cstride, taps, c, xo, yf, yo, ld, n, b, m0, m1, rf, flags):  # pragma: no cover - compiled
    """The runs at xo/yo/n through ``_block`` for every block of R output channels in m0:m1 (output
    channel mb's rows ld apart in ``yf``)."""
    for mb in range(m0, m1, R):
        for j in range(V):
            yo[j] += mb * ld
        _block(wp, mb * k, xf, cstride, taps, c, xo, yf, yo, ld, n, b, mb, min(R, m1 - mb), rf, flags)
        for j in range(V):
            yo[j] -= mb * ld
    return 0


@_jit
def _conv(
    x, wp, b, y, res, planes, taps, s, ph, pw, hq, wq, flags, i0, i1, m0, m1, xo, yo, n, band, moff
):  # pragma: no cover
    """y[i, moff + m0:moff + m1] for images i0:i1 (m0 a multiple of R; filter rows m0:m1): per image
    the zero-bordered (phase) planes (window_kernels._direct_fill), then per band of ``band`` output
    rows, per block of R output channels, per pair of output runs (32 pixels of a row, or two rows of
    at most 16; a row whose last run fits one vector shares that block with the next row's),
    ``_block``. ``xo``/``yo``/``n`` (V,) int64 scratch; ``wp`` from ``pack``; ``taps`` the planes
    offset of each tap; ``moff`` the first channel of y written (y may hold more channels than the
    filter has rows: a concatenation's)."""
    m, oh, ow = y.shape[1], y.shape[2], y.shape[3]
    c = x.shape[1]
    k = c * taps.shape[0]
    ss = s * s
    cstride = ss * planes.shape[1]
    pf, yf, rf = planes.reshape(-1), y.reshape(-1), res.reshape(-1)
    hw = oh * ow
    step = 1 if ow > L else 2
    tail = ow % (V * L) if ow > V * L else 0
    # a row's last run fits one vector: V rows' last runs share a block, so a short tail does not take a
    # whole block of mostly empty runs.
    tails = 0 < tail <= L
    full = ow - tail
    for i in range(i0, i1):
        _direct_fill(x, i, planes, s, ph, pw, hq, wq)
        ybase = (i * m + moff) * hw
        for r0 in range(0, oh, band):
            r1 = min(oh, r0 + band)
            for mb in range(m0, m1, R):
                rows = min(R, m1 - mb)
                yb = ybase + mb * hw
                if tails:
                    for r in range(r0, r1, V):
                        for rr in range(r, min(r + V, r1)):
                            q = 0
                            while q < full:
                                q = _runs(rr, q, oh, full, wq, 0, yb + rr * (ow - full), xo, yo, n)
                                _block(wp, mb * k, pf, cstride, taps, c, xo, yf, yo, hw, n, b, mb, rows, rf, flags)
                        for j in range(V):
                            rr = r + j
                            xo[j], yo[j], n[j] = rr * wq + full, yb + rr * ow + full, tail if rr < r1 else 0
                            if n[j] == 0:
                                xo[j], yo[j] = xo[0], yo[0]
                        _block(wp, mb * k, pf, cstride, taps, c, xo, yf, yo, hw, n, b, mb, rows, rf, flags)
                    continue
                for r in range(r0, r1, step):
                    q = 0
                    while q < ow:
                        q = _runs(r, q, oh, ow, wq, 0, yb, xo, yo, n)
                        _block(wp, mb * k, pf, cstride, taps, c, xo, yf, yo, hw, n, b, mb, rows, rf, flags)
    return 0


@_jit
def _runs(r, q, oh, ow, wq, xbase, ybase, xo, yo, n):  # pragma: no cover - compiled
    """The next pair of output runs from output row r, column q into xo/yo/n (plane and output offsets
    from xbase/ybase, lanes): 32 pixels of a row (two vectors), or rows r and r + 1 of at most L
    pixels (one vector each); the column after them."""
    if ow > L:  # two vectors along one row
        xo[0], yo[0], n[0] = r * wq + q, r * ow + q, min(L, ow - q)
        xo[1], yo[1], n[1] = xo[0] + L, yo[0] + L, max(0, min(L, ow - q - L))
        q += V * L
    else:  # one row per vector
        xo[0], yo[0], n[0] = r * wq, r * ow, ow
        xo[1], yo[1], n[1] = (r + 1) * wq, (r + 1) * ow, ow if r + 1 < oh else 0
        q = ow
    for j in range(V):
        if n[j] == 0:
            xo[j], yo[j] = xo[0], yo[0]
        xo[j] += xbase
        yo[j] += ybase
    return q


@_jit
def _depthwise(x, w, b, y, res, planes, taps, s, ph, pw, hq, wq, flags, i0, i1, xo, yo, n):  # pragma: no cover
    """Depthwise conv (group = C = M, filter (C, 1, kh, kw) in ``w``) of images i0:i1: per image the
    zero-bordered (phase) planes of every channel (window_kernels._direct_fill), then per output
    channel its runs of up to L pixels of a row, VD at a time (``xo``/``yo``/``n`` (VD,) int64), through
    the one-row block over the channel's own planes."""
    c, oh, ow = y.shape[1], y.shape[2], y.shape[3]
    ntap = taps.shape[0]
    cstride = s * s * planes.shape[1]
    pf, yf, rf, wf = planes.reshape(-1), y.reshape(-1), res.reshape(-1), w.reshape(-1)
    hw = oh * ow
    chunks = (ow + L - 1) // L  # runs per output row
    units = oh * chunks
    for i in range(i0, i1):
        _direct_fill(x, i, planes, s, ph, pw, hq, wq)
        for ch in range(c):
            xb, yb = ch * cstride, (i * c + ch) * hw
            for u0 in range(0, units, VD):
                for j in range(VD):
                    u = u0 + j
                    if u < units:
                        r, q = u // chunks, (u % chunks) * L
                        xo[j], yo[j], n[j] = xb + r * wq + q, yb + r * ow + q, min(L, ow - q)
                    else:
                        xo[j], yo[j], n[j] = xo[0], yo[0], 0
                _block1(wf, ch * ntap, pf, cstride, taps, 1, xo, yf, yo, hw, n, b, ch, 1, rf, flags)
    return 0


@_jit
def _act_code(flags):  # pragma: no cover - compiled
    """The activation code (window_jit.RELU...) of a kernel's flags (window_jit._ACT_FLAGS)."""
    if flags & 4:
        return 2 if flags & 8 else 1
    if flags & 16:
        return 3
    return 4 if flags & 32 else 0


@_jit
def _conv_wide(
    x, wp, b, y, res, planes, taps, s, ph, pw, hq, wq, flags, i0, i1, m0, m1, xo, yo, n, z
):  # pragma: no cover
    """``_conv`` for narrow outputs (a row fills too little of a vector): runs of V*L consecutive
    positions of the *wide* output (rows of wq: the OW valid columns and the (KW-1)//s junk ones that
    the planes' row length gives) written with the bias into ``z`` (M, >= OH*wq), then the valid
    columns copied into y with the residual and Relu of ``flags``. 8x8 outputs of a 3x3 conv: 80% of
    the vector lanes useful, against 50% for two rows of 8 per block."""
    oh, ow = y.shape[2], y.shape[3]
    c = x.shape[1]
    k = c * taps.shape[0]
    cstride = s * s * planes.shape[1]
    pf, zf = planes.reshape(-1), z.reshape(-1)
    ldz = z.shape[1]
    total = (oh - 1) * wq + ow  # wide positions up to the last valid output
    has_r, relu = (flags & 2) != 0, _act_code(flags)
    zero = np.float32(0)
    for i in range(i0, i1):
        _direct_fill(x, i, planes, s, ph, pw, hq, wq)
        for q in range(0, total, V * L):
            for j in range(V):
                xo[j] = q + j * L
                n[j] = max(0, min(L, total - q - j * L))
                if n[j] == 0:
                    xo[j] = xo[0]
            for j in range(V):
                yo[j] = xo[j]
            _blocks(wp, k, pf, cstride, taps, c, xo, zf, yo, ldz, n, b, m0, m1, zf, 0)
        for mo in range(m0, m1):  # the bias is in z already
            _store_wide(z[mo], wq, zero, res, has_r, relu, y, i, mo)
    return 0


@_jit
def _tail_run(wp, w0, xf, p, taps, c, xo, yf, yo, ldy, n, b, b0, rows, rk, fk):  # pragma: no cover - compiled
    """``_tail`` on its own (a function of its own, so that its code does not crowd the registers of the
    loops around ``_block_pf``)."""
    _tail(wp, w0, xf, p, taps, c, xo, yf, yo, ldy, n, b, b0, rows, rk, fk)
    return 0


@_jit
def _pointwise(x, wp, b, y, res, taps, flags, i0, i1, m0, m1, xo, yo, n, band, moff, kc):  # pragma: no cover
    """1x1 stride-1 unpadded conv of images i0:i1, filter rows m0:m1 (m0 a multiple of R) into
    y[:, moff + m0:moff + m1] (as ``_conv``): each image read in place as C planes of P pixels (taps =
    [0]); per band of ``band`` pixels (a multiple of V*L; see window_jit.pointwise_band), per chunk of
    ``kc`` input channels, per block of R output channels, runs of V*L pixels. The band's rows of a
    chunk stay in L1 over all the blocks; a later chunk adds its sums to the output (as an in-place
    residual, no bias), the Relu with the last one. A band's last run of at most L pixels takes the one-vector
    block ``_tail``."""
    m, c = y.shape[1], x.shape[1]
    p = y.shape[2] * y.shape[3]
    xf, yf, rf = x.reshape(-1), y.reshape(-1), res.reshape(-1)
    for i in range(i0, i1):
        for q0 in range(0, p, band):
            q1 = min(p, q0 + band)
            qv = q1 if (q1 - q0) % (V * L) > L else q0 + (q1 - q0) // (V * L) * (V * L)  # runs of V vectors
            for k0 in range(0, c, kc):
                k1 = min(c, k0 + kc)
                fk = flags if k1 == c else flags & 3  # the Relu with the last chunk
                rk = rf
                if k0 > 0:  # sums so far in y: added as the residual, the bias already in
                    fk, rk = fk | 3, yf
                for mb in range(m0, m1, R):
                    rows = min(R, m1 - mb)
                    for q in range(q0, qv, V * L):
                        for j in range(V):
                            xo[j] = (i * c + k0) * p + q + j * L
                            yo[j] = (i * m + moff + mb) * p + q + j * L
                            n[j] = max(0, min(L, q1 - q - j * L))
                            if n[j] == 0:
                                xo[j], yo[j] = xo[0], yo[0]
                        if kc >= c:  # whole rows: their next runs prefetched
                            _block_pf(wp, mb * c, xf, p, taps, c, xo, yf, yo, p, n, b, mb, rows, rk, fk)
                        else:
                            _block(wp, mb * c + k0 * R, xf, p, taps, k1 - k0, xo, yf, yo, p, n, b, mb, rows, rk, fk)
                    if qv < q1:  # the band's last run, one vector
                        xo[0], yo[0], n[0] = (i * c + k0) * p + qv, (i * m + moff + mb) * p + qv, q1 - qv
                        _tail_run(wp, mb * c + k0 * R, xf, p, taps, k1 - k0, xo, yf, yo, p, n, b, mb, rows, rk, fk)
    return 0


def pack(w: np.ndarray, out: np.ndarray) -> None:
    """out (ceil(m / R) * k * R,) = w (m, k) packed k-major in blocks of R rows (missing rows zero)."""
    m, k = w.shape
    mb = -(-m // R)
    blocks = out.reshape(mb, k, R)
    full = m // R
    blocks[:full] = w[: full * R].reshape(full, R, k).transpose(0, 2, 1)
    if full < mb:
        blocks[full] = 0
        blocks[full, :, : m - full * R] = w[full * R :].T


def packed_size(m: int, k: int) -> int:
    return -(-m // R) * R * k


def tap_offsets(s: int, plane: int, wq: int, kh: int = 3, kw: int = 3) -> np.ndarray:
    """Offset of each tap (a, b) of a kh x kw window in a channel's planes: phase plane (a % s, b % s),
    shifted by (a // s) rows and b // s columns."""
    return np.array(
        [((a % s) * s + b % s) * plane + (a // s) * wq + b // s for a in range(kh) for b in range(kw)], np.int64
    )


# Native tasks (native_pool.CallJob): one recorded call of ``_conv`` / ``_conv_wide`` / ``_pointwise`` per task,
# its arguments in the order of the signature (arrays as address and sizes).
CONV_ARGS = (
    ("f4", 4),
    ("f4", 1),
    ("f4", 1),
    ("f4", 4),
    ("f4", 4),
    ("f4", 2),
    ("i8", 1),
    *["int"] * 10,
    *[("i8", 1)] * 3,
    "int",
    "int",
)
CONV_WIDE_ARGS = (*CONV_ARGS[:-2], ("f4", 2))  # _conv's but the last: the wide scratch z
POINTWISE_ARGS = (
    ("f4", 4),
    ("f4", 1),
    ("f4", 1),
    ("f4", 4),
    ("f4", 4),
    ("i8", 1),
    *["int"] * 5,
    *[("i8", 1)] * 3,
    "int",
    "int",
    "int",
)


@_jit
def _conv_args(b, i):  # pragma: no cover - compiled
    """The arguments of a recorded ``_conv`` / ``_conv_wide`` call at block offset ``i`` up to ``n`` (CONV_ARGS),
    and the offset of the next one."""
    f32_1, f32_4, i64_1 = native_pool_kernels.f32_1, native_pool_kernels.f32_4, native_pool_kernels.i64_1
    x, wp, bias, y, res = f32_4(b, i), f32_1(b, i + 5), f32_1(b, i + 7), f32_4(b, i + 9), f32_4(b, i + 14)
    planes, taps, j = native_pool_kernels.f32_2(b, i + 19), i64_1(b, i + 22), i + 24
    sizes = (b[j], b[j + 1], b[j + 2], b[j + 3], b[j + 4], b[j + 5], b[j + 6], b[j + 7], b[j + 8], b[j + 9])
    return (x, wp, bias, y, res, planes, taps), sizes, (i64_1(b, j + 10), i64_1(b, j + 12), i64_1(b, j + 14)), j + 16


def _task_conv(block, k):  # pragma: no cover - compiled
    b, i = native_pool_kernels.args_of(block, k)
    arrays, sizes, scratch, j = _conv_args(b, i)
    _conv(*arrays, *sizes, *scratch, b[j], b[j + 1])


def _task_conv_wide(block, k):  # pragma: no cover - compiled
    b, i = native_pool_kernels.args_of(block, k)
    arrays, sizes, scratch, j = _conv_args(b, i)
    _conv_wide(*arrays, *sizes, *scratch, native_pool_kernels.f32_2(b, j))


def _task_pointwise(block, k):  # pragma: no cover - compiled
    b, i = native_pool_kernels.args_of(block, k)
    f32_1, f32_4, i64_1 = native_pool_kernels.f32_1, native_pool_kernels.f32_4, native_pool_kernels.i64_1
    x, wp, bias, y, res = f32_4(b, i), f32_1(b, i + 5), f32_1(b, i + 7), f32_4(b, i + 9), f32_4(b, i + 14)
    taps, j = i64_1(b, i + 19), i + 21
    flags, i0, i1, m0, m1 = b[j], b[j + 1], b[j + 2], b[j + 3], b[j + 4]
    xo, yo, n = i64_1(b, j + 5), i64_1(b, j + 7), i64_1(b, j + 9)
    _pointwise(x, wp, bias, y, res, taps, flags, i0, i1, m0, m1, xo, yo, n, b[j + 11], b[j + 12], b[j + 13])


_TASK_FNS = {
    "_conv": (_task_conv, CONV_ARGS),
    "_conv_wide": (_task_conv_wide, CONV_WIDE_ARGS),
    "_pointwise": (_task_pointwise, POINTWISE_ARGS),
}
_TASKS: dict = {}


def native_task(kernel: str):
    """(the task function of ``kernel``'s recorded calls, its argument layout), compiled or loaded on first use;
    None for a kernel without one."""
    return native_pool_kernels.task_of(_TASKS, _TASK_FNS, kernel, simd_ir.CACHE)
