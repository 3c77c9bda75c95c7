"""``njit`` for the compiled kernels: a kernel found in numba's on-disk cache loads without numba's compiler.

numba's cache, before it loads a cached overload, refreshes the target context: it starts numba's
runtime (NRT) and imports and installs every lowering registry numba has (its numpy, math, random,
linear-algebra implementations; the linear-algebra one imports ``scipy.linalg`` to find BLAS). A
compile needs all of it; a cached kernel needs the runtime only: its machine code is deserialized by
the code generator, the C helpers it calls were mapped when the target context was created, and what it
calls of numba's was compiled into it. So the kernels' cache starts the runtime and loads (the process's
first kernel call costs the load alone); a cache miss compiles through numba's usual path, which
refreshes the context first.

A cache miss takes the kernel's compile lock (a file lock beside numba's index) before it compiles, and
looks in the cache again once it has it: processes starting together (test workers, MPI ranks) compile
each kernel once, and the others load what the first saved. The lock is released when the kernel is
saved; a process that waits longer than ``LOCK_WAIT`` seconds (a holder whose compile failed keeps the
lock until it exits) compiles without it.

A cached kernel is reused only while its own source file and every module of this package are unchanged:
numba stamps a cache entry with the defining file alone, but the kernels build their code from helpers in
other modules (``simd_ir``'s intrinsics, shared loops), so an edit or an upgrade there must recompile them.

Where numba's cache or runtime lack the methods this relies on (another numba version), kernels keep
numba's own cache: slower to load, the same code.
"""

from __future__ import annotations

import os
import time
from typing import Any, Callable

import numba
from numba.core.caching import FunctionCache
from numba.core.runtime import rtsys

from framework.runtime.state import RUNTIME

try:
    import fcntl
except ImportError:  # no POSIX file locks (Windows): each process compiles its own misses
    fcntl = None

__all__ = ["cfunc", "njit"]

LOCK_WAIT = 120.0  # seconds a process waits for another's compile of the same kernel


def package_stamp() -> tuple:
    """(name, mtime_ns, size) of every module of this package, sorted: the part of a kernel's cache stamp
    that numba leaves out (see module doc). Read once per process."""
    if not _STAMP:
        folder = os.path.dirname(os.path.abspath(__file__))
        rows = []
        for name in sorted(os.listdir(folder)):
            if name.endswith(".py"):
                st = os.stat(os.path.join(folder, name))
                rows.append((name, st.st_mtime_ns, st.st_size))
        _STAMP.append(tuple(rows))
    return _STAMP[0]


_STAMP: list = RUNTIME.held("kernels.package_stamp", list)  # package_stamp's value, once read


class _LoadingCache(FunctionCache):
    """numba's function cache, loading without the target-context refresh, compiling a miss under the
    kernel's compile lock, stamped with the package's modules too (see module doc)."""

    _lock_fd: int | None = None

    def __init__(self, py_func: Any) -> None:
        super().__init__(py_func)
        cache_file = getattr(self, "_cache_file", None)
        if hasattr(cache_file, "_source_stamp"):  # numba's index compares this with the stamp it saved
            cache_file._source_stamp = (cache_file._source_stamp, package_stamp())

    def load_overload(self, sig: Any, target_context: Any) -> Any:
        rtsys.initialize(target_context)
        found = self._load(sig, target_context)
        if found is None and self._lock_fd is None and self._acquire_lock():
            found = self._load(sig, target_context)  # saved by the process this one waited for
            if found is not None:
                self._release_lock()
        return found  # None: numba compiles, then save_overload releases the lock

    def save_overload(self, sig: Any, data: Any) -> None:
        try:
            super().save_overload(sig, data)
        finally:
            self._release_lock()

    def _load(self, sig: Any, target_context: Any) -> Any:
        with self._guard_against_spurious_io_errors():
            return self._load_overload(sig, target_context)
        return None  # (the guard swallowed a spurious I/O error: a miss, compiled as usual)

    def _acquire_lock(self) -> bool:
        index = getattr(getattr(self, "_cache_file", None), "_index_path", None)  # numba's <kernel>.nbi
        if fcntl is None or index is None:
            return False
        try:
            os.makedirs(os.path.dirname(index), exist_ok=True)
            fd = os.open(index + ".lock", os.O_RDWR | os.O_CREAT, 0o644)
        except OSError:  # a cache folder this process cannot write: numba compiles without saving anyway
            return False
        deadline = time.monotonic() + LOCK_WAIT
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                self._lock_fd = fd
                return True
            except OSError:
                if time.monotonic() > deadline:
                    os.close(fd)
                    return False
                time.sleep(0.05)

    def _release_lock(self) -> None:
        fd, self._lock_fd = self._lock_fd, None
        if fd is not None:
            os.close(fd)  # closing the descriptor releases its flock


_SUPPORTED = hasattr(rtsys, "initialize") and all(
    hasattr(FunctionCache, m) for m in ("_guard_against_spurious_io_errors", "_load_overload")
)


def njit(**options: Any) -> Callable[[Callable], Any]:
    """``numba.njit(**options)`` whose dispatchers, when ``options['cache']`` is true, use the loading
    cache above (the same folder and index files as numba's: the cache is built where the function is
    decorated, as numba builds its own)."""
    decorate = numba.njit(**options)

    def wrap(fn: Callable) -> Any:
        dispatcher = decorate(fn)
        if _SUPPORTED and type(getattr(dispatcher, "_cache", None)) is FunctionCache:
            dispatcher._cache = _LoadingCache(dispatcher.py_func)
        return dispatcher

    return wrap


def cfunc(sig: Any, cache: bool = False, **options: Any) -> Callable[[Callable], Any]:
    """``numba.cfunc(sig, cache=cache, **options)`` (compiled when decorated) caching with the loading cache
    above, so a C callback is rebuilt when the package's modules change, as a kernel is."""
    from numba.core import ccallback, sigutils

    signature = sigutils.normalize_signature(sig)

    def wrap(fn: Callable) -> Any:
        callback = ccallback.CFunc(fn, signature, locals={}, options=options)
        if cache:
            callback._cache = _LoadingCache(fn) if _SUPPORTED else FunctionCache(fn)
        callback.compile()
        return callback

    return wrap
