"""The compiled filter gradient of a 2-D NCHW convolution (group 1, dilation 1, float32): an LLVM IR register
block (a numba ``intrinsic``) and the numba loops around it. See conv_grad_filter.py for the contract.

The layout makes every tap a shifted contiguous read. Each image's input is laid out as stride x stride
zero-bordered phase planes of ``wq = OW + (K - 1) // stride`` columns (plane (u, v) holds the padded
input's cells (r * stride + u, j * stride + v)), and dY as rows of the same width, zero past the OW
real columns. Then tap (a, b) of input channel c reads the phase plane (a % s, b % s) of c at the fixed
offset ``(a // s) * wq + b // s`` from the dY pixel's own index q:

    dW[m, c, a, b] = sum over images and q of dYe[m, q] * planes[c, phase(a, b)][q + offset(a, b)]

and the reduction over q is a dot product of contiguous rows, taken L lanes at a time. The register
block holds R output channels x T (channel, tap) pairs of L-lane partial sums for a whole run of images:
per step R + T vector loads and R x T fused multiply-adds; the lanes are summed once at the end of the
run. No im2col column buffer (K x K times the input) and no GEMM over a thin matrix. ``_block_m`` is the
same sum with its vectors over R x L output channels of a dY laid out as (images, pixels, channels), the
input broadcast per pixel: no padding columns or rounded tails computed, for small images.
Imported only when first needed.
"""

from __future__ import annotations

import numba
from llvmlite import ir
from numba import carray, types
from numba.core import cgutils
from numba.extending import intrinsic

from framework.kernels import cached_jit, native_pool_kernels, simd_ir
from framework.kernels.simd_ir import I32, VEC, L, const, function, splat

# Output channels x (channel, tap) pairs per register block: R x T accumulators, R dY vectors and one
# input vector fit the vector registers (16 lanes: 24 + 4 + 1 of 32; 8 lanes: 9 + 3 + 1 of 16).
R, T = (4, 6) if L == 16 else (3, 3)
_U = numba.uint64  # unsigned indices: no negative-index wraparound test, so LLVM vectorizes
_jit = cached_jit.njit(cache=simd_ir.CACHE, fastmath={"contract"}, nogil=True, boundscheck=False)


def _hsum(builder, v):
    """The sum of the L lanes of ``v`` (a halving tree of shuffles and adds)."""
    n = L
    while n > 1:
        half = n // 2
        lo = builder.shuffle_vector(v, v, ir.Constant(ir.VectorType(I32, half), list(range(half))))
        hi = builder.shuffle_vector(v, v, ir.Constant(ir.VectorType(I32, half), list(range(half, n))))
        v = builder.fadd(lo, hi)
        n = half
    return builder.extract_element(v, ir.Constant(I32, 0))


