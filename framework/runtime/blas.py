"""How many threads BLAS (numpy's OpenBLAS/MKL) uses while the framework runs nets.

Measured on this project's machines: the GEMMs of typical nets run faster on one BLAS thread, and
several BLAS threads collapse when the cores are shared with other work. So a net run
sets BLAS to one thread and puts back what it found when it stops (``framework.runtime.state``:
``Runtime.enter_net`` / ``exit_net``); the process's own setting is never changed between runs. The
count applied is the user's choice where there is one: ``OPENBLAS_NUM_THREADS``/``OMP_NUM_THREADS``/
``MKL_NUM_THREADS`` set in the environment (BLAS is then left alone), ``FRAMEWORK_BLAS_THREADS=N``, or
``framework.set_blas_threads(n)`` (None: leave BLAS as it is). The ``dag`` executor still divides the
cores between its workers (cores // workers each) inside a run.
"""

from __future__ import annotations

import os

from framework.runtime.state import RUNTIME

_ENV = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def set_blas_threads(n: int | None) -> None:
    """Use ``n`` BLAS threads while nets run from now on (None: do not touch BLAS's own setting)."""
    RUNTIME.blas_threads = None if n is None else max(1, int(n))
    RUNTIME.blas_decided = True


def default_blas_threads() -> int | None:
    """The thread count the framework applies by itself: FRAMEWORK_BLAS_THREADS, else None when the user
    set a BLAS variable (theirs stands), else 1."""
    env = os.environ.get("FRAMEWORK_BLAS_THREADS", "")
    if env.isdigit():
        return int(env)
    if any(os.environ.get(v) for v in _ENV):
        return None
    return 1
