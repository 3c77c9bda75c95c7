"""A buffer's free reaches the MemoryReporter from a ``weakref.finalize`` callback, which can run inside the
reporter's own locked code (a garbage collection started there) or on another thread: it must never wait
for the lock (that deadlocks the first case), and the counts must come out right either way."""

from __future__ import annotations

import gc
import threading

from framework.memory.allocator import CPUAllocator, MemoryReporter


def test_a_free_inside_the_locked_code_does_not_wait_and_is_counted():
    rep = MemoryReporter()
    a, b = rep.on_alloc(100), rep.on_alloc(50)
    with rep._lock:  # as a collection running a finalizer in the middle of on_alloc would
        done = threading.Event()
        rep.on_free(a)  # returns (a blocking acquire here would hang this thread forever)
        done.set()
    assert done.is_set()
    assert rep.frees == 1 and rep.current_bytes == 50 and rep.buffer_sizes() == [50]
    rep.on_free(b)
    assert rep.snapshot()["live_buffers"] == 0 and rep.current_bytes == 0 and rep.peak_bytes == 150


def test_frees_from_finalizers_and_threads_all_count():
    rep = MemoryReporter()
    alloc = CPUAllocator(rep)
    parts = [[alloc.allocate(64) for _ in range(50)] for _ in range(4)]  # each thread drops one part

    def drop(part):
        while part:
            part.pop()

    threads = [threading.Thread(target=drop, args=(part,)) for part in parts]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    gc.collect()
    assert all(not part for part in parts)
    assert rep.allocations == 200 and rep.frees == 200 and rep.current_bytes == 0
    # a reset forgets live buffers: their later frees count nothing
    kept = alloc.allocate(32)
    rep.reset()
    del kept
    gc.collect()
    assert rep.frees == 0 and rep.current_bytes == 0
