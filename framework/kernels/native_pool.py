"""Compiled tasks over the intra-op threads, handed out and awaited without the GIL.

``runtime.parallel.run_parallel`` runs Python callables on a thread pool: each split costs a wake-up of a
sleeping pool thread and two handovers of the GIL (the worker needs it to start its callable, the caller to
go on). On a virtual machine each costs tens of microseconds (the host must wake the idle virtual core):
measured here, 60-110 us per split, as much as a small op's whole work, so a training step of ~200 splits
lost 15-20 ms of ~100. This pool is what OpenMP does instead: its workers wait for work spinning in compiled
code for a while (``SPIN_US``) before they sleep, and a job is a C function called with an argument block
and a task index, so neither side takes the GIL between posting a job and its end. A split costs a few
microseconds.

A kernel that splits this way has a numba ``cfunc`` of signature ``void(int64 block, int64 index)`` reading
its arrays and sizes from an int64 argument block (``Block``) and running task ``index``; it calls

    native_pool.run(task.address, block, n)

which runs the ``n`` tasks on this thread and the pool's workers (any task on any thread: the caller runs
whatever no worker has claimed) and returns when all are done. Without a pool (one thread, numba missing),
or while another thread's job holds it, the tasks run here one after another. Tasks must not raise (compiled
loops over arrays the wrapper checked) and must write disjoint outputs.

The protocol is in native_pool_kernels.py: a job word claimed by compare-and-swap, a done count, and a sleep
flag per worker read crosswise with the job word (sequentially consistent), so a worker that gives up
spinning is either seen asleep and woken, or sees the new job itself.
"""

from __future__ import annotations

import collections
import concurrent.futures
import os
import threading
import time
import warnings
from typing import Callable, Sequence

import numpy as np

from framework.kernels import machine, window_jit
from framework.runtime.parallel import get_num_threads
from framework.runtime.state import RUNTIME

# How long a worker polls for the next job before it sleeps (FRAMEWORK_SPIN_US sets it). Most gaps between a
# training step's splits are shorter, so its workers stay awake through them; a long serial stretch (an LSTM's
# recurrent steps) sleeps them, since a core polling beside it slowed the serial work on this project's VMs
# (the LM's recurrent op 21 -> 28 ms with 2 ms of polling). Whole steps measured the same from 200 to 2000 us.
SPIN_US = 300.0
_UNSET = object()
_kernels = _UNSET
_NO_TASK: set = RUNTIME.held("kernels.native_pool.no_task", set)  # kernels whose task function did not compile


def _module():
    global _kernels
    if _kernels is _UNSET:
        _kernels = machine.import_kernels("native_pool_kernels") if window_jit.available() else None
    return _kernels


def available() -> bool:
    """Whether native tasks can run here (numba imports and compiled kernels are allowed)."""
    return _module() is not None


def compiled_task(name: str, make):
    """``make()``: a kernel's compiled task function (compiled or loaded on first use); None where it does not
    compile, and from then on for ``name`` (one RuntimeWarning naming it): that kernel's splits then run without
    native jobs."""
    if name in _NO_TASK:
        return None
    try:
        return make()
    except Exception as exc:  # numba's compile errors have no common base
        _NO_TASK.add(name)
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        warnings.warn(
            f"{name}: its native task did not compile, its splits run without native jobs: "
            f"{type(exc).__name__}: {first}",
            RuntimeWarning,
            stacklevel=2,
        )
        return None


