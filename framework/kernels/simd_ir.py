"""What the LLVM IR intrinsics (microkernel.py, pool_columns.py) share: the vector width of this CPU
and a few IR building helpers. Imported only when first needed (with numba's llvmlite)."""

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
