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


def splat(builder, value, vty):
    """A vector of type ``vty`` (L lanes) with ``value`` in every lane."""
    one = builder.insert_element(ir.Constant(vty, ir.Undefined), value, ir.Constant(I32, 0))
    return builder.shuffle_vector(one, one, ir.Constant(ir.VectorType(I32, L), [0] * L))


def const(v: int):
    """An i64 constant."""
    return ir.Constant(I64, v)


def _fconst(vty, v: float):
    return ir.Constant(vty, [v] * L)


def exp_vec(builder, x):
    """exp(x) lane by lane (float32): x clamped to [-87.3, 88] (2^n stays a normal number), x = n ln2 + r with
    n = round(x / ln2) and |r| <= ln2 / 2 (ln2 split in two for an exact product), e^r by a degree-6 polynomial
    (relative error a few float32 ulps), times 2^n built in the exponent bits."""
    module, vty = builder.module, x.type
    ity = ir.VectorType(I32, L)
    rint = function(module, f"llvm.rint.v{L}f32", ir.FunctionType(vty, [vty]))
    fma = function(module, f"llvm.fma.v{L}f32", ir.FunctionType(vty, [vty, vty, vty]))
    lo, hi = _fconst(vty, -87.3), _fconst(vty, 88.0)
    x = builder.select(builder.fcmp_ordered("<", x, lo), lo, x)
    x = builder.select(builder.fcmp_ordered(">", x, hi), hi, x)
    n = builder.call(rint, [builder.fmul(x, _fconst(vty, 1.4426950408889634))])
    r = builder.call(fma, [n, _fconst(vty, -0.693145751953125), x])
    r = builder.call(fma, [n, _fconst(vty, -1.428606765330187e-06), r])
    p = _fconst(vty, 1.0 / 720)
    for c in (1.0 / 120, 1.0 / 24, 1.0 / 6, 0.5, 1.0, 1.0):
        p = builder.call(fma, [p, r, _fconst(vty, c)])
    bits = builder.shl(builder.add(builder.fptosi(n, ity), ir.Constant(ity, [127] * L)), ir.Constant(ity, [23] * L))
    return builder.fmul(p, builder.bitcast(bits, vty))


def reciprocal(builder, d):
    """1 / d lane by lane (1 <= d <= 2 here): the CPU's reciprocal estimate (AVX-512's 14 bits, AVX's 12) and one
    Newton step r (2 - d r), a few float32 ulps off, where a vector division would cost 10-20 cycles."""
    module, vty = builder.module, d.type
    if L == 16:
        fnty = ir.FunctionType(vty, [vty, vty, ir.IntType(16)])
        est = function(module, "llvm.x86.avx512.rcp14.ps.512", fnty)
        r = builder.call(est, [d, _fconst(vty, 0.0), ir.Constant(ir.IntType(16), -1)])
    else:
        est = function(module, "llvm.x86.avx.rcp.ps.256", ir.FunctionType(vty, [vty]))
        r = builder.call(est, [d])
    fma = function(module, f"llvm.fma.v{L}f32", ir.FunctionType(vty, [vty, vty, vty]))
    e = builder.call(fma, [builder.fsub(_fconst(vty, 0.0), d), r, _fconst(vty, 2.0)])  # 2 - d r
    return builder.fmul(r, e)


def activate(builder, val, flags_v, cflag):
    """``val`` through the activation of ``flags_v`` (window_jit's activation bits; ``cflag`` makes a constant
    of its type):
    Relu "0 if v < 0 else v" (NaN stays), then the cap at 6 "6 if v > 6 else v"; HardSwish v * min(max(v / 6
    + 1/2, 0), 1); Swish v * sigmoid(v), as v / (1 + e) for v >= 0 and v e / (1 + e) below, e = exp(-|v|) (no
    overflow; NaN stays NaN)."""
    vty = val.type
    zero, six, one = _fconst(vty, 0.0), _fconst(vty, 6.0), _fconst(vty, 1.0)

    def bit(b):
        return builder.icmp_signed("!=", builder.and_(flags_v, cflag(b)), cflag(0))

    val = builder.select(bit(4), builder.select(builder.fcmp_ordered("<", val, zero), zero, val), val)
    val = builder.select(bit(8), builder.select(builder.fcmp_ordered(">", val, six), six, val), val)
    hs = builder.fmul(val, _fconst(vty, 1.0 / 6))
    hs = builder.fadd(hs, _fconst(vty, 0.5))
    hs = builder.select(builder.fcmp_ordered("<", hs, zero), zero, hs)
    hs = builder.select(builder.fcmp_ordered(">", hs, one), one, hs)
    val = builder.select(bit(16), builder.fmul(val, hs), val)
    before = builder.block
    with builder.if_then(bit(32)):  # a branch, not a select: the other activations skip the exp
        neg = builder.fcmp_ordered("<", val, zero)
        minus = builder.fsub(zero, val)
        e = exp_vec(builder, builder.select(neg, val, minus))  # exp(-|v|)
        num = builder.select(neg, builder.fmul(val, e), val)
        sw = builder.fmul(num, reciprocal(builder, builder.fadd(one, e)))
        then = builder.block
    out = builder.phi(vty)
    out.add_incoming(val, before)
    out.add_incoming(sw, then)
    return out
