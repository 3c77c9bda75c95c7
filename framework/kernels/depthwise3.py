"""3x3 and 5x5 depthwise convolution at stride 1 or 2, read straight from the image: LLVM IR intrinsics compute
L outputs of several output rows per step (the rows share the loads of their common input rows and the
broadcast weights; one accumulator per window row keeps the multiply-add chains short), the zero padding by
masked loads (columns outside the image, and at the top and bottom rows the rows outside it, read nothing), so
there is no zero-bordered copy of the image, a pass over the widest tensor of a mobile block whose input the
1x1 conv before it has just written out of cache. A row's taps are the lanes t.. of two loads (stride 1) or the
even and odd lanes of two loads (stride 2, as pool_columns does for max pooling). The epilogue (bias,
residual, simd_ir.activate) runs on the register before a masked store. Narrow images at stride 1 whose
output has the image's shape take flat steps instead: L consecutive pixels of the plane per vector, over
several rows, each tap's lanes masked by their own row and column (a 7x7 image fills 16 lanes a step, not 7).
Imported only when first needed.
"""

from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.extending import intrinsic

from framework.kernels import cached_jit, simd_ir
from framework.kernels.simd_ir import F32, I1, I32, I64, VEC, L, activate, const, splat, vector_intrinsics

_jit = cached_jit.njit(cache=simd_ir.CACHE, fastmath={"contract"}, nogil=True, boundscheck=False)


def _store_rows(builder, sums, y0_v, ow_v, n_v, flags_v, yd, rd, bias, mload, mstore) -> None:
    """The epilogue of a step: output row rr's window-row accumulators ``sums[rr]`` summed pairwise, + the bias
    scalar, + the residual at y0 + rr * ow (when flags & 2), through simd_ir.activate, stored to its first n
    lanes."""
    mty, align, zero = ir.VectorType(I1, L), ir.Constant(I32, 4), ir.Constant(VEC, [0.0] * L)
    lanes = ir.Constant(ir.VectorType(I64, L), list(range(L)))
    mask = builder.icmp_signed("<", lanes, splat(builder, n_v, lanes.type))
    has_r = builder.icmp_signed("!=", builder.and_(flags_v, const(2)), const(0))
    rmask = builder.and_(mask, splat(builder, has_r, mty))
    bias = splat(builder, bias, VEC)
    for rr, part in enumerate(sums):
        while len(part) > 1:
            part = [builder.fadd(part[i], part[i + 1]) for i in range(0, len(part) - 1, 2)] + part[len(part) & ~1 :]
        at = builder.add(y0_v, builder.mul(ow_v, const(rr)))
        added = builder.call(mload, [builder.gep(rd, [at]), align, rmask, zero])
        val = activate(builder, builder.fadd(builder.fadd(part[0], bias), added), flags_v, const)
        builder.call(mstore, [val, builder.gep(yd, [at]), align, mask])


