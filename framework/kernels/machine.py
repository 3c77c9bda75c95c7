"""Where this machine's kernel data lives: the user cache folder (the tuned dispatch table, numba's
compiled kernels) and the key that tells one machine and library set from another.

The folder is ``$FRAMEWORK_CACHE_DIR`` if set, else ``$XDG_CACHE_HOME/framework``, else
``~/.cache/framework``: outside the package, so a read-only install still caches. Nothing here
imports numba or llvmlite (dispatch reads the key when conv_nchw is first imported).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import os
import platform
import re
from importlib import metadata
from pathlib import Path


def cache_dir() -> Path:
    """The user cache folder (not created here)."""
    forced = os.environ.get("FRAMEWORK_CACHE_DIR", "")
    if forced:
        return Path(forced)
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    base = Path(xdg) if xdg else Path.home() / ".cache"
    return base / "framework"


def cpu_model() -> str:
    """The CPU's model name and a digest of its feature flags (Linux's /proc/cpuinfo: a virtual
    machine may name every generation of a vendor's CPUs alike, their flags differ); elsewhere what
    ``platform`` reports."""
    name, flags = "", ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                key = line.split(":", 1)[0].strip().lower()
                if key in ("model name", "cpu model", "hardware") and not name:
                    name = line.split(":", 1)[1].strip()
                elif key in ("flags", "features") and not flags:
                    flags = " ".join(sorted(line.split(":", 1)[1].split()))
                if name and flags:
                    break
    except OSError:
        pass
    name = name or platform.processor() or platform.machine() or "unknown"
    return f"{name}-{hashlib.sha1(flags.encode()).hexdigest()[:8]}" if flags else name


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "none"


def machine_key() -> str:
    """``<cpu model>-<flags digest>-numba<version>-numpy<version>`` as a file-name-safe string: a tuned table is
    valid only for the CPU and the kernels' libraries it was measured with."""
    import numpy as np

    raw = f"{cpu_model()}-numba{_version('numba')}-numpy{np.__version__}"
    return re.sub(r"[^A-Za-z0-9._-]+", "_", raw).strip("_")[:200]


def numba_cache_dir() -> Path:
    """Where the compiled kernels are cached: ``<cache_dir>/numba`` (``$NUMBA_CACHE_DIR`` wins)."""
    return Path(os.environ.get("NUMBA_CACHE_DIR", "") or cache_dir() / "numba")


@contextlib.contextmanager
def numba_cache():
    """Inside the block, numba functions defined with ``cache=True`` cache in ``numba_cache_dir()``
    (numba fixes a function's cache folder when it is decorated; numba's own setting is restored
    after, so the host program's functions keep theirs). Where that folder cannot be written numba
    falls back to its own places."""
    from numba.core import config

    if os.environ.get("NUMBA_CACHE_DIR", ""):  # the user's choice, already numba's
        yield
        return
    old = config.CACHE_DIR
    config.CACHE_DIR = str(numba_cache_dir())
    try:
        yield
    finally:
        config.CACHE_DIR = old


def import_kernels(name: str):
    """``framework.kernels.<name>``, a module of numba kernels, imported under ``numba_cache()`` so they cache in
    the user cache folder; None where compiled kernels may not run (numba not importable, ``FRAMEWORK_NO_JIT``)."""
    if os.environ.get("FRAMEWORK_NO_JIT", "") not in ("", "0"):
        return None
    try:
        with numba_cache():
            return importlib.import_module(f"framework.kernels.{name}")
    except ImportError:
        return None
