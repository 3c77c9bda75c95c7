"""The process state of the framework, in one object: ``RUNTIME``.

Everything the framework decides for the whole process lives here, and ``RUNTIME.reset()`` puts it
back as a fresh import has it (tests call it):

- the intra-op thread count and its pools (``framework.runtime.parallel``);
- the BLAS thread count applied while a net runs (``framework.runtime.blas``) and a record of each
  application and restore;
- the OpenBLAS kernel choice (``framework.runtime.blas_kernel``);
- the handle on the process's BLAS libraries (threadpoolctl), found once;
- every other process-wide cache or setting of the framework (compiled kernels and nets, the kernel
  feature set, memoized tables, argument warnings given, the allocator and its limit, the CLI's write
  policy), each a holder made by ``RUNTIME.held(name, make)``.

Registries (filled when their module loads, read-only after) and the state Caffe2's own Python API keeps
globally (the current workspace, name scopes, net-builder stacks) are not here: see "Process state" in
``docs/architecture.md`` and the inventory in ``tests/architecture/test_process_state.py``.

Importing the framework changes nothing about the host process: BLAS threads are set when a net
starts running and restored when it stops (``blas_scope``), and OpenBLAS's kernels are chosen only
where the framework owns the process (see ``framework.runtime.blas_kernel``).

This module imports nothing heavy (no numpy): the CLI reads it before numpy loads.
"""

from __future__ import annotations

import threading
from typing import Any, Callable


class Runtime:
    """See the module doc; one instance, ``RUNTIME``."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.pools: dict[int, Any] = {}  # intra-op pools by size, kept so workers keep their identities
        self._held: dict[str, tuple[Any, Callable[[], Any]]] = {}  # name -> (holder, its maker)
        # makes the pools (parallel.set_pool_maker; None: ThreadPoolExecutor): handed down, kept by reset()
        self.pool_maker: Callable[[int], Any] | None = None
        self.reset()

    def held(self, name: str, make: Callable[[], Any]) -> Any:
        """The process-wide holder called ``name``: a dict, set, list or other container with ``clear``, or a
        settings object (its attributes in ``__dict__``, e.g. a dataclass instance).

        The first call makes it with ``make()``; later calls return the same object, so a module keeps it in a
        module-level name. ``reset()`` refills it in place with a fresh ``make()`` (a cache empties, a setting
        takes its default again), so every reference to it sees the reset. Names are dotted, after the
        owning module (``"kernels.window_jit.called"``).
        """
        with self._lock:
            entry = self._held.get(name)
            if entry is None:
                holder = make()
                if not hasattr(holder, "clear") and not hasattr(holder, "__dict__"):
                    raise TypeError(f"RUNTIME.held({name!r}): {type(holder).__name__} cannot be refilled in place")
                entry = self._held[name] = (holder, make)
            return entry[0]

    def held_names(self) -> list[str]:
        """The names of the holders made so far."""
        return sorted(self._held)

    def reset(self) -> None:
        """Forget every decision (pools are shut down): the state of a fresh import."""
        for pool in self.pools.values():
            pool.shutdown(wait=True)
        self.pools = {}
        for holder, make in list(self._held.values()):
            _refill(holder, make())
        self.threads: int | None = None  # intra-op threads; None: FRAMEWORK_NUM_THREADS or 1 on first use
        self.pool: Any = None  # the pool of the current thread count (None: one thread)
        self.blas_threads: int | None = None  # BLAS threads while a net runs (None: leave BLAS alone)
        self.blas_decided = False  # a caller chose blas_threads (else the default is taken at the first run)
        self.blas_log: list[tuple[str, int, int]] = []  # ("apply" | "restore", before, after), last _LOG_KEEP
        self.coretype: str | None = None  # the OpenBLAS kernels the framework asked for
        self.coretype_why = "not decided"
        self._blas_libs: Any = None  # threadpoolctl lib controllers of the BLAS libraries (False: none)
        self._depth = 0  # net runs in progress (nested or concurrent): BLAS is set by the first, restored by the last
        self._restore: list[tuple[Any, int]] = []
        # Caffe2's --caffe2_operator_throw_if_fp_exceptions: an op dividing by zero, overflowing or making an
        # invalid value (NaN from non-NaN) fails instead of producing inf/NaN (framework.net.base.fp_checks)
        self.fp_exceptions = False

    # -- BLAS threads per net run ----------------------------------------------------------------
    def blas_libs(self) -> Any:
        """The BLAS libraries loaded now (threadpoolctl controllers), looked up once; () without any."""
        libs = self._blas_libs
        if libs is None:
            try:
                from threadpoolctl import ThreadpoolController

                libs = tuple(ThreadpoolController().select(user_api="blas").lib_controllers)
            except Exception:  # threadpoolctl missing or unusable: nothing to set
                libs = ()
            self._blas_libs = libs
        return libs

    def run_blas_threads(self) -> int | None:
        """The BLAS thread count a net run applies (taking the default at the first run)."""
        if not self.blas_decided:
            from framework.runtime.blas import default_blas_threads

            self.blas_threads, self.blas_decided = default_blas_threads(), True
        return self.blas_threads

    def enter_net(self) -> None:
        """A net starts running: the first of those in progress sets BLAS to ``run_blas_threads()``."""
        if self.blas_decided and self.blas_threads is None:
            return  # BLAS left alone: nothing to count either
        with self._lock:
            self._depth += 1
            if self._depth > 1:
                return
            n = self.run_blas_threads()
            if n is None:
                return
            for lib in self.blas_libs():
                before = lib.get_num_threads()
                if before != n:
                    lib.set_num_threads(n)
                    self._restore.append((lib, before))
                    self._log("apply", before, n)

    def exit_net(self) -> None:
        """A net stops running: the last of those in progress puts BLAS back as it found it."""
        if self._depth == 0:
            return  # enter_net left BLAS alone
        with self._lock:
            self._depth -= 1
            if self._depth > 0 or not self._restore:
                return
            for lib, before in self._restore:
                lib.set_num_threads(before)
                self._log("restore", self.blas_threads, before)
            self._restore = []

    def _log(self, what: str, before: int, after: int) -> None:
        log = self.blas_log
        log.append((what, before, after))
        if len(log) > _LOG_KEEP:
            del log[: len(log) - _LOG_KEEP]


def _refill(holder: Any, fresh: Any) -> None:
    """Give ``holder`` the contents of ``fresh`` (same kind), keeping its identity."""
    if isinstance(holder, list):
        holder[:] = fresh
        return
    if not hasattr(holder, "clear"):  # a settings object
        holder.__dict__.clear()
        holder.__dict__.update(fresh.__dict__)
        return
    holder.clear()
    if fresh:
        holder.update(fresh)


_LOG_KEEP = 16

RUNTIME = Runtime()
