"""3x3 and 5x5 depthwise convolution at stride 1 or 2, L outputs of several output rows per step (the rows
share the loads of their common plane rows and the broadcast weights; one accumulator per window row keeps
the multiply-add chains short): an LLVM IR intrinsic over each channel's zero-bordered plane (the stride-1
layout of window_kernels._direct_fill at both strides), the epilogue (bias, residual, simd_ir.activate) on
the register and a masked store. At stride 2 the even and odd columns of two vector loads are split by a
shuffle, as pool_columns does for max pooling: no phase planes, whose per-channel fill dominates the planes
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


def _make_row(stride: int, k: int, rows: int):
    def row(typingctx, planes, p0, wq, w, w0, y, y0, ow, n, b, ch, res, flags):
        sig = types.void(planes, p0, wq, w, w0, y, y0, ow, n, b, ch, res, flags)

        def codegen(context, builder, signature, args):
            pl_v, p0_v, wq_v, w_v, w0_v, y_v, y0_v, ow_v, n_v, b_v, ch_v, res_v, flags_v = args
            tys = signature.args

            def data(i):
                return context.make_array(tys[i])(context, builder, args[i]).data

            pd, wd, yd, bd, rd = data(0), data(3), data(5), data(9), data(11)
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

            # the K*K weights broadcast once for all the rows of the step (loads are what the step is bound by)
            weights = [
                splat(builder, builder.load(builder.gep(wd, [builder.add(w0_v, const(t))])), VEC) for t in range(k * k)
            ]
            evens = ir.Constant(ir.VectorType(I32, L), list(range(0, 2 * L, 2)))
            odds = ir.Constant(ir.VectorType(I32, L), list(range(1, 2 * L, 2)))
            zero = ir.Constant(VEC, [0.0] * L)
            # one accumulator per output row and window row: short chains of dependent multiply-adds
            sums = [[] for _ in range(rows)]
            for pr in range(stride * (rows - 1) + k):  # each plane row once, into every output row whose window has it
                base = builder.add(p0_v, builder.mul(wq_v, const(pr)))
                if stride == 1:
                    taps = [load(builder.add(base, const(t))) for t in range(k)]
                else:  # columns 2j + t of the row: the even and odd lanes of the two loads from base + 2 (t // 2)
                    taps = []
                    for o in range(0, k, 2):
                        lo, hi = load(builder.add(base, const(o))), load(builder.add(base, const(o + L)))
                        taps.append(builder.shuffle_vector(lo, hi, evens))
                        if o + 1 < k:
                            taps.append(builder.shuffle_vector(lo, hi, odds))
                for rr in range(rows):
                    a = pr - stride * rr
                    if 0 <= a < k:
                        acc = zero
                        for t in range(k):
                            acc = builder.call(fma, [weights[k * a + t], taps[t], acc])
                        sums[rr].append(acc)
            lanes = ir.Constant(ir.VectorType(I64, L), list(range(L)))
            mask = builder.icmp_signed("<", lanes, splat(builder, n_v, lanes.type))
            has_r = builder.icmp_signed("!=", builder.and_(flags_v, const(2)), const(0))
            rmask = builder.and_(mask, splat(builder, has_r, mty))
            bias = splat(builder, builder.load(builder.gep(bd, [ch_v])), VEC)
            for rr in range(rows):
                part = sums[rr]
                while len(part) > 1:  # a pairwise sum of the window rows' accumulators
                    part = [builder.fadd(part[i], part[i + 1]) for i in range(0, len(part) - 1, 2)] + part[
                        len(part) & ~1 :
                    ]
                at = builder.add(y0_v, builder.mul(ow_v, const(rr)))
                added = builder.call(mload, [builder.gep(rd, [at]), align, rmask, zero])
                val = activate(builder, builder.fadd(builder.fadd(part[0], bias), added), flags_v, const)
                builder.call(mstore, [val, builder.gep(yd, [at]), align, mask])
            return context.get_dummy_value()

        return sig, codegen

    row.__doc__ = f"""y[y0 + rr * ow + j] (rr < {rows}, j < n) = the {k}x{k} window sum of channel ``ch`` at stride
    {stride} for output row rr of the step: window row a reads planes[p0 + ({stride} rr + a) * wq + {stride} * j + t]
    for its tap t, weights w[w0 + {k}a + t]; + b[ch] (+ res at the same place when flags & 2), Relu when
    flags & 4 ("0 if v < 0 else v"), capped at 6 when flags & 8 too (Relu6), HardSwish / Swish when
    flags & 16 / 32 (simd_ir.activate)."""
    return intrinsic(row)


# output rows per step of the kernel (K, stride) -> rows: the rows share their plane rows' loads and the broadcast
# weights; more rows than these spill the 5x5 weights out of the registers
ROWS3S1, ROWS = 4, 2
_row1, _row2 = _make_row(1, 3, 1), _make_row(2, 3, 1)
_row1k5, _row2k5 = _make_row(1, 5, 1), _make_row(2, 5, 1)
_rows1, _rows2 = _make_row(1, 3, ROWS3S1), _make_row(2, 3, ROWS)
_rows1k5, _rows2k5 = _make_row(1, 5, ROWS), _make_row(2, 5, ROWS)


@_jit
def _depthwise3(x, w, b, y, res, planes, s, ph, pw, hq, wq, flags, i0, i1):  # pragma: no cover - compiled
    """KxK depthwise conv (K 3 or 5; group = C = M, ``w`` (C, 1, K, K)) of images i0:i1 at stride s (1 or 2):
    per image the zero-bordered planes (C, >= hq * wq + SLACK; only the image's cells are written),
    then per channel, block of output rows (``ROWS3S1`` / ``ROWS``, then single rows) and L outputs of them,
    the intrinsics above. ``res`` is y itself when flags & 2 is off (never read then)."""
    k = w.shape[3]
    kk = k * k
    c, oh, ow = y.shape[1], y.shape[2], y.shape[3]
    cstride = planes.shape[1]
    pf, yf, rf, wf = planes.reshape(-1), y.reshape(-1), res.reshape(-1), w.reshape(-1)
    hw = oh * ow
    rows = ROWS3S1 if k == 3 and s == 1 else ROWS
    for i in range(i0, i1):
        _direct_fill(x, i, planes, 1, ph, pw, hq, wq)
        for ch in range(c):
            r = 0
            while r < oh:
                p0 = ch * cstride + r * s * wq
                y0 = (i * c + ch) * hw + r * ow
                if r + rows <= oh:
                    for q0 in range(0, ow, L):
                        n, p, yq = min(L, ow - q0), p0 + s * q0, y0 + q0
                        if k == 3 and s == 1:
                            _rows1(pf, p, wq, wf, ch * kk, yf, yq, ow, n, b, ch, rf, flags)
                        elif k == 3:
                            _rows2(pf, p, wq, wf, ch * kk, yf, yq, ow, n, b, ch, rf, flags)
                        elif s == 1:
                            _rows1k5(pf, p, wq, wf, ch * kk, yf, yq, ow, n, b, ch, rf, flags)
                        else:
                            _rows2k5(pf, p, wq, wf, ch * kk, yf, yq, ow, n, b, ch, rf, flags)
                    r += rows
                else:
                    for q0 in range(0, ow, L):
                        n, p, yq = min(L, ow - q0), p0 + s * q0, y0 + q0
                        if k == 3 and s == 1:
                            _row1(pf, p, wq, wf, ch * kk, yf, yq, ow, n, b, ch, rf, flags)
                        elif k == 3:
                            _row2(pf, p, wq, wf, ch * kk, yf, yq, ow, n, b, ch, rf, flags)
                        elif s == 1:
                            _row1k5(pf, p, wq, wf, ch * kk, yf, yq, ow, n, b, ch, rf, flags)
                        else:
                            _row2k5(pf, p, wq, wf, ch * kk, yf, yq, ow, n, b, ch, rf, flags)
                    r += 1
    return 0
