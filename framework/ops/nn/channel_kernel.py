"""Direct convolution for narrow outputs with the output channels in the vector lanes: an LLVM IR
register block (a numba ``intrinsic``) holding V vectors of L output channels for R output pixels of
one row, over K = C x window taps; per step V vector loads of the packed filter and R broadcasts of
input cells (pixel j of the block reads its image plane at j * stride: no phase planes at stride 2).

microkernel.py puts output pixels in the lanes: a row narrower than a vector wastes lanes (7x7
outputs: 49 of 64 lanes in two runs, plus a pass copying the valid columns out of the wide layout).
Here the lanes are always full (M a multiple of L) and a block is one output row or a part of it.
The block writes z (P, Mp), pixels by channels, with the bias; ``_conv`` then copies z into the
NCHW output with the residual and Relu (``_out``). Measured (1 thread, batch 1, bias + Relu, against
the kernels conv_kind chose before): 3x3 512 -> 512 on 7x7 0.80-0.85x, 128 -> 32 on 7x7 0.68-0.86x,
1x1 512 -> 2048 on 7x7 0.79x (OpenBLAS's GEMM and the epilogue pass), 232 -> 232 on 7x7 0.77x.

Imported only when first needed (window_jit.channel_conv).
"""

from __future__ import annotations

import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from framework.ops.nn import simd_ir
from framework.ops.nn.simd_ir import VEC, L, const, function, splat
from framework.ops.nn.window_kernels import _direct_fill

_jit = numba.njit(cache=simd_ir.CACHE, fastmath={"contract"}, nogil=True, boundscheck=False)

# (R, V) register blocks: R x V accumulators + V filter vectors + a broadcast fit the vector
# registers (32 with AVX-512, 16 with AVX2).
BLOCKS = ((7, 3), (8, 3), (8, 2), (14, 2)) if L == 16 else ((4, 3), (4, 2), (6, 2), (7, 2))
STRIDES = (1, 2)
SLACK = 2 * 14 + 16  # plane cells a block may read past the last row (pixels beyond n, the widest tap)


def _make_block(R: int, V: int, S: int):  # noqa: N803  (as in the module doc)
    def block(typingctx, wp, w0, planes, cstride, taps, c, xb, n, z, z0, ldz, b, m0):
        sig = types.void(wp, w0, planes, cstride, taps, c, xb, n, z, z0, ldz, b, m0)

        def codegen(context, builder, signature, args):
            wp_v, w0_v, pl_v, cs_v, taps_v, c_v, xb_v, n_v, z_v, z0_v, ldz_v, b_v, m0_v = args
            tys = signature.args

            def data(i):
                return context.make_array(tys[i])(context, builder, args[i]).data

            wd, pd, td, zd, bd = data(0), data(2), data(4), data(8), data(11)
            ntap = builder.extract_value(context.make_array(tys[4])(context, builder, taps_v).shape, 0)
            fma = function(builder.module, f"llvm.fma.v{L}f32", ir.FunctionType(VEC, [VEC, VEC, VEC]))
            zero = ir.Constant(VEC, [0.0] * L)

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
            bias = [vload(bd, builder.add(m0_v, const(v * L))) for v in range(V)]
            for r in range(R):
                with builder.if_then(builder.icmp_signed("<", const(r), n_v)):
                    row = builder.add(builder.mul(builder.add(z0_v, const(r)), ldz_v), m0_v)
                    for v in range(V):
                        val = builder.fadd(builder.load(accs[r][v]), bias[v])
                        out = builder.gep(zd, [builder.add(row, const(v * L))])
                        builder.store(val, builder.bitcast(out, VEC.as_pointer()), align=4)
            return context.get_dummy_value()

        return sig, codegen

    block.__doc__ = f"""z[(z0 + j) * ldz + m0 + lane] (j < n <= {R}) = the conv of output pixel j of the block for
    {V * L} output channels from m0 + b[m0 + lane]: pixel j reads planes[ch * cstride + xb + {S} * j + taps[t]]
    for input channel ch < c, tap t; the filter's vectors from wp[w0] on, {V * L} per (ch, tap)."""
    return intrinsic(block)


