"""Which OpenBLAS kernels numpy's GEMMs use: the AVX2 ("Zen") ones on AMD CPUs with AVX-512.

numpy's wheels ship OpenBLAS built for every x86 generation (DYNAMIC_ARCH); at load it picks its
kernels from the CPU's features, so an AMD Zen 4/5 (AVX-512) gets the SkylakeX kernels. Zen 4 runs
512-bit instructions as two 256-bit halves, and on it OpenBLAS's AVX2 kernels are faster (sgemm
GFLOP/s on one thread, SkylakeX -> Zen: 103 -> 110 on 2048^3, 45 -> 80 on a 16-channel 3x3 conv's
thin GEMM). OpenBLAS reads its documented override, ``OPENBLAS_CORETYPE``, once, when it loads.

When the choice is applied (it changes the process's environment, so only where the process is ours):
- ``import framework`` applies nothing unless asked: ``FRAMEWORK_BLAS_CORETYPE=auto`` (this CPU's best
  kernels) or an OpenBLAS core name (``Haswell``, ``SkylakeX``...) in the environment asks for it
  (``keep``, like no setting, leaves OpenBLAS alone); the package imports no numpy until one of its
  modules needs it, so the choice is made first;
- the ``framework`` command owns its process: it applies ``auto`` (or the variable's value) when its
  package loads, before numpy (``choose(default="auto")``); so do the benchmarks (``bench``);
- a user's ``OPENBLAS_CORETYPE`` always stands; if numpy was imported first, nothing can change any
  more: ``blas_kernel_info()`` (printed by the benchmarks) shows the kernels in use.

The choice is recorded on ``framework.runtime.state.RUNTIME``. This module imports nothing heavy: it
must run before numpy loads.
"""

from __future__ import annotations

import os
import sys

from framework.runtime.state import RUNTIME

ENV = "FRAMEWORK_BLAS_CORETYPE"
_NOT_ASKED = f"not asked ({ENV} unset): OpenBLAS's own choice"


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


def _record(coretype: str | None, why: str) -> None:
    RUNTIME.coretype, RUNTIME.coretype_why = coretype, why


def choose(default: str = "keep") -> None:
    """Set OPENBLAS_CORETYPE for the OpenBLAS about to load, as ``FRAMEWORK_BLAS_CORETYPE`` says, else as
    ``default`` says (``keep``: leave OpenBLAS alone; ``auto``; a core name); see the module doc. Acts
    once (a call that left OpenBLAS alone only because nothing asked lets a later ``default`` act)."""
    if RUNTIME.coretype_why not in ("not decided", _NOT_ASKED):
        return
    asked = os.environ.get(ENV, "").strip()
    setting = asked or default
    if os.environ.get("OPENBLAS_CORETYPE"):
        _record(os.environ["OPENBLAS_CORETYPE"], "OPENBLAS_CORETYPE set by the user")
    elif asked.lower() == "keep":
        _record(None, f"{ENV}=keep")
    elif "numpy" in sys.modules:
        _record(None, "numpy was imported before framework: OpenBLAS had already chosen")
    elif setting.lower() == "keep":
        _record(None, _NOT_ASKED)
    elif setting.lower() != "auto":
        os.environ["OPENBLAS_CORETYPE"] = setting
        _record(setting, f"{ENV}={setting}")
    else:
        core = preferred_coretype(*_cpu())
        if core is None:
            _record(None, "OpenBLAS's own choice suits this CPU")
        else:
            os.environ["OPENBLAS_CORETYPE"] = core
            _record(core, "AMD CPU with AVX-512: OpenBLAS's AVX2 kernels are faster on it")


def blas_kernel_info() -> dict:
    """What numpy's BLAS is and which kernels it runs (threadpoolctl), with the framework's choice."""
    info = {"chosen": RUNTIME.coretype, "why": RUNTIME.coretype_why}
    import numpy  # noqa: F401  (loads numpy's BLAS, to describe it; the choice above is made by now)

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
