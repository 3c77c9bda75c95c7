"""Which compiled kernels may run in this process: what the host CPU offers, what each kernel's code
needs, and the guard around each kernel's first call (its compile).

A kernel family (``NEEDS``' keys: the names dispatch asks about) is *usable* when the CPU has every
feature its code needs and its compile has not failed in this process. The plain numba loops
(window_kernels.py, winograd_kernels.py) let LLVM vectorize for whatever CPU it finds: any CPU numba
runs on will do. The LLVM IR kernels (microkernel.py, channel_kernel.py, depthwise3.py,
pool_columns.py) are written for vectors of ``simd_ir.L`` float32 lanes with fused multiply-adds:
x86-64 with AVX2 (and AVX-512 for 16 lanes), and FMA for those that multiply. Elsewhere LLVM would
lower them to scalar calls (``llvm.fma.v8f32`` as eight ``fmaf`` calls on an x86-64-v2 CPU) and
they would run several times slower than the numpy kernels, so there the numpy (BLAS) path runs.

The first call of a kernel compiles it (or loads it from numba's cache), and so does a later call
with argument types not seen before (numba compiles one specialization per type signature). When a
compile fails - an llvmlite whose IR builder differs, an LLVM that cannot select an intrinsic, a
signature the kernel cannot be typed for - the family is disabled for the process with one
``RuntimeWarning`` and ``KernelUnavailable`` is raised; the callers (window_jit's wrappers,
conv_nchw.ConvNCHW, pool_nchw.JitPool2D) catch it and run their numpy kernels, which compute the
same values. An exception raised after a successful compile is the kernel's own error and
propagates unchanged.

``FRAMEWORK_CPU_FEATURES`` masks features off the host's (``-fma,-avx512f``: behave as a CPU
without them; features cannot be added), read once per process before the first kernel is built.
"""

from __future__ import annotations

import os
import platform
import threading
import warnings

from framework.runtime.state import RUNTIME

# Features the LLVM IR kernels need on x86-64 (simd_ir.L lanes: 8 -> AVX2, 16 -> AVX-512 as well).
_VECTOR = ("avx2",)
_FMA = ("fma",)
# Kernel family -> features of its code beyond a vector unit of simd_ir.L lanes (None: plain numba
# loops, which need nothing: LLVM vectorizes them for the host).
NEEDS: dict[str, tuple | None] = {
    "depthwise": None,  # window_kernels._depthwise (phase planes)
    "pool": None,  # window_kernels._pool (phase planes)
    "pool2x2": None,  # window_kernels._pool2x2
    "epilogue": None,  # window_kernels._epilogue and _epilogue_block
    "scale_shift": None,  # window_kernels._scale_shift, _channel_means and _squeeze_excite
    "winograd": None,  # winograd_kernels._input and _output
    "max_pool": (),  # window_kernels._max_pool (pool_columns.rows3s2: masked vector loads, shuffles)
    "direct": _FMA,  # microkernel._conv and _conv_wide
    "pointwise": _FMA,  # microkernel._pointwise
    "direct_depthwise": _FMA,  # microkernel._depthwise
    "channel": _FMA,  # channel_kernel._conv
    "depthwise3": _FMA,  # depthwise3._depthwise3
    "conv_grad_filter": _FMA,  # conv_grad_filter_kernels (ConvGradient's filter gradient)
    # outside the conv and pool strategies (catalog.OTHERS):
    "recurrent": None,  # recurrent_cells (ONNX RNN/GRU/LSTM, InferenceLSTM, LSTMUnit and its gradient)
    "activation": None,  # activation_kernels (Erf, Gelu, LayerNorm)
    "int8": None,  # framework/ops/quantized/int8_kernels (requantization, int8 depthwise, Int8Add/Sum)
    "int8_gemm": ("avx512f", "avx512bw", "avx512vnni"),  # int8_gemm (uint8 x int8 vpdpbusd GEMM, requantized)
    "bn_train": None,  # bn_train_kernels (training-mode SpatialBN and its gradient)
    "range_search": None,  # framework/ops/quantized/range_search (the GREEDY engine's loss loop)
}


class KernelUnavailable(Exception):
    """A compiled kernel could not be compiled in this process (its family is now disabled): the
    caller runs its numpy kernel instead. Internal to the kernels' callers; never reaches a user."""

    def __init__(self, family: str) -> None:
        super().__init__(f"compiled kernel '{family}' is disabled in this process")
        self.family = family


_LOCK = threading.Lock()
_FEATURES: list = RUNTIME.held("kernels.features", list)  # the effective feature set, once read
_DISABLED: dict[str, str] = RUNTIME.held("kernels.disabled", dict)  # family -> why (the compile error)
_COMPILED: set = RUNTIME.held("kernels.verified", set)  # kernels (compiled functions) called once without error


