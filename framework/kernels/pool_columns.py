"""3-wide, stride-2 max pooling as an LLVM IR intrinsic: L outputs of a row at once, the window's
rows maxed in four vectors of input columns and the stride-2 column step done as shuffles of them
(even and odd lanes). numba's loops (window_kernels._max_pool) vectorize the contiguous row step
but not stride-2 reads, which would run the column step one output at a time; doing the rows and
the columns in one vector step also leaves no scratch row and no scalar loops over short rows.
Imported by window_kernels.
"""

from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from framework.kernels.simd_ir import I1, I32, VEC, L, const, function, splat


@intrinsic
def rows3s2(typingctx, x, r0, rstride, nrows, c0, w, pad, padded, y, y0, n):
    """y[y0 + j] for j < n <= L: the max over ``nrows`` input rows (x[r0 + a * rstride + col], a <
    nrows) and, when ``padded``, the pad value, of the 3-wide window at columns c0 + 2j .. c0 + 2j + 2;
    a column outside [0, w) holds ``pad``. Without the row scratch of window_kernels._max_pool: the
    rows' maxima stay in four vectors (columns c0 + [0, 2L) and c0 + 2 + [0, 2L); masked loads at a
    row's ends, never reading outside it), then the stride-2 step as even/odd shuffles. Same values bit
    for bit as the scalar loops of window_kernels._max_pool (rows in order, then the pad; the column
    maxima as _mx(_mx(col 2j, col 2j+1), col 2j+2)): NaN wins, +0/-0 ties keep that order."""
    sig = types.void(x, r0, rstride, nrows, c0, w, pad, padded, y, y0, n)

    def codegen(context, builder, signature, args):
        x_v, r0_v, rs_v, nr_v, c0_v, w_v, pad_v, padded_v, y_v, y0_v, n_v = args
        tys = signature.args
        xd = context.make_array(tys[0])(context, builder, x_v).data
        yd = context.make_array(tys[8])(context, builder, y_v).data
        ptr, mty = ir.PointerType(), ir.VectorType(I1, L)
        align = ir.Constant(I32, 4)
        mload = function(builder.module, f"llvm.masked.load.v{L}f32.p0", ir.FunctionType(VEC, [ptr, I32, mty, VEC]))
        mstore = function(
            builder.module, f"llvm.masked.store.v{L}f32.p0", ir.FunctionType(ir.VoidType(), [VEC, ptr, I32, mty])
        )
        i32v = ir.VectorType(I32, L)
        lanes = ir.Constant(i32v, list(range(L)))
        padv = splat(builder, pad_v, VEC)
        starts = (0, L, 2, 2 + L)  # the four column runs, relative to c0
        c0_32, w_32 = builder.trunc(c0_v, I32), builder.trunc(w_v, I32)

        def mx(p, q):  # "p if (p > q or p != p) else q" (window_kernels._max)
            greater = builder.fcmp_ordered(">", p, q)
            return builder.select(builder.or_(greater, builder.fcmp_unordered("uno", p, p)), p, q)

        accs = [cgutils.alloca_once(builder, VEC) for _ in range(4)]

        def rows(load):  # the rows' maxima into accs (then the pad)
            for k in range(4):
                builder.store(load(r0_v, k), accs[k])
            with cgutils.for_range(builder, builder.sub(nr_v, const(1))) as loop:
                off = builder.add(r0_v, builder.mul(builder.add(loop.index, const(1)), rs_v))
                for k in range(4):
                    builder.store(mx(builder.load(accs[k]), load(off, k)), accs[k])

        def at(row_off, k):
            return builder.gep(xd, [builder.add(row_off, builder.add(c0_v, const(starts[k])))])

        inside = builder.and_(
            builder.icmp_signed(">=", c0_v, const(0)),
            builder.icmp_signed("<=", builder.add(c0_v, const(2 * L + 2)), w_v),
        )
        with builder.if_else(inside) as (whole, edge):
            with whole:  # every column in the row: plain loads
                rows(lambda off, k: builder.load(builder.bitcast(at(off, k), VEC.as_pointer()), align=4))
            with edge:
                masks = []
                for st in starts:
                    cols = builder.add(lanes, splat(builder, builder.add(c0_32, ir.Constant(I32, st)), i32v))
                    masks.append(
                        builder.and_(
                            builder.icmp_signed(">=", cols, ir.Constant(i32v, [0] * L)),
                            builder.icmp_signed("<", cols, splat(builder, w_32, i32v)),
                        )
                    )
                rows(lambda off, k: builder.call(mload, [at(off, k), align, masks[k], padv]))
        with builder.if_then(builder.icmp_signed("!=", padded_v, const(0))):
            for k in range(4):
                builder.store(mx(builder.load(accs[k]), padv), accs[k])
        a, b, c, d = (builder.load(acc) for acc in accs)
        evens = ir.Constant(i32v, list(range(0, 2 * L, 2)))
        odds = ir.Constant(i32v, list(range(1, 2 * L, 2)))
        e, o = builder.shuffle_vector(a, b, evens), builder.shuffle_vector(a, b, odds)
        e2 = builder.shuffle_vector(c, d, evens)
        mask = builder.icmp_signed("<", lanes, splat(builder, builder.trunc(n_v, I32), i32v))
        builder.call(mstore, [mx(mx(e, o), e2), builder.gep(yd, [y0_v]), align, mask])
        return context.get_dummy_value()

    return sig, codegen