@intrinsic
def _block(typingctx, dy, dyo, dys, x, xo, xs, nimg, nq, out):
    """out[r * T + t] = sum over images i < nimg and lanes q < nq * L of dy[dyo[r] + i * dys + q] *
    x[xo[t] + i * xs + q], for r < R and t < T (every read in bounds is the caller's promise)."""
    sig = types.void(dy, dyo, dys, x, xo, xs, nimg, nq, out)

    def codegen(context, builder, signature, args):
        dys_v, xs_v, nimg_v, nq_v = args[2], args[5], args[6], args[7]
        tys = signature.args

        def data(i):
            return context.make_array(tys[i])(context, builder, args[i]).data

        dyd, dyod, xd, xod, outd = data(0), data(1), data(3), data(4), data(8)
        fma = function(builder.module, f"llvm.fma.v{L}f32", ir.FunctionType(VEC, [VEC, VEC, VEC]))

        def load(base, at):
            return builder.load(builder.bitcast(builder.gep(base, [at]), VEC.as_pointer()), align=4)

        dyo = [builder.load(builder.gep(dyod, [const(r)])) for r in range(R)]
        xo = [builder.load(builder.gep(xod, [const(t)])) for t in range(T)]
        zero = ir.Constant(VEC, [0.0] * L)
        accs = [[cgutils.alloca_once_value(builder, zero) for _ in range(T)] for _ in range(R)]
        with cgutils.for_range(builder, nimg_v) as il:
            rows = [builder.add(builder.mul(il.index, dys_v), o) for o in dyo]
            cols = [builder.add(builder.mul(il.index, xs_v), o) for o in xo]
            with cgutils.for_range(builder, nq_v) as ql:
                q = builder.mul(ql.index, const(L))
                d = [load(dyd, builder.add(rows[r], q)) for r in range(R)]
                for t in range(T):
                    xv = load(xd, builder.add(cols[t], q))
                    for r in range(R):
                        builder.store(builder.call(fma, [d[r], xv, builder.load(accs[r][t])]), accs[r][t])
        for r in range(R):
            for t in range(T):
                total = _hsum(builder, builder.load(accs[r][t]))
                builder.store(total, builder.gep(outd, [const(r * T + t)]))
        return context.get_dummy_value()

    return sig, codegen


@intrinsic
def _block_m(typingctx, dyt, d0, x, xo, xs, nimg, oh, ow, wq, ps, out, o0, ldo):
    """The transposed block, vectorized over output channels: out[o0 + t * ldo + r * L + l] += sum over images
    i < nimg and output pixels (a, b) < (oh, ow) of dyt[d0 + i * ps + (a * ow + b) * mp + r * L + l] *
    x[xo[t] + i * xs + a * wq + b] (dyt: dY as (images, pixels, mp channels); ``ps`` = pixels x mp), for
    r < R, t < T, l < L: R vector loads of dY and T broadcasts of the input per pixel, no padding columns
    or rounded tails read."""
    sig = types.void(dyt, d0, x, xo, xs, nimg, oh, ow, wq, ps, out, o0, ldo)

    def codegen(context, builder, signature, args):
        d0_v, xs_v, nimg_v, oh_v, ow_v, wq_v, ps_v = args[1], args[4], args[5], args[6], args[7], args[8], args[9]
        o0_v, ldo_v = args[11], args[12]
        tys = signature.args

        def data(i):
            return context.make_array(tys[i])(context, builder, args[i]).data

        dyd, xd, xod, outd = data(0), data(2), data(3), data(10)
        fma = function(builder.module, f"llvm.fma.v{L}f32", ir.FunctionType(VEC, [VEC, VEC, VEC]))

        def load(base, at):
            return builder.load(builder.bitcast(builder.gep(base, [at]), VEC.as_pointer()), align=4)

        mp = builder.udiv(ps_v, builder.mul(oh_v, ow_v))
        xo = [builder.load(builder.gep(xod, [const(t)])) for t in range(T)]
        zero = ir.Constant(VEC, [0.0] * L)
        accs = [[cgutils.alloca_once_value(builder, zero) for _ in range(T)] for _ in range(R)]
        with cgutils.for_range(builder, nimg_v) as il:
            dbase = builder.add(d0_v, builder.mul(il.index, ps_v))
            xbase = builder.mul(il.index, xs_v)
            with cgutils.for_range(builder, oh_v) as al:
                drow = builder.add(dbase, builder.mul(builder.mul(al.index, ow_v), mp))
                xrow = builder.add(xbase, builder.mul(al.index, wq_v))
                with cgutils.for_range(builder, ow_v) as bl:
                    at = builder.add(drow, builder.mul(bl.index, mp))
                    d = [load(dyd, builder.add(at, const(r * L))) for r in range(R)]
                    xq = builder.add(xrow, bl.index)
                    for t in range(T):
                        xs_ = builder.load(builder.gep(xd, [builder.add(xo[t], xq)]))
                        xv = splat(builder, xs_, VEC)
                        for r in range(R):
                            builder.store(builder.call(fma, [d[r], xv, builder.load(accs[r][t])]), accs[r][t])
        for r in range(R):
            for t in range(T):
                at = builder.add(o0_v, builder.add(builder.mul(const(t), ldo_v), const(r * L)))
                dst = builder.bitcast(builder.gep(outd, [at]), VEC.as_pointer())
                builder.store(builder.fadd(builder.load(dst, align=4), builder.load(accs[r][t])), dst, align=4)
        return context.get_dummy_value()

    return sig, codegen


