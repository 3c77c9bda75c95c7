"""Intra-op threads: a small pool the heavy kernels (conv, big elementwise and pooling passes) split
their work over, coordinated with BLAS so the two never oversubscribe the cores.

numpy's ufuncs and BLAS calls release the GIL, so Python threads that each run numpy on their own
slice of a tensor (images, or output channels) run in parallel. The framework then keeps BLAS itself
at one thread per worker: ``set_num_threads(n)`` starts ``n - 1`` pool threads (the caller's thread
is the n-th worker; a count set before gets its pool back) and makes net runs set BLAS to one thread
(``framework.runtime.state``: while a net runs, restored after). Measured on
this project's 2-core machines: BLAS's own threads collapse when the cores are shared, while splitting
over images degrades gracefully.

    framework.set_num_threads(2)   # or FRAMEWORK_NUM_THREADS=2, or `framework run --threads 2`
    framework.get_num_threads()    # -> 2

The pool threads are the kernels layer's (``framework.kernels.native_pool``, handed down by the package root
through ``set_pool_maker``): they wait for work spinning for a while instead of sleeping at once, and also
run compiled jobs that need no GIL; without numba they are a ThreadPoolExecutor's.

Kernels call ``num_threads()`` when they prepare (to size per-worker scratch buffers) and
``run_parallel(tasks)`` to run a list of zero-argument callables, the first on the calling thread;
``work_split(n, work)`` says whether (and how) an op's ``n`` rows are worth splitting.
A kernel prepared for k workers keeps working if the setting changes later (it re-prepares when it
sees a different count). Tasks must touch disjoint outputs; exceptions propagate to the caller.
"""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING, Callable, Sequence

from framework.runtime.state import RUNTIME

if TYPE_CHECKING:
    from concurrent.futures import ThreadPoolExecutor

# The thread count and its pools are RUNTIME's. Pools are kept by size: going back to a thread count
# reuses its pool, so its workers keep their thread identities (kernels bind per-thread scratch and
# replayed calls to them) and no threads are respawned.
_lock = threading.Lock()
_local = threading.local()  # .inside: this thread runs a task of run_parallel (nested work is serial)


def _default() -> int:
    env = os.environ.get("FRAMEWORK_NUM_THREADS", "")
    return max(1, int(env)) if env.isdigit() else 1


def set_num_threads(n: int) -> None:
    """Use ``n`` intra-op threads (n >= 1); net runs set BLAS to one thread per worker."""
    n = int(n)
    if n < 1:
        raise ValueError(f"set_num_threads: need at least 1 thread, got {n}")
    from framework.runtime.blas import set_blas_threads

    if n == RUNTIME.threads:
        return
    with _lock:
        RUNTIME.threads = n
        pool = None
        if n > 1:
            pool = RUNTIME.pools.get(n)
            if pool is None:
                made = RUNTIME.pool_maker(n - 1) if RUNTIME.pool_maker is not None else None
                if made is None:
                    from concurrent.futures import ThreadPoolExecutor  # (on first use: `import framework` stays light)

                    made = ThreadPoolExecutor(n - 1, thread_name_prefix="framework-op")
                pool = made
                RUNTIME.pools[n] = pool
        RUNTIME.pool = pool
    set_blas_threads(1)


def get_num_threads() -> int:
    """The intra-op thread count (FRAMEWORK_NUM_THREADS or 1 until set); 1 inside a parallel task."""
    if getattr(_local, "inside", False):
        return 1
    n = RUNTIME.threads
    return n if n is not None else _default()


def num_threads() -> int:
    """What kernels use: the thread count, starting the pool on first use if the env asked for more
    (1 inside a task of run_parallel: work is never nested)."""
    if getattr(_local, "inside", False):
        return 1
    n = RUNTIME.threads
    if n is None:
        n = _default()
        if n > 1:
            set_num_threads(n)
        else:
            RUNTIME.threads = 1
    return n


def set_pool_maker(make: Callable[[int], object] | None) -> None:
    """Pools of ``k`` worker threads come from ``make(k)`` (None from it: a ThreadPoolExecutor). The package
    root hands down the kernels layer's pool (framework.kernels.native_pool: workers that wait spinning, and
    also run compiled jobs), as the net layer hands down its services; the pools made so far stay."""
    RUNTIME.pool_maker = make