def host_features() -> frozenset:
    """The CPU features LLVM reports for this host (``avx2``, ``fma``, ``avx512f``... without the
    +/- signs: only those present), minus the ones ``FRAMEWORK_CPU_FEATURES`` masks off; empty
    without llvmlite."""
    if not _FEATURES:
        try:
            import llvmlite.binding as llvm

            flat = llvm.get_host_cpu_features().flatten()
        except Exception:  # no llvmlite (the default install), or a build without host queries
            flat = ""
        have = {f[1:] for f in flat.split(",") if f.startswith("+")}
        masked = {f.strip().lstrip("-") for f in os.environ.get("FRAMEWORK_CPU_FEATURES", "").split(",") if f.strip()}
        _FEATURES.append(frozenset(have - masked))
    return _FEATURES[0]


def vector_features(lanes: int) -> tuple | None:
    """Features a vector of ``lanes`` float32 needs on this architecture; None where the IR kernels
    were never meant to run (not x86-64, or a lane count no x86 vector has)."""
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return None
    if lanes == 8:
        return _VECTOR
    if lanes == 16:
        return _VECTOR + ("avx512f",)
    return None


def missing(family: str, lanes: int | None = None) -> tuple:
    """The features ``family``'s code needs that this CPU lacks (("<arch>",) where the IR kernels do
    not apply at all); empty when it can run here. ``lanes``: simd_ir.L unless given."""
    needs = NEEDS[family]
    if needs is None:
        return ()
    if lanes is None:
        from framework.kernels import simd_ir

        lanes = simd_ir.L
    vector = vector_features(lanes)
    if vector is None:
        return (f"{platform.machine()} with {lanes}-lane float32 vectors",)
    have = host_features()
    return tuple(f for f in vector + needs if f not in have)


def usable(family: str) -> bool:
    """Whether ``family``'s compiled kernel may be chosen: the CPU has what it needs and its compile
    has not failed in this process (numba itself: window_jit.available())."""
    return family not in _DISABLED and not missing(family)


def disabled() -> dict[str, str]:
    """Families disabled in this process by a failed compile, with the error (a copy)."""
    return dict(_DISABLED)


def disable(family: str, why: str) -> None:
    """Disable ``family`` for the process, warning once (later calls for it say nothing)."""
    with _LOCK:
        if family in _DISABLED:
            return
        _DISABLED[family] = why
    warnings.warn(
        f"compiled kernel '{family}' failed to compile on this machine ({why}); the numpy kernel runs "
        "instead for the rest of this process",
        RuntimeWarning,
        stacklevel=3,
    )


def call(family: str, fn, args) -> bool:
    """``fn(*args)``; True if this was ``fn``'s first call (it compiled or loaded the kernel). A call
    that fails compiling - the first, or a later one with argument types numba has not compiled ``fn``
    for (numba compiles one specialization per type signature) - disables ``family`` (see ``disable``)
    and raises KernelUnavailable: nothing ran. Later calls pay nothing for the guard (a ``try`` costs
    nothing until it catches); the checks run only when one raises (``failed_compile``)."""
    if fn in _COMPILED:
        try:
            fn(*args)
        except Exception as exc:
            failed_compile(family, fn, args, exc)
            raise
        return False
    if family in _DISABLED:
        raise KernelUnavailable(family)
    before = _signatures(fn)
    try:
        fn(*args)
    except Exception as exc:
        if _signatures(fn) > before:  # it compiled, then failed while running: the kernel's own error
            raise
        disable(family, f"{type(exc).__name__}: {_first_line(exc)}")
        raise KernelUnavailable(family) from exc
    _COMPILED.add(fn)
    return True


def failed_compile(family: str, fn, args, exc: Exception) -> None:
    """After ``fn(*args)`` raised ``exc`` on a call other than ``fn``'s first: if numba failed to compile
    the call's type signature (a numba compile error, or a signature ``fn`` holds no compiled code for),
    disable ``family`` and raise KernelUnavailable from ``exc``; otherwise return (the kernel ran and
    raised its own error: the caller re-raises it)."""
    if not _compile_error(exc) and _compiled_for(fn, args) is not False:
        return
    disable(family, f"{type(exc).__name__}: {_first_line(exc)}")
    raise KernelUnavailable(family) from exc


def _compile_error(exc: Exception) -> bool:
    """Is ``exc`` one of numba's compile-time errors (typing, lowering, unsupported constructs)?"""
    try:
        from numba.core.errors import NumbaError
    except ImportError:  # no numba: nothing was compiled
        return False
    return isinstance(exc, NumbaError)


def _compiled_for(fn, args) -> bool | None:
    """Does the numba dispatcher ``fn`` hold code for the types of ``args``? None if it cannot tell
    (not a dispatcher)."""
    typeof = getattr(fn, "typeof_pyval", None)
    overloads = getattr(fn, "overloads", None)
    if typeof is None or overloads is None:
        return None
    try:
        sig = tuple(typeof(a) for a in args)
    except Exception:  # a value numba cannot type: no code can exist for it
        return False
    return sig in overloads


def _signatures(fn) -> int:
    return len(getattr(fn, "overloads", ()))


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:200] if text else ""