@_jit
def _fill(x, dy, planes, dye, sh, sw, uh, uw, ph, pw, hq, wq, i0, i1):  # pragma: no cover - compiled
    """Images i0:i1 of ``x`` (N, C, H, W) into their phase planes ``planes`` (N, C, uh * uw, plen: the first
    uh x uw of the sh x sw phases, those the taps read) and of ``dy`` (N, M, OH, OW) into ``dye`` (N, M, qp)
    as rows of wq columns; only cells of the input and of dY are written (the borders and the columns past
    OW stay as zeroed once)."""
    c, h, w = x.shape[1], x.shape[2], x.shape[3]
    m, oh, ow = dy.shape[1], dy.shape[2], dy.shape[3]
    for i in range(i0, i1):
        for ch in range(c):
            for u in range(uh):
                for v in range(uw):
                    plane = planes[i, ch, u * uw + v]
                    # plane cell (r, j) holds x[r * sh + u - ph, j * sw + v - pw] where that lies in x
                    j0 = max(0, (pw - v + sw - 1) // sw)
                    j1 = min(wq, (w - 1 + pw - v) // sw + 1) if w - 1 + pw - v >= 0 else 0
                    if j1 <= j0:
                        continue
                    for r in range(hq):
                        y = r * sh + u - ph
                        if 0 <= y < h:
                            # unsigned indices: no wraparound test, the copy vectorizes
                            d0, s0, nj = _U(r * wq + j0), _U(j0 * sw + v - pw), _U(j1 - j0)
                            row = x[i, ch, y]
                            if sw == 1:
                                for j in range(nj):
                                    plane[d0 + j] = row[s0 + j]
                            elif sw == 2:  # a constant stride: LLVM de-interleaves whole vectors
                                for j in range(nj):
                                    plane[d0 + j] = row[s0 + 2 * j]
                            else:
                                su = _U(sw)
                                for j in range(nj):
                                    plane[d0 + j] = row[s0 + su * j]
        for k in range(m if dye.shape[1] == m else 0):  # no rows: dY is laid out by _transpose_dy
            row = dye[i, k]
            wu, owu = _U(wq), _U(ow)
            for r in range(oh):
                src = dy[i, k, r]
                d0 = _U(r) * wu
                for j in range(owu):
                    row[d0 + j] = src[j]
    return 0


@_jit
def _accumulate(planes, dye, taps, dw, m0, m1, nb, nq, dyo, xo, out):  # pragma: no cover - compiled
    """dw[m0:m1] += the filter gradient of every image (dw (M, C * taps) zeroed by the caller): per run of
    ``nb`` images, per block of R output channels, per T (channel, tap) pairs, ``_block``; a block's rows
    past m1 and pairs past the last repeat the last one (their sums are dropped). ``dyo`` (R,), ``xo``
    (T,) int64 and ``out`` (R * T,) float32 scratch."""
    n = planes.shape[0]
    kt = taps.shape[0]
    pairs = dw.shape[1]
    cstride = planes.shape[2] * planes.shape[3]
    xs = planes.shape[1] * cstride
    qp = dye.shape[2]
    dys = dye.shape[1] * qp
    pf, df = planes.reshape(-1), dye.reshape(-1)
    for i0 in range(0, n, nb):
        nimg = min(nb, n - i0)
        for mb in range(m0, m1, R):
            for r in range(R):
                dyo[r] = i0 * dys + min(mb + r, m1 - 1) * qp
            for j0 in range(0, pairs, T):
                for t in range(T):
                    jj = min(j0 + t, pairs - 1)
                    xo[t] = i0 * xs + (jj // kt) * cstride + taps[jj % kt]
                _block(df, dyo, dys, pf, xo, xs, nimg, nq, out)
                for r in range(min(R, m1 - mb)):
                    for t in range(min(T, pairs - j0)):
                        dw[mb + r, j0 + t] += out[r * T + t]
    return 0


@_jit
def _transpose_dy(dy, dyt, i0, i1):  # pragma: no cover - compiled
    """dyt[i, p, k] = dy[i, k, p] (dY as (images, pixels, channels): _block_m's operand) for images i0:i1;
    channels past M stay as zeroed once."""
    m = dy.shape[1]
    p = dy.shape[2] * dy.shape[3]
    for i in range(i0, i1):
        src = dy[i].reshape(m, p)
        dst = dyt[i]
        for k in range(m):
            for q in range(p):
                dst[q, k] = src[k, q]
    return 0


@_jit
def _copy_out(dwt, dws, two, dw, k0, k1):  # pragma: no cover - compiled
    """dw[k, j] = dwt[j, k] (+ dws[j, k] when ``two``: the second half's sums) for rows k0 <= k < k1 of dw (M,
    pairs): blocks of 16 rows of dwt, so each row of dw gets 16 contiguous values per pass and the 16 rows of
    dwt read stay in cache (a plain transposed copy of a dW^T beyond the caches reads a cache line per value)."""
    pairs = dw.shape[1]
    for j0 in range(0, pairs, 16):
        j1 = min(pairs, j0 + 16)
        for k in range(k0, k1):
            if two:
                for j in range(j0, j1):
                    dw[k, j] = dwt[j, k] + dws[j, k]
            else:
                for j in range(j0, j1):
                    dw[k, j] = dwt[j, k]
    return 0


@_jit
def _accumulate_m(planes, dyt, taps, dwt, m0, m1, nb, oh, ow, wq, xo):  # pragma: no cover - compiled
    """As ``_accumulate``, by ``_block_m``, into the transposed ``dwt`` (pairs rounded up to T, mp): columns
    m0:m1 (m0 a multiple of R * L, m1 one or the end of mp) zeroed, then += every image's sums; a block's
    pairs past the last repeat it into rows past the real pairs."""
    n = planes.shape[0]
    kt = taps.shape[0]
    pairs = kt * planes.shape[1]
    cstride = planes.shape[2] * planes.shape[3]
    xs = planes.shape[1] * cstride
    ps = dyt.shape[1] * dyt.shape[2]
    mp = dwt.shape[1]
    pf, df, of = planes.reshape(-1), dyt.reshape(-1), dwt.reshape(-1)
    for j in range(dwt.shape[0]):
        dwt[j, m0:m1] = 0
    for i0 in range(0, n, nb):
        nimg = min(nb, n - i0)
        for mb in range(m0, m1, R * L):
            for j0 in range(0, pairs, T):
                for t in range(T):
                    jj = min(j0 + t, pairs - 1)
                    xo[t] = i0 * xs + (jj // kt) * cstride + taps[jj % kt]
                _block_m(df, i0 * ps + mb, pf, xo, xs, nimg, oh, ow, wq, ps, of, j0 * mp + mb, mp)
    return 0


# The native task of FilterGradient (native_pool): its argument block's slots.
X, DY, PLANES, DYE, DYT, DWT, DWF, SHARE, TAPS = 1, 6, 11, 16, 20, 24, 28, 31, 34  # arrays: address, then sizes
SIZES = 36  # sh, sw, uh, uw, ph, pw, hq, wq, nb, nq, oh, ow, m, channels
TASKS = 51  # per task: half, m0, m1, images i0, i1, lay out first, scratch dyo, xo, out (addresses)
TASK_FIELDS = 9


def _task_fn(block, k):  # pragma: no cover - compiled
    """Task ``k`` of FilterGradient: lay out its half's images (when it is the half's first task), then add
    their sums over output channels m0:m1 into dW (first half) or the share (second): ``run`` in
    conv_grad_filter.py, without the GIL."""
    b = native_pool_kernels.block_of(block)
    sh, sw, uh, uw, ph, pw, hq, wq = (
        b[SIZES],
        b[SIZES + 1],
        b[SIZES + 2],
        b[SIZES + 3],
        b[SIZES + 4],
        b[SIZES + 5],
        b[SIZES + 6],
        b[SIZES + 7],
    )
    nb, nq, oh, ow, m, channels = b[SIZES + 8], b[SIZES + 9], b[SIZES + 10], b[SIZES + 11], b[SIZES + 12], b[SIZES + 13]
    t = TASKS + TASK_FIELDS * k
    h, m0, m1, i0, i1, lay_out = b[t], b[t + 1], b[t + 2], b[t + 3], b[t + 4], b[t + 5]
    x, dy = native_pool_kernels.f32_4(b, X), native_pool_kernels.f32_4(b, DY)
    planes, dye = native_pool_kernels.f32_4(b, PLANES), native_pool_kernels.f32_3(b, DYE)
    dyt, dwt = native_pool_kernels.f32_3(b, DYT), native_pool_kernels.f32_3(b, DWT)
    taps = native_pool_kernels.i64_1(b, TAPS)
    if lay_out:
        _fill(x, dy, planes, dye, sh, sw, uh, uw, ph, pw, hq, wq, i0, i1)
        if channels:
            _transpose_dy(dy, dyt, i0, i1)
    if channels:
        m1t = m1 if m1 < m else dwt.shape[2]  # the last part's padding channels too
        xo = carray(native_pool_kernels.pointer(b[t + 7], numba.int64), (T,))
        _accumulate_m(planes[i0:i1], dyt[i0:i1], taps, dwt[h], m0, m1t, nb, oh, ow, wq, xo)
        return
    dst = native_pool_kernels.f32_2(b, DWF) if h == 0 else native_pool_kernels.f32_2(b, SHARE)
    dst[m0:m1] = 0
    dyo = carray(native_pool_kernels.pointer(b[t + 6], numba.int64), (R,))
    xo = carray(native_pool_kernels.pointer(b[t + 7], numba.int64), (T,))
    out = carray(native_pool_kernels.pointer(b[t + 8], numba.float32), (R * T,))
    _accumulate(planes[i0:i1], dye[i0:i1], taps, dst, m0, m1, nb, nq, dyo, xo, out)


# Native task (native_pool.CallJob): one recorded call of ``_copy_out`` per task, its rows of dw split.
COPY_ARGS = (("f4", 2), ("f4", 2), "int", ("f4", 2), "int", "int")


def _copy_task(block, k):  # pragma: no cover - compiled
    b, i = native_pool_kernels.args_of(block, k)
    f32_2 = native_pool_kernels.f32_2
    _copy_out(f32_2(b, i), f32_2(b, i + 3), b[i + 6] != 0, f32_2(b, i + 7), b[i + 10], b[i + 11])


_TASKS: dict = {}


def copy_task():
    """(the task function of ``_copy_out``'s recorded calls, their layout), compiled or loaded on first use."""
    return native_pool_kernels.task_of(_TASKS, {"copy": (_copy_task, COPY_ARGS)}, "copy", simd_ir.CACHE)


def task():
    """The compiled task function (a C callback: its ``address`` is what native_pool.run calls); compiled
    or loaded from the cache on first use."""
    return native_pool_kernels.task_of(_TASKS, {"dw": (_task_fn, None)}, "dw", simd_ir.CACHE)[0]
