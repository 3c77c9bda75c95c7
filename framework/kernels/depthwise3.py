"""3x3 and 5x5 depthwise convolution at stride 1 or 2, L outputs of a row per step: an LLVM IR intrinsic over
each channel's zero-bordered plane (the stride-1 layout of window_kernels._direct_fill at both
strides), the K*K weights broadcast, the epilogue (bias, residual, simd_ir.activate) on the register and a
masked store. At stride 2 the even and odd columns of two vector loads are split by a shuffle, as
pool_columns does for max pooling: no phase planes, whose per-channel fill dominates the planes
kernel's time (window_kernels._depthwise) on stride-2 depthwise convs.
Imported only when first needed.
"""

from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.extending import intrinsic

from framework.kernels import cached_jit, simd_ir
from framework.kernels.simd_ir import I1, I32, I64, VEC, L, activate, const, function, splat
from framework.kernels.window_kernels import _direct_fill

_jit = cached_jit.njit(cache=simd_ir.CACHE, fastmath={"contract"}, nogil=True, boundscheck=False)
SLACK = 2 * L + 8  # plane cells read past the last row (a 5x5 stride-2 step reads 2L + 4 from its start)


def _make_row(stride: int, k: int):
    def row(typingctx, planes, p0, wq, w, w0, y, y0, n, b, ch, res, flags):
        sig = types.void(planes, p0, wq, w, w0, y, y0, n, b, ch, res, flags)

        def codegen(context, builder, signature, args):
            pl_v, p0_v, wq_v, w_v, w0_v, y_v, y0_v, n_v, b_v, ch_v, res_v, flags_v = args
            tys = signature.args

            def data(i):
                return context.make_array(tys[i])(context, builder, args[i]).data

            pd, wd, yd, bd, rd = data(0), data(3), data(5), data(8), data(10)
            module = builder.module
            ptr, mty = ir.PointerType(), ir.VectorType(I1, L)
            vt = f"v{L}f32"
            fma = function(module, f"llvm.fma.{vt}", ir.FunctionType(VEC, [VEC, VEC, VEC]))
            mload = function(module, f"llvm.masked.load.{vt}.p0", ir.FunctionType(VEC, [ptr, I32, mty, VEC]))
            mstore = function(
                module, f"llvm.masked.store.{vt}.p0", ir.FunctionType(ir.VoidType(), [VEC, ptr, I32, mty])
            )
            align = ir.Constant(I32, 4)

            def load(at):
                return builder.load(builder.bitcast(builder.gep(pd, [at]), VEC.as_pointer()), align=4)

            def weight(t: int):
                return splat(builder, builder.load(builder.gep(wd, [builder.add(w0_v, const(t))])), VEC)

            evens = ir.Constant(ir.VectorType(I32, L), list(range(0, 2 * L, 2)))
            odds = ir.Constant(ir.VectorType(I32, L), list(range(1, 2 * L, 2)))
            acc = ir.Constant(VEC, [0.0] * L)
            for a in range(k):
                base = builder.add(p0_v, builder.mul(wq_v, const(a)))
                if stride == 1:
                    taps = [load(builder.add(base, const(t))) for t in range(k)]
                else:  # columns 2j + t of the row: the even and odd lanes of the two loads from base + 2 (t // 2)
                    taps = []
                    for o in range(0, k, 2):
                        lo, hi = load(builder.add(base, const(o))), load(builder.add(base, const(o + L)))
                        taps.append(builder.shuffle_vector(lo, hi, evens))
                        if o + 1 < k:
                            taps.append(builder.shuffle_vector(lo, hi, odds))
                for t in range(k):
                    acc = builder.call(fma, [weight(k * a + t), taps[t], acc])
            lanes = ir.Constant(ir.VectorType(I64, L), list(range(L)))
            mask = builder.icmp_signed("<", lanes, splat(builder, n_v, lanes.type))
            zero = ir.Constant(VEC, [0.0] * L)
            has_r = builder.icmp_signed("!=", builder.and_(flags_v, const(2)), const(0))
            out = builder.gep(yd, [y0_v])
            added = builder.call(
                mload, [builder.gep(rd, [y0_v]), align, builder.and_(mask, splat(builder, has_r, mty)), zero]
            )
            val = builder.fadd(builder.fadd(acc, splat(builder, builder.load(builder.gep(bd, [ch_v])), VEC)), added)
            val = activate(builder, val, flags_v, const)
            builder.call(mstore, [val, out, align, mask])
            return context.get_dummy_value()

        return sig, codegen

    row.__doc__ = f"""y[y0 + j] (j < n) = the {k}x{k} window sum of channel ``ch`` at stride {stride}: window row a
    reads planes[p0 + a * wq + {stride} * j + t] for its tap t, weights w[w0 + {k}a + t]; + b[ch] (+ res at
    y0 + j when flags & 2), Relu when flags & 4 ("0 if v < 0 else v"), capped at 6 when flags & 8 too (Relu6),
    HardSwish / Swish when flags & 16 / 32 (simd_ir.activate)."""
    return intrinsic(row)


_row1, _row2 = _make_row(1, 3), _make_row(2, 3)
_row1k5, _row2k5 = _make_row(1, 5), _make_row(2, 5)


@_jit
def _depthwise3(x, w, b, y, res, planes, s, ph, pw, hq, wq, flags, i0, i1):  # pragma: no cover - compiled
    """KxK depthwise conv (K 3 or 5; group = C = M, ``w`` (C, 1, K, K)) of images i0:i1 at stride s (1 or 2):
    per image the zero-bordered planes (C, >= hq * wq + SLACK; only the image's cells are written),
    then per channel, output row and L outputs of it, ``_row1`` / ``_row2`` (``_row1k5`` / ``_row2k5``).
    ``res`` is y itself when flags & 2 is off (never read then)."""
    k = w.shape[3]
    kk = k * k
    c, oh, ow = y.shape[1], y.shape[2], y.shape[3]
    cstride = planes.shape[1]
    pf, yf, rf, wf = planes.reshape(-1), y.reshape(-1), res.reshape(-1), w.reshape(-1)
    hw = oh * ow
    for i in range(i0, i1):
        _direct_fill(x, i, planes, 1, ph, pw, hq, wq)
        for ch in range(c):
            for r in range(oh):
                p0 = ch * cstride + r * s * wq
                y0 = (i * c + ch) * hw + r * ow
                for q0 in range(0, ow, L):
                    n = min(L, ow - q0)
                    if k == 3 and s == 1:
                        _row1(pf, p0 + q0, wq, wf, ch * kk, yf, y0 + q0, n, b, ch, rf, flags)
                    elif k == 3:
                        _row2(pf, p0 + 2 * q0, wq, wf, ch * kk, yf, y0 + q0, n, b, ch, rf, flags)
                    elif s == 1:
                        _row1k5(pf, p0 + q0, wq, wf, ch * kk, yf, y0 + q0, n, b, ch, rf, flags)
                    else:
                        _row2k5(pf, p0 + 2 * q0, wq, wf, ch * kk, yf, y0 + q0, n, b, ch, rf, flags)
    return 0
