"""What the LLVM IR intrinsics (microkernel.py, pool_columns.py, depthwise3.py) share: the vector width of this
CPU and a few IR building helpers (the activations of the conv kernels' stores among them). Imported only when
first needed (with numba's llvmlite). numba caches a kernel by its own file's stamp: after an edit here, clear
the kernel cache (``framework warmup`` recompiles) or the kernels keep the code built from the old helpers."""

from __future__ import annotations

import os

from llvmlite import ir

from framework.kernels import kernel_support


def _lanes() -> int:
    """16 float32 lanes per vector with AVX-512 (32 vector registers), else 8 (AVX2's 16 registers);
    FRAMEWORK_MICROKERNEL_LANES=8 or 16 forces one (tests run the 8-lane kernels on any CPU; the
    kernels stay unused where the CPU lacks what the lanes need: kernel_support)."""
    forced = os.environ.get("FRAMEWORK_MICROKERNEL_LANES", "")
    if forced in ("8", "16"):
        return int(forced)
    return 16 if "avx512f" in kernel_support.host_features() else 8


L = _lanes()  # float32 lanes per vector
# numba's on-disk cache does not key on L: kernels built on these intrinsics compile afresh under a
# forced lane count or masked CPU features rather than load (or store) the ones compiled for this
# CPU's own.
CACHE = not os.environ.get("FRAMEWORK_MICROKERNEL_LANES", "") and not os.environ.get("FRAMEWORK_CPU_FEATURES", "")

F32, I64, I32, I1 = ir.FloatType(), ir.IntType(64), ir.IntType(32), ir.IntType(1)
VEC = ir.VectorType(F32, L)


def function(module, name: str, fnty):
    """The module's declaration of ``name`` (an LLVM intrinsic), made on first use."""
    try:
        return module.get_global(name)
    except KeyError:
        return ir.Function(module, fnty, name=name)


def vector_intrinsics(module):
    """The module's ``llvm.fma``, ``llvm.masked.load`` and ``llvm.masked.store`` over L float32 lanes."""
    ptr, mty, vt = ir.PointerType(), ir.VectorType(I1, L), f"v{L}f32"
    fma = function(module, f"llvm.fma.{vt}", ir.FunctionType(VEC, [VEC, VEC, VEC]))
    mload = function(module, f"llvm.masked.load.{vt}.p0", ir.FunctionType(VEC, [ptr, I32, mty, VEC]))
    mstore = function(module, f"llvm.masked.store.{vt}.p0", ir.FunctionType(ir.VoidType(), [VEC, ptr, I32, mty]))
    return fma, mload, mstore


def splat(builder, value, vty):
    """A vector of type ``vty`` (L lanes) with ``value`` in every lane."""
    one = builder.insert_element(ir.Constant(vty, ir.Undefined), value, ir.Constant(I32, 0))
    return builder.shuffle_vector(one, one, ir.Constant(ir.VectorType(I32, L), [0] * L))


def const(v: int):
    """An i64 constant."""
    return ir.Constant(I64, v)


def _fconst(vty, v: float):
    return ir.Constant(vty, [v] * L)


def exp_vec(builder, x, negate: bool = False):
    """exp(x) lane by lane (float32; exp(-x) when ``negate``): the argument clamped to [-87.3, 88] (2^n stays a
    normal number; NaN stays NaN), = n ln2 + r with n = round(x / ln2) and |r| <= ln2 / 2 (ln2 split in two for
    an exact product), e^r by a degree-6 polynomial (relative error a few float32 ulps; evaluated in powers of
    r^2), times 2^n built in the exponent bits. The negation folds into the multiply-adds."""
    module, vty = builder.module, x.type
    ity = ir.VectorType(I32, L)
    fma = function(module, f"llvm.fma.v{L}f32", ir.FunctionType(vty, [vty, vty, vty]))
    lo, hi = (-88.0, 87.3) if negate else (-87.3, 88.0)
    x = builder.select(builder.fcmp_ordered("<", x, _fconst(vty, lo)), _fconst(vty, lo), x)
    x = builder.select(builder.fcmp_ordered(">", x, _fconst(vty, hi)), _fconst(vty, hi), x)
    sign = -1.0 if negate else 1.0
    # n = round(x / ln2) as (x / ln2 + 1.5 * 2^23) - 1.5 * 2^23: the sum's last bits hold n rounded to nearest
    # even, as rint would, in one multiply-add and one subtraction on the dependency chain
    magic = _fconst(vty, 12582912.0)
    t = builder.call(fma, [x, _fconst(vty, sign * 1.4426950408889634), magic])
    n = builder.fsub(t, magic)
    r = builder.call(fma, [n, _fconst(vty, -0.693145751953125), builder.fneg(x) if negate else x])
    r = builder.call(fma, [n, _fconst(vty, -1.428606765330187e-06), r])
    # the degree-6 Taylor polynomial as (1 + r) + r^2 ((1/2 + r/6) + r^2 ((1/24 + r/120) + r^2 / 720)): four
    # dependent multiply-adds after r^2 instead of Horner's six; a kernel applying it to one vector per step
    # waits on this chain
    r2 = builder.fmul(r, r)
    lo1 = builder.fadd(r, _fconst(vty, 1.0))
    lo2 = builder.call(fma, [r, _fconst(vty, 1.0 / 6), _fconst(vty, 0.5)])
    lo3 = builder.call(fma, [r, _fconst(vty, 1.0 / 120), _fconst(vty, 1.0 / 24)])
    p = builder.call(fma, [r2, _fconst(vty, 1.0 / 720), lo3])
    p = builder.call(fma, [r2, p, lo2])
    p = builder.call(fma, [r2, p, lo1])
    # 2^n: t's bits are those of 1.5 * 2^23 plus n, whose shift by 23 leaves n << 23 alone (the constant's bits
    # shift out), and + 127 << 23 the biased exponent: two integer operations
    bits = builder.shl(builder.bitcast(t, ity), ir.Constant(ity, [23] * L))
    bits = builder.add(bits, ir.Constant(ity, [127 << 23] * L))
    return builder.fmul(p, builder.bitcast(bits, vty))


