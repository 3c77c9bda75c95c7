"""CPU allocator and memory reporter.

Every tensor buffer comes from the current CPU allocator, which hands out
64-byte aligned numpy byte buffers (a uint8 array over-allocated and offset)
and reports each allocation and free to the MemoryReporter. The reporter is
how tests and benchmarks prove that a steady-state net run allocates nothing.

>>> before = memory_reporter().allocations
>>> buf = get_cpu_allocator().allocate(100)
>>> memory_reporter().allocations - before
1
"""

from __future__ import annotations

import collections
import os
import threading
import weakref
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from framework.errors import ResourceLimitError
from framework.runtime.state import RUNTIME

ALIGNMENT = 64


@dataclass
class MemoryStats:
    current_bytes: int = 0
    peak_bytes: int = 0
    allocations: int = 0
    frees: int = 0
    allocated_bytes: int = 0
    buffers: dict[int, int] = field(default_factory=dict)


class MemoryReporter:
    """Counts allocations and frees: current bytes, peak, count, per-buffer sizes.

    A free is reported by a ``weakref.finalize`` callback, which runs whenever the buffer's last reference
    goes, on whatever thread drops it: possibly in the middle of this reporter's own locked code (a
    garbage collection started by an allocation there). So ``on_free`` never waits for the lock: it queues
    the buffer id (a deque's append is atomic) and applies the queue only if the lock is free; every
    other entry point applies what is queued before it reads or counts."""

    def __init__(self) -> None:
        # not reentrant on purpose: a free reported on the thread that holds it (a garbage collection inside
        # on_alloc) fails on_free's non-blocking acquire and stays queued, instead of changing the counters
        # in the middle of the locked code
        self._lock = threading.Lock()
        self._stats = MemoryStats()
        self._next_id = 0
        self._freed: collections.deque[int] = collections.deque()

    def on_alloc(self, nbytes: int) -> int:
        with self._lock:
            self._apply_frees()
            s = self._stats
            self._next_id += 1
            s.buffers[self._next_id] = nbytes
            s.allocations += 1
            s.allocated_bytes += nbytes
            s.current_bytes += nbytes
            if s.current_bytes > s.peak_bytes:
                s.peak_bytes = s.current_bytes
            return self._next_id

    def on_free(self, buffer_id: int) -> None:
        self._freed.append(buffer_id)
        if self._lock.acquire(blocking=False):
            try:
                self._apply_frees()
            finally:
                self._lock.release()

    def _apply_frees(self) -> None:
        """Count the queued frees (the lock held)."""
        freed, s = self._freed, self._stats
        while freed:
            nbytes = s.buffers.pop(freed.popleft(), None)
            if nbytes is None:
                continue  # allocated before a reset
            s.frees += 1
            s.current_bytes -= nbytes

    def _settled(self) -> MemoryStats:
        if self._freed:
            with self._lock:
                self._apply_frees()
        return self._stats

    @property
    def current_bytes(self) -> int:
        return self._settled().current_bytes

    @property
    def peak_bytes(self) -> int:
        return self._settled().peak_bytes

    @property
    def allocations(self) -> int:
        return self._settled().allocations

    @property
    def frees(self) -> int:
        return self._settled().frees

    @property
    def allocated_bytes(self) -> int:
        """Bytes handed out since the last reset (a churn measure)."""
        return self._settled().allocated_bytes

    def buffer_sizes(self) -> list[int]:
        """Sizes in bytes of the live buffers."""
        with self._lock:
            self._apply_frees()
            return list(self._stats.buffers.values())

    def snapshot(self) -> dict[str, int]:
        s = self._settled()
        return {
            "current_bytes": s.current_bytes,
            "peak_bytes": s.peak_bytes,
            "allocations": s.allocations,
            "frees": s.frees,
            "allocated_bytes": s.allocated_bytes,
            "live_buffers": len(s.buffers),
        }

    def reset(self) -> None:
        """Forget the counters and the live buffers (peak restarts from zero)."""
        fresh = MemoryStats()
        with self._lock:
            self._freed.clear()
            self._stats = fresh

    def reset_peak(self) -> None:
        with self._lock:
            self._apply_frees()
            self._stats.peak_bytes = self._stats.current_bytes


class Allocator:
    """Interface of a CPU allocator: ``allocate(nbytes, zero_fill)`` -> uint8 array."""

    def allocate(self, nbytes: int, zero_fill: bool = True) -> np.ndarray:
        raise NotImplementedError

    def allocate_objects(self, count: int) -> np.ndarray:
        """An object array of ``count`` elements (string/object tensors)."""
        raise NotImplementedError


