"""The column step of 3-wide, stride-2 max pooling as an LLVM IR intrinsic: L outputs at once from a
row of window-row maxima, the stride-2 reads done as two vector loads and a shuffle. numba's loops
(window_kernels._max_pool) vectorize the contiguous row step but not stride-2 reads: the column step
ran one output at a time, 45-65% of a pool's time (SqueezeNet's three 3x3/2 pools, batch 1).
Imported by window_kernels (its max pooling calls ``cols3s2``).
"""

from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.extending import intrinsic

from framework.ops.nn.simd_ir import I1, I32, I64, VEC, L, const, function, splat


@intrinsic
def cols3s2(typingctx, vm, v0, y, y0, n):
    """y[y0 + j] = max(vm[v0 + 2j], vm[v0 + 2j + 1], vm[v0 + 2j + 2]) for j < n <= L, as
    window_kernels._mx does it (NaN wins; the same operand order). Reads vm[v0 : v0 + 2L + 2]
    whatever n is: the caller's row scratch has that slack."""
    sig = types.void(vm, v0, y, y0, n)

    def codegen(context, builder, signature, args):
        vm_v, v0_v, y_v, y0_v, n_v = args
        tys = signature.args
        vmd = context.make_array(tys[0])(context, builder, vm_v).data
        yd = context.make_array(tys[2])(context, builder, y_v).data
        ptr, mty = ir.PointerType(), ir.VectorType(I1, L)
        mstore = function(
            builder.module, f"llvm.masked.store.v{L}f32.p0", ir.FunctionType(ir.VoidType(), [VEC, ptr, I32, mty])
        )

        def load(offset: int):
            at = builder.gep(vmd, [builder.add(v0_v, const(offset))])
            return builder.load(builder.bitcast(at, VEC.as_pointer()), align=4)

        a, b, c, d = load(0), load(L), load(2), load(2 + L)
        evens = ir.Constant(ir.VectorType(I32, L), list(range(0, 2 * L, 2)))
        odds = ir.Constant(ir.VectorType(I32, L), list(range(1, 2 * L, 2)))
        e, o = builder.shuffle_vector(a, b, evens), builder.shuffle_vector(a, b, odds)
        e2 = builder.shuffle_vector(c, d, evens)

        def mx(p, q):  # "p if (p > q or p != p) else q"
            greater = builder.fcmp_ordered(">", p, q)
            return builder.select(builder.or_(greater, builder.fcmp_unordered("uno", p, p)), p, q)

        lanes = ir.Constant(ir.VectorType(I64, L), list(range(L)))
        mask = builder.icmp_signed("<", lanes, splat(builder, n_v, lanes.type))
        out = builder.gep(yd, [y0_v])
        builder.call(mstore, [mx(mx(e, o), e2), out, ir.Constant(I32, 4), mask])
        return context.get_dummy_value()

    return sig, codegen
