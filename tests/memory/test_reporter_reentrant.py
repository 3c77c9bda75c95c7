"""A buffer freed by a garbage collection that an allocation inside ``on_alloc`` starts (a weakref finalizer
calling ``on_free`` on the same thread) neither deadlocks nor changes the counters mid-update: it is queued
and counted once the locked code is done."""

from __future__ import annotations

import threading

from framework.memory import MemoryReporter


def test_free_inside_alloc_on_the_same_thread_does_not_deadlock():
    rep = MemoryReporter()
    first = rep.on_alloc(10)

    class FreesWhileStoring(dict):
        def __setitem__(self, key, value):  # as a finalizer run by the gc at this allocation would
            rep.on_free(first)
            super().__setitem__(key, value)

    rep._stats.buffers = FreesWhileStoring(rep._stats.buffers)
    done = []
    worker = threading.Thread(target=lambda: done.append(rep.on_alloc(20)), daemon=True)
    worker.start()
    worker.join(timeout=10)
    assert done, "on_alloc deadlocked on its own lock"
    assert rep.current_bytes == 20 and rep.allocations == 2 and rep.frees == 1