def _make_direct(stride: int, k: int, rows: int, edge: bool):
    def step(typingctx, x, x0, wd, c0, w, w0, y, y0, ow, n, b, ch, res, flags, rlo, rhi):
        sig = types.void(x, x0, wd, c0, w, w0, y, y0, ow, n, b, ch, res, flags, rlo, rhi)

        def codegen(context, builder, signature, args):
            x_v, x0_v, wd_v, c0_v, w_v, w0_v, y_v, y0_v, ow_v, n_v, b_v, ch_v, res_v, flags_v, rlo_v, rhi_v = args
            tys = signature.args

            def data(i):
                return context.make_array(tys[i])(context, builder, args[i]).data

            xd, wdat, yd, bd, rd = data(0), data(4), data(6), data(10), data(12)
            module = builder.module
            mty, ity, bits = ir.VectorType(I1, L), ir.VectorType(I32, L), ir.IntType(L)
            fma, mload, mstore = vector_intrinsics(module)
            align = ir.Constant(I32, 4)
            zero = ir.Constant(VEC, [0.0] * L)
            width = splat(builder, builder.trunc(wd_v, I32), ity)
            cols0 = builder.add(ir.Constant(ity, list(range(L))), splat(builder, builder.trunc(c0_v, I32), ity))
            col_masks: dict = {}

            def col_mask(u: int):  # the lanes of a load from column c0 + u inside the row: one unsigned compare
                if u not in col_masks:
                    col_masks[u] = builder.icmp_unsigned(
                        "<", builder.add(cols0, splat(builder, ir.Constant(I32, u), ity)), width
                    )
                return col_masks[u]

            def load(pr: int, u: int):
                mask = col_mask(u)
                if edge:  # input rows outside rlo:rhi (above or below the image) read nothing
                    inside = builder.and_(
                        builder.icmp_signed("<=", rlo_v, const(pr)), builder.icmp_signed(">", rhi_v, const(pr))
                    )
                    keep = builder.sub(ir.Constant(bits, 0), builder.zext(inside, bits))
                    mask = builder.bitcast(builder.and_(builder.bitcast(mask, bits), keep), mty)
                at = builder.add(x0_v, builder.add(builder.mul(wd_v, const(pr)), const(u)))
                return builder.call(mload, [builder.gep(xd, [at]), align, mask, zero])

            weights = [
                splat(builder, builder.load(builder.gep(wdat, [builder.add(w0_v, const(t))])), VEC)
                for t in range(k * k)
            ]
            evens = ir.Constant(ir.VectorType(I32, L), list(range(0, 2 * L, 2)))
            odds = ir.Constant(ir.VectorType(I32, L), list(range(1, 2 * L, 2)))
            sums = [[] for _ in range(rows)]
            for pr in range(stride * (rows - 1) + k):
                if stride == 1:  # columns j + t: two masked loads and the lanes t.. of the pair, not K masked loads
                    lo, hi = load(pr, 0), load(pr, L)
                    taps = [lo] + [
                        builder.shuffle_vector(lo, hi, ir.Constant(ir.VectorType(I32, L), list(range(t, t + L))))
                        for t in range(1, k)
                    ]
                else:
                    taps = []
                    for o in range(0, k, 2):
                        lo, hi = load(pr, o), load(pr, o + L)
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
            _store_rows(
                builder, sums, y0_v, ow_v, n_v, flags_v, yd, rd, builder.load(builder.gep(bd, [ch_v])), mload, mstore
            )
            return context.get_dummy_value()

        return sig, codegen

    step.__doc__ = f"""y[y0 + rr * ow + j] (rr < {rows}, j < n) = the {k}x{k} window sum at stride {stride} of output
    row rr of the step, read from the image itself: input row pr of the step (pr = {stride} rr + a for window row
    a) is x[x0 + pr * wd + {stride} * j + t] for tap t, counted where its column c0 + {stride} j + t lies in
    [0, wd){" and rlo <= pr < rhi" if edge else ""} (zero padding without a bordered copy: masked loads);
    weights w[w0 + {k}a + t]; + b[ch] (+ res at the same place when flags & 2), then the activation of flags:
    Relu when flags & 4, capped at 6 when flags & 8 too, HardSwish / Swish when flags & 16 / 32 (simd_ir.activate)."""
    return intrinsic(step)