class CPUAllocator(Allocator):
    """64-byte aligned buffers from numpy, reported to a MemoryReporter.

    The free is reported when the buffer is garbage collected, whoever held it
    last, so sharing a buffer between tensors is safe.
    """

    def __init__(self, reporter: MemoryReporter | None = None, alignment: int = ALIGNMENT) -> None:
        self.reporter = reporter if reporter is not None else _REPORTER
        self.alignment = alignment

    def allocate(self, nbytes: int, zero_fill: bool = True) -> np.ndarray:
        nbytes = int(nbytes)
        check_allocation(nbytes)
        raw = (np.zeros if zero_fill else np.empty)(nbytes + self.alignment, dtype=np.uint8)
        offset = (-raw.ctypes.data) % self.alignment
        buf = raw[offset : offset + nbytes]
        # Track the owner: numpy views of ``buf`` keep ``raw`` (not ``buf``) alive,
        # so the free is reported when the memory really goes.
        self._track(raw, nbytes)
        return buf

    def allocate_objects(self, count: int) -> np.ndarray:
        check_allocation(int(count) * 8)
        arr = np.empty(int(count), dtype=object)
        self._track(arr, arr.nbytes)
        return arr

    def _track(self, arr: np.ndarray, nbytes: int) -> None:
        buffer_id = self.reporter.on_alloc(nbytes)
        weakref.finalize(arr, self.reporter.on_free, buffer_id)


_REPORTER = MemoryReporter()
_ALLOCATOR: list[Allocator] = RUNTIME.held("memory.allocator", lambda: [CPUAllocator(_REPORTER)])


def memory_reporter() -> MemoryReporter:
    """The process-wide reporter the default allocator reports to."""
    return _REPORTER


def get_cpu_allocator() -> Allocator:
    return _ALLOCATOR[0]


def allocate_array(shape, dtype, zero_fill: bool = False) -> np.ndarray:
    """A C-contiguous ``dtype`` array of ``shape`` from the current allocator (so the reporter sees it):
    for op scratch buffers (conv columns, temporaries) that are not blobs."""
    dtype = np.dtype(dtype)
    count = 1
    for d in shape:
        count *= int(d)
    buf = get_cpu_allocator().allocate(count * dtype.itemsize, zero_fill)
    return buf.view(dtype).reshape(tuple(int(d) for d in shape))


def set_cpu_allocator(allocator: Allocator) -> Allocator:
    """Install ``allocator`` for all later tensor allocations; returns the old one."""
    if not isinstance(allocator, Allocator):
        raise TypeError(f"set_cpu_allocator expects an Allocator, got {type(allocator).__name__}")
    old = _ALLOCATOR[0]
    _ALLOCATOR[0] = allocator
    return old


# -- the allocation limit ------------------------------------------------------------------------
# One limit on the size of any single buffer, checked before memory is touched: shape arguments
# (ConstantFill shape=[10**12]), dims read from files and lengths inputs turn into a clear
# ResourceLimitError instead of a MemoryError, an OOM kill or swapping.


def _physical_memory() -> int:
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):  # not POSIX: assume 8 GiB
        return 8 << 30


DEFAULT_LIMIT_FRACTION = 0.5


def _default_limit() -> list[int]:
    """The limit of a fresh import: FRAMEWORK_MAX_ALLOC_BYTES, else the default fraction of the memory."""
    env = os.environ.get("FRAMEWORK_MAX_ALLOC_BYTES", "").strip()
    return [int(env) if env.isdigit() else int(_physical_memory() * DEFAULT_LIMIT_FRACTION)]


_LIMIT = RUNTIME.held("memory.allocation_limit", _default_limit)


def allocation_limit() -> int:
    """The largest single buffer, in bytes, the framework allocates (default: half the physical memory)."""
    return _LIMIT[0]


def set_allocation_limit(nbytes: int | None) -> int:
    """Set the largest single allocation in bytes (None: the default); returns the old limit.

    Also settable with the environment variable FRAMEWORK_MAX_ALLOC_BYTES.
    """
    old = _LIMIT[0]
    _LIMIT[0] = int(_physical_memory() * DEFAULT_LIMIT_FRACTION) if nbytes is None else int(nbytes)
    return old


def check_allocation(nbytes: int, what: str = "a buffer") -> None:
    """ResourceLimitError if ``nbytes`` (a single allocation) exceeds the limit or is negative."""
    if nbytes > _LIMIT[0] or nbytes < 0:
        raise ResourceLimitError(
            f"{what} of {_fmt_bytes(nbytes)} exceeds the allocation limit of {_fmt_bytes(_LIMIT[0])} "
            "(framework.memory.set_allocation_limit or FRAMEWORK_MAX_ALLOC_BYTES raise it)"
        )


def check_elements(shape: Any, itemsize: int, what: str) -> int:
    """The element count of ``shape``; ResourceLimitError (naming ``what``) before allocating too much."""
    n = 1
    for d in shape:
        n *= int(d)
    if n * max(int(itemsize), 1) > _LIMIT[0]:
        check_allocation(n * max(int(itemsize), 1), f"{what} (shape {list(shape)})")
    return n


def _fmt_bytes(n: float) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if abs(n) < 1024 or unit == "PiB":
            return f"{n} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} bytes"