def run_parallel(tasks: Sequence[Callable[[], object]], steal: bool = False) -> None:
    """Run ``tasks``: the first on this thread, the others on the pool; wait for all of them.

    ``steal``: the tasks may run on any thread (no per-thread scratch): this thread, done with the first,
    runs every task no pool thread has started yet, so a pool thread that the OS does not schedule (the
    cores busy with other processes) delays the call by nothing instead of by its wake-up."""
    pool = RUNTIME.pool
    if getattr(_local, "inside", False):  # nested: serial, and this thread is the caller of these tasks
        outer, _local.caller = _local.caller, threading.get_ident()
        try:
            for t in tasks:
                t()
        finally:
            _local.caller = outer
        return
    if pool is None or len(tasks) < 2:
        for t in tasks:
            t()
        return
    caller = threading.get_ident()
    if hasattr(pool, "run_python"):  # the kernels' pool (handed down: set_pool_maker)
        pool.run_python(tasks, steal, lambda t: _task(t, caller))
        return
    if steal:
        _run_stealing(pool, tasks, caller)
        return
    futures = [pool.submit(_task, t, caller) for t in tasks[1:]]
    err = None
    try:
        _task(tasks[0], caller)
    except BaseException as e:  # still wait for the others: they write the same outputs
        err = e
    for f in futures:
        try:
            f.result()
        except BaseException as e:
            err = err or e
    if err is not None:
        raise err


def _run_stealing(pool: ThreadPoolExecutor, tasks: Sequence[Callable[[], object]], caller: int) -> None:
    pending = list(range(len(tasks) - 1, 0, -1))  # list.pop is atomic: each index is taken once
    started: list[threading.Event] = []  # one per pool job, appended before it tries to take a task
    errors: list[BaseException] = []

    def job() -> None:
        done = threading.Event()
        started.append(done)
        try:
            k = pending.pop()
        except IndexError:  # this thread took them all
            done.set()
            return
        try:
            _task(tasks[k], caller)
        except BaseException as e:
            errors.append(e)
        finally:
            done.set()

    for _ in range(len(tasks) - 1):
        pool.submit(job)
    err = None
    try:
        _task(tasks[0], caller)
        while True:
            try:
                k = pending.pop()
            except IndexError:
                break
            _task(tasks[k], caller)
    except BaseException as e:  # still wait for the started tasks: they write the same outputs
        err = e
        pending.clear()
    for done in list(started):  # a job appended after this found nothing left to take
        done.wait()
    err = err or (errors[0] if errors else None)
    if err is not None:
        raise err


def _task(fn: Callable[[], object], caller: int) -> None:
    _local.inside, _local.caller = True, caller
    try:
        fn()
    finally:
        _local.inside = False


def caller_ident() -> int:
    """The thread whose run_parallel call runs this task (this thread outside a task, and for tasks it runs
    serially inside one). Scratch keyed by it and the task's index is one buffer per (caller, task) whichever
    thread runs or steals the task, and apart between calls made on different threads."""
    if getattr(_local, "inside", False):
        return _local.caller
    return threading.get_ident()


# Below this much work (elements of an elementwise pass, or multiply-adds of a GEMM divided by 16) a split
# costs more than it saves: waking a pool thread and waiting for it takes tens of microseconds.
SPLIT_MIN_WORK = 1 << 17


def work_split(n: int, work: float, min_work: float | None = None) -> list[tuple[int, int]] | None:
    """``n`` rows in one contiguous range per intra-op thread (``split``) when several threads run, there
    are at least two rows and ``work`` reaches ``min_work`` (default SPLIT_MIN_WORK, read at each call);
    None when the work should run as one call."""
    if work < (SPLIT_MIN_WORK if min_work is None else min_work) or n < 2:
        return None
    threads = get_num_threads()
    return split(n, threads) if threads > 1 else None


def split(n: int, parts: int) -> list[tuple[int, int]]:
    """``n`` items in at most ``parts`` contiguous, non-empty (start, stop) ranges of near-equal size."""
    parts = max(1, min(parts, n))
    q, r = divmod(n, parts)
    out, start = [], 0
    for k in range(parts):
        stop = start + q + (k < r)
        out.append((start, stop))
        start = stop
    return out
