"""How many threads BLAS (numpy's OpenBLAS/MKL) uses when the framework runs nets.

Measured on this project's machines: the GEMMs of typical nets run faster on one BLAS thread, and
several BLAS threads collapse (15-30x slower) when the cores are shared with other work. So the
framework caps BLAS at one thread the first time it creates a net, from Python as from the CLI,
unless the user chose: ``OPENBLAS_NUM_THREADS``/``OMP_NUM_THREADS``/``MKL_NUM_THREADS`` set in the
environment, ``FRAMEWORK_BLAS_THREADS=N``, or ``framework.set_blas_threads(n)`` (None: leave BLAS as
it is). The ``dag`` executor still divides the cores between its workers (cores // workers each).
"""

from __future__ import annotations

import os

_ENV = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
_state = {"decided": False}


def set_blas_threads(n: int | None) -> None:
    """Use ``n`` BLAS threads from now on (None: do not touch BLAS's own setting)."""
    _state["decided"] = True
    if n is not None:
        _limit(max(1, int(n)))


def default_blas_threads() -> int | None:
    """The thread count the framework applies by itself: FRAMEWORK_BLAS_THREADS, else None when the user
    set a BLAS variable (theirs stands), else 1."""
    env = os.environ.get("FRAMEWORK_BLAS_THREADS", "")
    if env.isdigit():
        return int(env)
    if any(os.environ.get(v) for v in _ENV):
        return None
    return 1


def ensure_blas_threads() -> None:
    """Apply the default once (called when the first net is created); a user's choice always wins."""
    if not _state["decided"]:
        set_blas_threads(default_blas_threads())


def _limit(n: int) -> None:
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - a core dependency
        return
    threadpool_limits(n, user_api="blas")