class Pool:
    """``workers`` threads waiting for jobs: native jobs (``run``), the Python callables of
    ``runtime.parallel.run_parallel`` (``run_python``) and single callables (``submit``). One job at a time:
    a caller that finds the pool ``busy`` (another thread's job) runs its tasks itself."""

    def __init__(self, workers: int) -> None:
        mod = _module()
        self.mod = mod
        self.ctrl = np.zeros(mod.FIELDS + workers, np.int64)
        self.busy = threading.Lock()
        self._events = [threading.Event() for _ in range(workers)]
        self._python: _PythonJob | None = None
        self.ran_here = 0
        self._queue: collections.deque = collections.deque()  # (future, callable) of submit
        mod.spin(self.ctrl, 10)
        t0 = time.perf_counter()
        mod.spin(self.ctrl, 20000)
        per_poll = max((time.perf_counter() - t0) / 20000, 1e-9)
        spin_us = float(os.environ.get("FRAMEWORK_SPIN_US", SPIN_US))
        self.spins = max(1, int(spin_us * 1e-6 / per_poll))
        self._threads = [
            threading.Thread(target=self._work, args=(k,), name=f"framework-op-{k}", daemon=True)
            for k in range(workers)
        ]
        for t in self._threads:
            t.start()

    def _work(self, k: int) -> None:
        seen, event = 0, self._events[k]
        while True:
            event.clear()
            r = self.mod.work_loop(self.ctrl, k, seen, self.spins)
            if r == -1:
                return
            self._drain()
            if r < -1:  # a Python job: help with it, then wait for the next
                seen = -2 - r
                job = self._python
                if job is not None and job.number == seen:
                    job.help()
                job = None  # hold nothing of a finished job while waiting (its tasks' operands free on time)
                continue
            seen = r
            event.wait()

    def _drain(self) -> None:
        while True:
            try:
                future, fn = self._queue.popleft()
            except IndexError:
                return
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(fn())
                except BaseException as e:
                    future.set_exception(e)
            future = fn = None

    def _post(self, fn: int, block: int, n: int) -> None:
        """Publish a job (waking the workers asleep)."""
        asleep = self.mod.post(self.ctrl, fn, block, n)
        if asleep:
            for k, event in enumerate(self._events):
                if asleep >> k & 1:
                    event.set()

    def run(self, fn: int, block: np.ndarray, n: int) -> None:
        """A native job (the caller holds ``busy``)."""
        mod, ctrl = self.mod, self.ctrl
        self._post(fn, block.ctypes.data, n)
        ran = mod.work_and_wait(ctrl, n, self.spins)
        if ran < 0:
            ran = -1 - ran
            while not mod.wait(ctrl, n, self.spins):  # a worker still runs its task: let others have the core
                time.sleep(0)
        self.ran_here = ran  # tasks of the last job this thread ran (the workers ran the others)

    def run_python(self, tasks: Sequence[Callable[[], object]], steal: bool, wrap: Callable) -> None:
        """``wrap(task)`` for each of ``tasks``: the first on this thread, the others on the workers (and on
        this thread too, when ``steal``, those no worker has started); errors reach the caller."""
        if not self.busy.acquire(blocking=False):
            for t in tasks:
                wrap(t)
            return
        try:
            job = _PythonJob(tasks, wrap)
            # its number before it is posted: a worker that sees the job checks it (the posting thread holds busy)
            job.number = ((int(self.ctrl[self.mod.CLAIM]) >> 40) + 1) & self.mod.MAX_JOB
            self._python = job
            self._post(0, 0, 0)
            job.run_here(steal)
        finally:
            self._python = None
            self.busy.release()

    def submit(self, fn: Callable[[], object]) -> concurrent.futures.Future:
        """``fn()`` on a worker (as ThreadPoolExecutor.submit)."""
        future: concurrent.futures.Future = concurrent.futures.Future()
        self._queue.append((future, fn))
        with self.busy:
            self._post(0, 0, 0)
        return future

    def shutdown(self, wait: bool = True) -> None:
        self.ctrl[self.mod.STOP] = 1
        for event in self._events:
            event.set()
        if wait:
            for t in self._threads:
                t.join()


class _PythonJob:
    """The tasks of one run_python call: taken by index (list.pop is atomic), counted down as they end."""

    def __init__(self, tasks: Sequence[Callable[[], object]], wrap: Callable) -> None:
        self.tasks, self.wrap, self.number = tasks, wrap, -1
        self.pending = list(range(len(tasks) - 1, 0, -1))
        self.left = len(tasks) - 1  # tasks after the first not yet ended
        self.lock = threading.Lock()
        self.ended = threading.Event()
        self.errors: list[BaseException] = []

    def _take_and_run(self) -> bool:
        try:
            k = self.pending.pop()
        except IndexError:
            return False
        try:
            self.wrap(self.tasks[k])
        except BaseException as e:
            self.errors.append(e)
        finally:
            self._end(1)
        return True

    def _end(self, count: int) -> None:
        with self.lock:
            self.left -= count
            if self.left == 0:
                self.ended.set()

    def help(self) -> None:
        while self._take_and_run():
            pass

    def run_here(self, steal: bool) -> None:
        err = None
        try:
            self.wrap(self.tasks[0])
            while steal and self._take_and_run():
                pass
        except BaseException as e:  # still wait for the started tasks: they write the same outputs
            err = e
            dropped, self.pending = len(self.pending), []
            if dropped:
                self._end(dropped)
        if self.left > 0:
            self.ended.wait()
        err = err or (self.errors[0] if self.errors else None)
        if err is not None:
            raise err