def _make_flat(k: int):
    def step(typingctx, x, x0, wd, hh, q0, r0, ph, pw, w, w0, y, y0, n, b, ch, res, flags):
        sig = types.void(x, x0, wd, hh, q0, r0, ph, pw, w, w0, y, y0, n, b, ch, res, flags)

        def codegen(context, builder, signature, args):
            x_v, x0_v, wd_v, hh_v, q0_v, r0_v, ph_v, pw_v = args[:8]
            w0_v, y0_v, n_v, ch_v, flags_v = args[9], args[11], args[12], args[14], args[16]
            tys = signature.args

            def data(i):
                return context.make_array(tys[i])(context, builder, args[i]).data

            xd, wdat, yd, bd, rd = data(0), data(8), data(10), data(13), data(15)
            module = builder.module
            ity, fty = ir.VectorType(I32, L), VEC
            fma, mload, mstore = vector_intrinsics(module)
            align = ir.Constant(I32, 4)
            zero = ir.Constant(VEC, [0.0] * L)

            def vec32(v):
                return splat(builder, builder.trunc(v, I32), ity)

            # lane j holds pixel f0 + j: column q0 + j and row r0 past the image's row r0, the row count by a
            # float multiply ((q0 + j + 1/2) / wd is at least 1/(2 wd) away from an integer), not a division
            width = vec32(wd_v)
            qs = builder.add(ir.Constant(ity, list(range(L))), vec32(q0_v))
            inv = builder.fdiv(ir.Constant(F32, 1.0), builder.sitofp(builder.trunc(wd_v, I32), F32))
            half = builder.fadd(builder.sitofp(qs, fty), ir.Constant(fty, [0.5] * L))
            down = builder.fptosi(builder.fmul(half, splat(builder, inv, fty)), ity)
            cols = builder.sub(qs, builder.mul(down, width))
            rows_ = builder.add(down, vec32(r0_v))
            cols = builder.sub(cols, vec32(pw_v))
            rows_ = builder.sub(rows_, vec32(ph_v))
            height = vec32(hh_v)
            col_in = [builder.icmp_unsigned("<", builder.add(cols, ir.Constant(ity, [t] * L)), width) for t in range(k)]
            row_in = [
                builder.icmp_unsigned("<", builder.add(rows_, ir.Constant(ity, [a] * L)), height) for a in range(k)
            ]
            base = builder.sub(x0_v, builder.add(builder.mul(ph_v, wd_v), pw_v))
            sums = []
            for a in range(k):
                acc = zero
                row0 = builder.add(base, builder.mul(wd_v, const(a)))
                for t in range(k):
                    at = builder.add(row0, const(t))
                    tap = builder.call(mload, [builder.gep(xd, [at]), align, builder.and_(row_in[a], col_in[t]), zero])
                    wt = splat(builder, builder.load(builder.gep(wdat, [builder.add(w0_v, const(k * a + t))])), VEC)
                    acc = builder.call(fma, [wt, tap, acc])
                sums.append(acc)
            bias = builder.load(builder.gep(bd, [ch_v]))
            _store_rows(builder, [sums], y0_v, const(0), n_v, flags_v, yd, rd, bias, mload, mstore)
            return context.get_dummy_value()

        return sig, codegen

    step.__doc__ = f"""y[y0 + j] (j < n) = the {k}x{k} stride-1 window sum of output pixel f0 + j of a channel whose
    output has the image's own shape (hh x wd; the layouts match, so pixel f0 + j of the output is pixel
    f0 + j of the image, at x0 + j): lane j is column q0 + j of row r0 wrapped onto the next rows, so one step
    covers several rows of a narrow image; tap (a, t) reads x[x0 + j + (a - ph) wd + t - pw] where that row and
    column lie inside the image (masked loads); weights w[w0 + {k}a + t]; then bias, residual and activation as
    the other steps."""
    return intrinsic(step)


# images at most this wide (stride 1, output shaped as the image) take the flat steps, whose lanes all work
# where a row step's would idle past the row's end; 5x5 ones up to twice as wide (their row steps hold 2 rows,
# not 4: the flat ones win there too)
FLAT_OW = L
_flat3, _flat5 = _make_flat(3), _make_flat(5)


# output rows per step of the kernel (K, stride) -> rows: the rows share their input rows' loads and the
# broadcast weights; more rows than these spill the 5x5 weights out of the registers
ROWS3S1, ROWS = 4, 2
_drows1, _drows2 = _make_direct(1, 3, ROWS3S1, False), _make_direct(2, 3, ROWS, False)
_drows1k5, _drows2k5 = _make_direct(1, 5, ROWS, False), _make_direct(2, 5, ROWS, False)
_dedge1, _dedge2 = _make_direct(1, 3, 1, True), _make_direct(2, 3, 1, True)
_dedge1k5, _dedge2k5 = _make_direct(1, 5, 1, True), _make_direct(2, 5, 1, True)


