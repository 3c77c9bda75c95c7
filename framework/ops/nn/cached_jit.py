"""``njit`` for the compiled kernels: a kernel found in numba's on-disk cache loads without numba's compiler.

numba's cache, before it loads a cached overload, refreshes the target context: it starts numba's
runtime (NRT) and imports and installs every lowering registry numba has (its numpy, math, random,
linear-algebra implementations; the linear-algebra one imports ``scipy.linalg`` to find BLAS). A
compile needs all of it; a cached kernel needs the runtime only: its machine code is deserialized by
the code generator, the C helpers it calls were mapped when the target context was created, and what it
calls of numba's was compiled into it. So the kernels' cache starts the runtime and loads (the process's
first kernel call costs the load alone); a cache miss compiles through numba's usual path, which
refreshes the context first.

Where numba's cache or runtime lack the methods this relies on (another numba version), kernels keep
numba's own cache: slower to load, the same code.
"""

from __future__ import annotations

from typing import Any, Callable

import numba
from numba.core.caching import FunctionCache
from numba.core.runtime import rtsys

__all__ = ["njit"]


class _LoadingCache(FunctionCache):
    """numba's function cache, loading without the target-context refresh (see module doc)."""

    def load_overload(self, sig: Any, target_context: Any) -> Any:
        rtsys.initialize(target_context)
        with self._guard_against_spurious_io_errors():
            return self._load_overload(sig, target_context)
        return None  # (the guard swallowed a spurious I/O error: a miss, compiled as usual)


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
