"""Which OpenBLAS kernels numpy's GEMMs use: the AVX2 ("Zen") ones on AMD CPUs with AVX-512.

numpy's wheels ship OpenBLAS built for every x86 generation (DYNAMIC_ARCH); at load it picks its
kernels from the CPU's features, so an AMD Zen 4/5 (AVX-512) gets the SkylakeX kernels. Zen 4 runs
512-bit instructions as two 256-bit halves, and on it OpenBLAS's AVX2 kernels are faster. Measured on
this project's machine (AMD EPYC with AVX-512, 1 thread, sgemm GFLOP/s, SkylakeX -> Zen):
2048^3 103 -> 110; conv-shaped 64x576x3136 90 -> 103; 512x4608x49 85 -> 92; the thin 16x144x16384 of
a 16-channel 3x3 conv 45 -> 80. So when ``framework`` is imported before numpy, on such a CPU, it
sets ``OPENBLAS_CORETYPE=Zen`` for the OpenBLAS numpy is about to load.

The choice is OpenBLAS's own documented override and is read once, when the library loads; so:
- a user's ``OPENBLAS_CORETYPE`` always stands, and ``FRAMEWORK_BLAS_CORETYPE=auto`` (default) /
  ``keep`` (never touch it) / any OpenBLAS core name (``Haswell``, ``SkylakeX``...) sets the choice;
- if numpy was imported before ``framework``, nothing can change any more: ``blas_kernel_info()``
  (printed by the benchmarks) shows the kernel in use, and ``OPENBLAS_CORETYPE=Zen`` in the
  environment gives the faster one.

This module imports nothing heavy: it must run before numpy loads.
"""

from __future__ import annotations

import os
import sys

ENV = "FRAMEWORK_BLAS_CORETYPE"
_applied: dict = {"coretype": None, "why": "not decided"}


def _cpu() -> tuple[str, set]:
    """(vendor, flags) of the first CPU in /proc/cpuinfo; ('', set()) where there is none (not Linux)."""
    vendor, flags = "", set()
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
            for line in f:
                key, _, value = line.partition(":")
                key = key.strip()
                if key == "vendor_id" and not vendor:
                    vendor = value.strip()
                elif key == "flags":
                    flags = set(value.split())
                    break
    except OSError:
        pass
    return vendor, flags


def preferred_coretype(vendor: str, flags: set) -> str | None:
    """The OpenBLAS core type to force for this CPU, or None to let OpenBLAS pick."""
    if vendor == "AuthenticAMD" and "avx512f" in flags and "avx2" in flags:
        return "Zen"
    return None


def choose() -> None:
    """Set OPENBLAS_CORETYPE for the OpenBLAS about to load (see module doc); idempotent."""
    if _applied["why"] != "not decided":
        return
    setting = os.environ.get(ENV, "auto").strip()
    if os.environ.get("OPENBLAS_CORETYPE"):
        _applied.update(coretype=os.environ["OPENBLAS_CORETYPE"], why="OPENBLAS_CORETYPE set by the user")
    elif setting.lower() == "keep":
        _applied.update(why=f"{ENV}=keep")
    elif "numpy" in sys.modules:
        _applied.update(why="numpy was imported before framework: OpenBLAS had already chosen")
    elif setting.lower() != "auto":
        os.environ["OPENBLAS_CORETYPE"] = setting
        _applied.update(coretype=setting, why=f"{ENV}={setting}")
    else:
        core = preferred_coretype(*_cpu())
        if core is None:
            _applied.update(why="OpenBLAS's own choice suits this CPU")
        else:
            os.environ["OPENBLAS_CORETYPE"] = core
            _applied.update(coretype=core, why="AMD CPU with AVX-512: OpenBLAS's AVX2 kernels are faster on it")


def blas_kernel_info() -> dict:
    """What numpy's BLAS is and which kernels it runs (threadpoolctl), with the framework's choice."""
    info = {"chosen": _applied["coretype"], "why": _applied["why"]}
    try:
        from threadpoolctl import threadpool_info

        found = [d for d in threadpool_info() if d.get("user_api") == "blas"]
        # numpy's own library first (other packages may load a BLAS of their own)
        found.sort(key=lambda d: "numpy" not in str(d.get("filepath", "")))
        for d in found[:1]:
            info.update(
                library=d.get("internal_api"),
                version=d.get("version"),
                kernel=d.get("architecture"),
                threads=d.get("num_threads"),
            )
    except ImportError:  # pragma: no cover - a core dependency
        pass
    return info


def same_kernels_env(env: dict | None = None) -> dict:
    """A copy of ``env`` (default: this process's environment) for a subprocess that must compute
    bit-identically to this one: OPENBLAS_CORETYPE set to the kernels this process runs (the
    framework may pick other ones in a fresh process, see the module doc)."""
    out = dict(os.environ if env is None else env)
    kernel = blas_kernel_info().get("kernel")
    if kernel:
        out["OPENBLAS_CORETYPE"] = kernel
    return out