@_jit
def _depthwise3(x, w, b, y, res, s, ph, pw, flags, i0, i1):  # pragma: no cover - compiled
    """KxK depthwise conv (K 3 or 5; group = C = M, ``w`` (C, 1, K, K)) of images i0:i1 at stride s (1 or 2),
    ``ph`` / ``pw`` the zero rows / columns before the image, read straight from it: per channel, blocks of
    output rows whose windows lie inside the image's rows (``ROWS3S1`` / ``ROWS`` at a time, ``_drows*``), the
    others one at a time with their rows outside the image masked off (``_dedge*``); columns outside the image
    are masked off in both; narrow images (``FLAT_OW``) in flat runs of L pixels (``_flat3`` / ``_flat5``).
    ``res`` is y itself when flags & 2 is off (never read then)."""
    k = w.shape[3]
    kk = k * k
    c, oh, ow = y.shape[1], y.shape[2], y.shape[3]
    h, wd = x.shape[2], x.shape[3]
    xf, yf, rf, wf = x.reshape(-1), y.reshape(-1), res.reshape(-1), w.reshape(-1)
    hw, ihw = oh * ow, h * wd
    rows = ROWS3S1 if k == 3 and s == 1 else ROWS
    if s == 1 and oh == h and ow == wd and ow <= FLAT_OW * (k - 1) // 2:  # narrow images: flat runs of pixels
        for i in range(i0, i1):
            for ch in range(c):
                xc, yc = (i * c + ch) * ihw, (i * c + ch) * hw
                for f0 in range(0, hw, L):
                    n = min(L, hw - f0)
                    if k == 3:
                        _flat3(
                            xf, xc + f0, wd, h, f0 % wd, f0 // wd, ph, pw, wf, ch * kk, yf, yc + f0, n, b, ch, rf, flags
                        )
                    else:
                        _flat5(
                            xf, xc + f0, wd, h, f0 % wd, f0 // wd, ph, pw, wf, ch * kk, yf, yc + f0, n, b, ch, rf, flags
                        )
        return 0
    for i in range(i0, i1):
        for ch in range(c):
            xc = (i * c + ch) * ihw
            r = 0
            while r < oh:
                top = r * s - ph
                y0 = (i * c + ch) * hw + r * ow
                x0 = xc + top * wd
                if top >= 0 and top + s * (rows - 1) + k <= h and r + rows <= oh:
                    for q0 in range(0, ow, L):
                        n, c0, yq = min(L, ow - q0), s * q0 - pw, y0 + q0
                        if k == 3 and s == 1:
                            _drows1(xf, x0 + c0, wd, c0, wf, ch * kk, yf, yq, ow, n, b, ch, rf, flags, 0, k)
                        elif k == 3:
                            _drows2(xf, x0 + c0, wd, c0, wf, ch * kk, yf, yq, ow, n, b, ch, rf, flags, 0, k)
                        elif s == 1:
                            _drows1k5(xf, x0 + c0, wd, c0, wf, ch * kk, yf, yq, ow, n, b, ch, rf, flags, 0, k)
                        else:
                            _drows2k5(xf, x0 + c0, wd, c0, wf, ch * kk, yf, yq, ow, n, b, ch, rf, flags, 0, k)
                    r += rows
                else:
                    rlo, rhi = max(0, -top), min(k, h - top)
                    for q0 in range(0, ow, L):
                        n, c0, yq = min(L, ow - q0), s * q0 - pw, y0 + q0
                        if k == 3 and s == 1:
                            _dedge1(xf, x0 + c0, wd, c0, wf, ch * kk, yf, yq, ow, n, b, ch, rf, flags, rlo, rhi)
                        elif k == 3:
                            _dedge2(xf, x0 + c0, wd, c0, wf, ch * kk, yf, yq, ow, n, b, ch, rf, flags, rlo, rhi)
                        elif s == 1:
                            _dedge1k5(xf, x0 + c0, wd, c0, wf, ch * kk, yf, yq, ow, n, b, ch, rf, flags, rlo, rhi)
                        else:
                            _dedge2k5(xf, x0 + c0, wd, c0, wf, ch * kk, yf, yq, ow, n, b, ch, rf, flags, rlo, rhi)
                    r += 1
    return 0