# variant var at stride s: _b<2 * var + s - 1>
_b0, _b1, _b2, _b3, _b4, _b5, _b6, _b7 = (_make_block(r, v, s) for r, v in BLOCKS for s in STRIDES)


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
def _run_block(var, s, wp, w0, pf, cstride, taps, c, xb, n, zf, z0, ldz, b, m0):  # pragma: no cover
    """The register block of variant ``var`` (an index into BLOCKS) at stride s (1 or 2)."""
    k = 2 * var + s - 1
    if k == 0:
        _b0(wp, w0, pf, cstride, taps, c, xb, n, zf, z0, ldz, b, m0)
    elif k == 1:
        _b1(wp, w0, pf, cstride, taps, c, xb, n, zf, z0, ldz, b, m0)
    elif k == 2:
        _b2(wp, w0, pf, cstride, taps, c, xb, n, zf, z0, ldz, b, m0)
    elif k == 3:
        _b3(wp, w0, pf, cstride, taps, c, xb, n, zf, z0, ldz, b, m0)
    elif k == 4:
        _b4(wp, w0, pf, cstride, taps, c, xb, n, zf, z0, ldz, b, m0)
    elif k == 5:
        _b5(wp, w0, pf, cstride, taps, c, xb, n, zf, z0, ldz, b, m0)
    elif k == 6:
        _b6(wp, w0, pf, cstride, taps, c, xb, n, zf, z0, ldz, b, m0)
    else:
        _b7(wp, w0, pf, cstride, taps, c, xb, n, zf, z0, ldz, b, m0)


@_jit
def _out(z, y, res, i, m0, m1, moff, flags):  # pragma: no cover - compiled
    """y[i, moff + m] = z[:, m] (+ res[i, moff + m] when flags & 2) (Relu when flags & 4: "0 if v < 0
    else v") for m in m0:m1, a tile of 16 channels by the image's pixels at a time."""
    p = y.shape[2] * y.shape[3]
    yi = y[i].reshape(y.shape[1], p)
    ri = res[i].reshape(res.shape[1], p)
    has_r, relu = (flags & 2) != 0, (flags & 4) != 0
    zero = np.float32(0)
    for t0 in range(m0, m1, 16):
        t1 = min(m1, t0 + 16)
        for q in range(p):
            for mo in range(t0, t1):
                v = z[q, mo]
                if has_r:
                    v += ri[moff + mo, q]
                if relu and v < zero:
                    v = zero
                yi[moff + mo, q] = v


@_jit
def _conv(x, wp, b, y, res, planes, taps, s, ph, pw, hq, wq, flags, i0, i1, mb0, mb1, z, moff, m, var, rr, vl):  # noqa: E501  # pragma: no cover
    """y[i, moff + mb0*vl : moff + min(mb1*vl, m)] for images i0:i1 (m the filter's rows): per image its
    zero-bordered planes (C, >= hq * wq + SLACK; only the image's cells written), then per channel
    panel (vl = V * L channels), output row and block of ``rr`` pixels of it the register block
    ``var`` into z (P, >= Mp), then z into y (``_out``). ``taps`` the plane offset of each window tap
    (a * wq + b)."""
    c = x.shape[1]
    oh, ow = y.shape[2], y.shape[3]
    k = c * taps.shape[0]
    pf, zf = planes.reshape(-1), z.reshape(-1)
    cstride, ldz = planes.shape[1], z.shape[1]
    for i in range(i0, i1):
        _direct_fill(x, i, planes, 1, ph, pw, hq, wq)
        for mb in range(mb0, mb1):
            w0 = mb * k * vl
            for r in range(oh):
                for q0 in range(0, ow, rr):
                    n = min(rr, ow - q0)
                    xb = s * (r * wq + q0)
                    _run_block(var, s, wp, w0, pf, cstride, taps, c, xb, n, zf, r * ow + q0, ldz, b, mb * vl)
        _out(z, y, res, i, mb0 * vl, min(mb1 * vl, m), moff, flags)
    return 0