def make(workers: int) -> Pool | None:
    """A pool of ``workers`` threads; None where native jobs cannot run (runtime.parallel then keeps a
    ThreadPoolExecutor): numba missing or disabled, or its loops failing to compile (a RuntimeWarning says why)."""
    if _module() is None:
        return None
    try:
        return Pool(workers)
    except Exception as exc:  # numba's compile errors have no common base
        warnings.warn(
            f"native_pool: the pool's loops did not compile, Python threads run the splits: {exc}",
            RuntimeWarning,
            stacklevel=2,
        )
        return None


def run(fn: int, block: np.ndarray, n: int) -> None:
    """Tasks 0..n-1 of the task function at address ``fn`` with argument block ``block``, over the intra-op
    threads (here alone with one thread, inside a task of run_parallel, or while another thread's job holds
    the pool)."""
    if n < 1:
        return
    pool = RUNTIME.pool
    if n > 1 and isinstance(pool, Pool) and get_num_threads() > 1 and pool.busy.acquire(blocking=False):
        try:
            pool.run(fn, block, n)
        finally:
            pool.busy.release()
        return
    _module().run_here(fn, block.ctypes.data, n)


class Block:
    """An int64 argument block: slots for arrays (address and shape) and integers, filled by the kernel's
    wrapper before each ``run`` and read by its task function with native_pool_kernels' ``f32``/``i64``
    helpers."""

    def __init__(self, size: int) -> None:
        self.data = np.zeros(size + 1, np.int64)
        self.data[0] = size + 1

    def array(self, at: int, a: np.ndarray, dims: int | None = None) -> None:
        """Slot ``at``: ``a``'s address, then its shape, padded in front with 1s to ``dims`` sizes (``a``
        C-contiguous, kept alive by the caller)."""
        _module().put(self.data, at, a, a.ndim if dims is None else dims)


class CallJob:
    """A native job whose task k makes one recorded kernel call (``calls[k]``: its argument list) through the
    kernel's task function (``address``), which reads the arguments from the block as ``layout`` says:
    ``"int"``, or (dtype code, ndim) for a C-contiguous array. The block holds an offset per task after its
    length, then each task's arguments in order (an array as its address and sizes). ``slot(k, i)`` is where
    task k's argument i went: a caller puts the next run's operands there (``Block.array``)."""

    def __init__(self, address: int, block: Block, slots: list[list[int]]) -> None:
        self.address, self.block, self._slots = address, block, slots

    @classmethod
    def of(cls, address: int, layout: tuple, calls: list[list]) -> CallJob | None:
        """The job, or None when an argument does not fit ``layout`` (another type or rank, not contiguous)."""
        width = sum(1 if kind == "int" else 1 + kind[1] for kind in layout)
        block = Block(len(calls) * (1 + width))
        d, at, slots = block.data, 1 + len(calls), []
        for k, args in enumerate(calls):
            if len(args) != len(layout):
                return None
            d[1 + k] = at
            placed = []
            for a, kind in zip(args, layout):
                placed.append(at)
                if kind == "int":
                    if not isinstance(a, (int, np.integer)):
                        return None
                    d[at] = int(a)
                    at += 1
                    continue
                code, ndim = kind
                if not (
                    isinstance(a, np.ndarray) and a.dtype.str[1:] == code and a.ndim == ndim and a.flags.c_contiguous
                ):
                    return None
                block.array(at, a)
                at += 1 + ndim
            slots.append(placed)
        return cls(address, block, slots)

    def slot(self, k: int, i: int) -> int:
        return self._slots[k][i]

    def run(self) -> None:
        run(self.address, self.block.data, len(self._slots))


def run_calls(name: str, make, calls: list[list]) -> bool:
    """Each of ``calls`` (argument lists of one kernel) as a task of one native job through the task function
    ``make()`` returns ((task, layout): a kernel module's ``native_task``; ``compiled_task`` keeps it as ``name``);
    False (nothing run) without it or where an argument does not fit its layout."""
    got = compiled_task(name, make)
    if got is None:
        return False
    task, layout = got
    job = CallJob.of(task.address, layout, calls)
    if job is None:
        return False
    job.run()
    return True