def divide(builder, num, d):
    """num / d lane by lane (d >= 1 here): the CPU's reciprocal estimate r (AVX-512's 14 bits, AVX's 12) and
    one Newton step, (num r) (2 - d r), a few float32 ulps off, where a vector division would cost 10-20 cycles;
    num r is formed beside 2 - d r, off the dependency chain. Where 1 / d is below float32's normal range the
    estimate may be 0: the quotient is then 0 (or NaN for an infinite num)."""
    module, vty = builder.module, d.type
    if L == 16:
        fnty = ir.FunctionType(vty, [vty, vty, ir.IntType(16)])
        est = function(module, "llvm.x86.avx512.rcp14.ps.512", fnty)
        r = builder.call(est, [d, _fconst(vty, 0.0), ir.Constant(ir.IntType(16), -1)])
    else:
        est = function(module, "llvm.x86.avx.rcp.ps.256", ir.FunctionType(vty, [vty]))
        r = builder.call(est, [d])
    fma = function(module, f"llvm.fma.v{L}f32", ir.FunctionType(vty, [vty, vty, vty]))
    e = builder.call(fma, [builder.fneg(d), r, _fconst(vty, 2.0)])  # 2 - d r, one negated multiply-add
    return builder.fmul(builder.fmul(num, r), e)


def activate(builder, val, flags_v, cflag):
    """``val`` through the activation of ``flags_v`` (window_jit's activation bits; ``cflag`` makes a constant
    of its type):
    Relu "0 if v < 0 else v" (NaN stays), then the cap at 6 "6 if v > 6 else v"; HardSwish v * min(max(v / 6
    + 1/2, 0), 1); Swish v * sigmoid(v) as v / (1 + e), e = exp(-v) with its argument clamped to [-87.3, 88] (no
    overflow: below v = -88, where v sigmoid(v) is under 1e-36, the quotient is a tiny negative number or
    zero; NaN stays NaN)."""
    vty = val.type
    zero, six, one = _fconst(vty, 0.0), _fconst(vty, 6.0), _fconst(vty, 1.0)

    def bit(b):
        return builder.icmp_signed("!=", builder.and_(flags_v, cflag(b)), cflag(0))

    def branch(cond, val, make):  # a branch, not selects: each activation costs only the kernels that ask for it
        before = builder.block
        with builder.if_then(cond):
            new = make(val)
            then = builder.block
        out = builder.phi(vty)
        out.add_incoming(val, before)
        out.add_incoming(new, then)
        return out

    def relu(v):
        v = builder.select(builder.fcmp_ordered("<", v, zero), zero, v)
        return builder.select(bit(8), builder.select(builder.fcmp_ordered(">", v, six), six, v), v)

    def hardswish(v):
        hs = builder.fadd(builder.fmul(v, _fconst(vty, 1.0 / 6)), _fconst(vty, 0.5))
        hs = builder.select(builder.fcmp_ordered("<", hs, zero), zero, hs)
        hs = builder.select(builder.fcmp_ordered(">", hs, one), one, hs)
        return builder.fmul(v, hs)

    def swish(v):  # v / (1 + exp(-v)): exp's argument clamped, so 1 + e stays finite
        return divide(builder, v, builder.fadd(one, exp_vec(builder, v, negate=True)))

    val = branch(bit(4), val, relu)
    val = branch(bit(16), val, hardswish)
    return branch(bit(32), val, swish)
