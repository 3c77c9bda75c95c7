"""Direct convolution for narrow outputs with the output channels in the vector lanes: an LLVM IR
register block (a numba ``intrinsic``) holding V vectors of L output channels for R output pixels of
one row, over K = C x window taps; per step V vector loads of the packed filter and R broadcasts of
input cells (pixel j of the block reads its image plane at j * stride: no phase planes at stride 2).
The epilogue adds the bias, the residual (a masked gather) and the activation (simd_ir.activate: Relu, Relu6,
HardSwish, Swish) on the registers and scatters each vector's lanes to their channels' rows of the NCHW output.

microkernel.py puts output pixels in the lanes: a row narrower than a vector wastes lanes (7x7
outputs: 49 of 64 lanes in two runs, plus a pass copying the valid columns out of the wide layout).
Here the lanes are full (M a multiple of V*L) and a block is one output row or a part of it.
Where it runs: conv_strategies.Channel. Writing the blocks into a (pixels, channels) scratch and
transposing it in a second pass cost 13-23% of the small convs' time (64 -> 64 on 8x8, SqueezeNet's 13x13 expand convs).

Imported only when first needed (window_jit.channel_conv).
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from framework.kernels import cached_jit, native_pool_kernels, simd_ir
from framework.kernels.simd_ir import I1, I32, I64, VEC, L, activate, const, function, splat
from framework.kernels.window_jit import CHANNEL_STRIDES
from framework.kernels.window_kernels import _direct_fill

_jit = cached_jit.njit(cache=simd_ir.CACHE, fastmath={"contract"}, nogil=True, boundscheck=False)

# (R, V) register blocks: R x V accumulators + V filter vectors + a broadcast fit the vector
# registers (32 with AVX-512, 16 with AVX2).
BLOCKS = ((7, 3), (8, 3), (8, 2), (14, 2)) if L == 16 else ((4, 3), (4, 2), (6, 2), (7, 2))
STRIDES = CHANNEL_STRIDES
# plane cells a block may read past the last row (pixels beyond n at the widest stride, the widest tap)
SLACK = max(STRIDES) * max(r for r, _ in BLOCKS) + 16
_STRIDE_INDEX = tuple(STRIDES.index(st) if st in STRIDES else -1 for st in range(max(STRIDES) + 1))


def _variant(R: int, V: int, S: int):
    """The IR of one register block (R pixels x V vectors at stride S), emitted where the builder is."""

    def codegen(context, builder, signature, args):
        wp_v, w0_v, pl_v, cs_v, taps_v, c_v, xb_v, n_v, y_v, y0_v, ld_v, mlim_v, b_v, m0_v, res_v, flags_v = args
        tys = signature.args

        def data(i):
            return context.make_array(tys[i])(context, builder, args[i]).data

        wd, pd, td, yd, bd, rd = data(0), data(2), data(4), data(8), data(12), data(14)
        ntap = builder.extract_value(context.make_array(tys[4])(context, builder, taps_v).shape, 0)
        module = builder.module
        fma = function(module, f"llvm.fma.v{L}f32", ir.FunctionType(VEC, [VEC, VEC, VEC]))
        ptrs_t, mty = ir.VectorType(ir.PointerType(), L), ir.VectorType(I1, L)
        scatter = function(
            module, f"llvm.masked.scatter.v{L}f32.v{L}p0", ir.FunctionType(ir.VoidType(), [VEC, ptrs_t, I32, mty])
        )
        gather = function(module, f"llvm.masked.gather.v{L}f32.v{L}p0", ir.FunctionType(VEC, [ptrs_t, I32, mty, VEC]))
        zero = ir.Constant(VEC, [0.0] * L)
        align = ir.Constant(I32, 4)

        def vload(ptr, at):
            return builder.load(builder.bitcast(builder.gep(ptr, [at]), VEC.as_pointer()), align=4)

        accs = [[cgutils.alloca_once_value(builder, zero) for _ in range(V)] for _ in range(R)]
        kk = cgutils.alloca_once_value(builder, w0_v)  # the filter vectors of the current (ch, tap)
        with cgutils.for_range(builder, c_v) as chl:
            base = builder.add(builder.mul(chl.index, cs_v), xb_v)
            with cgutils.for_range(builder, ntap) as tl:
                at = builder.add(base, builder.load(builder.gep(td, [tl.index])))
                wrow = builder.load(kk)
                fv = [vload(wd, builder.add(wrow, const(v * L))) for v in range(V)]
                for r in range(R):
                    a = splat(builder, builder.load(builder.gep(pd, [builder.add(at, const(S * r))])), VEC)
                    for v in range(V):
                        builder.store(builder.call(fma, [a, fv[v], builder.load(accs[r][v])]), accs[r][v])
                builder.store(builder.add(wrow, const(V * L)), kk)
        # epilogue: channel lane l of vector v is output channel m0 + v*L + l, ld apart in y
        i64v = ir.VectorType(I64, L)
        lanes = ir.Constant(i64v, list(range(L)))
        has_r = builder.icmp_signed("!=", builder.and_(flags_v, const(2)), const(0))
        ybase = builder.ptrtoint(builder.gep(yd, [y0_v]), I64)
        rbase = builder.ptrtoint(builder.gep(rd, [y0_v]), I64)
        for v in range(V):
            chans = builder.add(lanes, splat(builder, const(v * L), i64v))
            mask = builder.icmp_signed("<", chans, splat(builder, mlim_v, i64v))
            rmask = builder.and_(mask, splat(builder, has_r, mty))
            bytes_ = builder.mul(chans, splat(builder, builder.mul(ld_v, const(4)), i64v))
            bias = vload(bd, builder.add(m0_v, const(v * L)))
            for r in range(R):
                with builder.if_then(builder.icmp_signed("<", const(r), n_v)):
                    offs = builder.add(bytes_, splat(builder, const(4 * r), i64v))
                    yp = builder.inttoptr(builder.add(offs, splat(builder, ybase, i64v)), ptrs_t)
                    rp = builder.inttoptr(builder.add(offs, splat(builder, rbase, i64v)), ptrs_t)
                    val = builder.fadd(builder.load(accs[r][v]), bias)
                    val = builder.fadd(val, builder.call(gather, [rp, align, rmask, zero]))
                    val = activate(builder, val, flags_v, const)
                    builder.call(scatter, [val, yp, align, mask])
        return context.get_dummy_value()

    return codegen


_VARIANTS = [(r, v, st) for r, v in BLOCKS for st in STRIDES]  # variant var at stride s: _conv's kv
_NSTRIDES = len(STRIDES)


@intrinsic
def _block(typingctx, k, wp, w0, planes, cstride, taps, c, xb, n, y, y0, ld, mlim, b, m0, res, flags):
    """y[y0 + (v*L + l) * ld + j] for pixel j < n <= R of the block and channel lane v*L + l < mlim (V
    vectors of L) = the conv of output channel m0 + v*L + l (+ b[m0 + v*L + l]) (+ res at the same
    index when flags & 2) (then the activation of flags, simd_ir.activate: Relu when flags & 4, "0 if v < 0 else
    v", capped at 6 with flags & 8; HardSwish when flags & 16; Swish when flags & 32): pixel j reads
    planes[ch * cstride + xb + S * j + taps[t]] for input channel ch < c, tap t; the filter's vectors from
    wp[w0] on, V*L per (ch, tap). (R, V, S) = _VARIANTS[k]: one LLVM switch over the variants (numba
    cannot call an intrinsic chosen at run time)."""
    sig = types.void(k, wp, w0, planes, cstride, taps, c, xb, n, y, y0, ld, mlim, b, m0, res, flags)
    inner = types.void(*sig.args[1:])
    emitters = [_variant(*rvs) for rvs in _VARIANTS]

    def codegen(context, builder, signature, args):
        done = builder.append_basic_block("block_done")
        switch = builder.switch(args[0], done)
        for idx, emit in enumerate(emitters):
            case = builder.append_basic_block(f"block_variant{idx}")
            switch.add_case(ir.Constant(args[0].type, idx), case)
            builder.position_at_end(case)
            emit(context, builder, inner, args[1:])
            builder.branch(done)
        builder.position_at_end(done)
        return context.get_dummy_value()

    return sig, codegen


def pack(w: np.ndarray, v: int, out: np.ndarray) -> None:
    """out (Mp * K,) = the (M, K) filter ``w`` as panels of V*L output channels: panel mb holds
    k-major rows of its V*L channels (missing channels zero). Mp = M rounded up to V*L."""
    m, k = w.shape
    vl = v * L
    panels = out.reshape(-1, k, vl)
    full = m // vl
    panels[:full] = w[: full * vl].reshape(full, vl, k).transpose(0, 2, 1)
    if full < panels.shape[0]:
        panels[full] = 0
        panels[full, :, : m - full * vl] = w[full * vl :].T


def padded_channels(m: int, v: int) -> int:
    return -(-m // (v * L)) * v * L


@_jit
def _conv(
    x, wp, b, y, res, planes, taps, s, ph, pw, hq, wq, flags, i0, i1, mb0, mb1, moff, m, var, rr, vl
):  # pragma: no cover
    """y[i, moff + mb0*vl : moff + min(mb1*vl, m)] for images i0:i1 (m the filter's rows): per image its
    zero-bordered planes (C, >= hq * wq + SLACK; only the image's cells written), then per channel
    panel (vl = V * L channels), output row and block of ``rr`` pixels of it the register block
    ``var``, which writes y (and reads the residual ``res``, y itself without one) in place.
    ``taps`` the plane offset of each window tap (a * wq + b)."""
    c = x.shape[1]
    mt, oh, ow = y.shape[1], y.shape[2], y.shape[3]
    p = oh * ow
    k = c * taps.shape[0]
    pf, yf, rf = planes.reshape(-1), y.reshape(-1), res.reshape(-1)
    cstride = planes.shape[1]
    kv = _NSTRIDES * var + _STRIDE_INDEX[s]  # _VARIANTS index
    for i in range(i0, i1):
        _direct_fill(x, i, planes, 1, ph, pw, hq, wq)
        for mb in range(mb0, mb1):
            w0 = mb * k * vl
            m0 = mb * vl
            ybase = (i * mt + moff + m0) * p
            for r in range(oh):
                for q0 in range(0, ow, rr):
                    n = min(rr, ow - q0)
                    xb = s * (r * wq + q0)
                    y0 = ybase + r * ow + q0
                    _block(kv, wp, w0, pf, cstride, taps, c, xb, n, yf, y0, p, m - m0, b, m0, rf, flags)
    return 0


# Native task (native_pool.CallJob): one recorded call of ``_conv`` per task, its arguments in the order of the
# signature (arrays as address and sizes).
CONV_ARGS = (("f4", 4), ("f4", 1), ("f4", 1), ("f4", 4), ("f4", 4), ("f4", 2), ("i8", 1), *["int"] * 15)


def _task_conv(block, k):  # pragma: no cover - compiled
    b, i = native_pool_kernels.args_of(block, k)
    f32_1, f32_4 = native_pool_kernels.f32_1, native_pool_kernels.f32_4
    x, wp, bias, y, res = f32_4(b, i), f32_1(b, i + 5), f32_1(b, i + 7), f32_4(b, i + 9), f32_4(b, i + 14)
    planes, taps, j = native_pool_kernels.f32_2(b, i + 19), native_pool_kernels.i64_1(b, i + 22), i + 24
    s, ph, pw, hq, wq, flags, i0, i1 = b[j], b[j + 1], b[j + 2], b[j + 3], b[j + 4], b[j + 5], b[j + 6], b[j + 7]
    mb0, mb1, moff, m, var, rr, vl = b[j + 8], b[j + 9], b[j + 10], b[j + 11], b[j + 12], b[j + 13], b[j + 14]
    _conv(x, wp, bias, y, res, planes, taps, s, ph, pw, hq, wq, flags, i0, i1, mb0, mb1, moff, m, var, rr, vl)


@_jit
def _pack(w, out, vl, p0, p1):  # pragma: no cover - compiled
    """Panels p0:p1 of ``pack``'s layout, the same values: out[p, kk, l] = w[p * vl + l, kk], 0 past w's rows."""
    m, k = w.shape
    panels = out.reshape((-1, k, vl))
    for p in range(p0, p1):
        dst = panels[p]
        for lane in range(vl):
            c = p * vl + lane
            if c < m:
                src = w[c]
                for kk in range(k):
                    dst[kk, lane] = src[kk]
            else:
                for kk in range(k):
                    dst[kk, lane] = 0
    return 0


PACK_ARGS = (("f4", 2), ("f4", 1), "int", "int", "int")


def _task_pack(block, k):  # pragma: no cover - compiled
    b, i = native_pool_kernels.args_of(block, k)
    _pack(native_pool_kernels.f32_2(b, i), native_pool_kernels.f32_1(b, i + 3), b[i + 5], b[i + 6], b[i + 7])


_TASK_FNS = {"_conv": (_task_conv, CONV_ARGS), "_pack": (_task_pack, PACK_ARGS)}
_TASKS: dict = {}


def native_task(kernel: str):
    """(the task function of ``kernel``'s recorded calls, its argument layout), compiled or loaded on first use;
    None for a kernel without one."""
    return native_pool_kernels.task_of(_TASKS, _TASK_FNS, kernel, simd_ir.CACHE)
