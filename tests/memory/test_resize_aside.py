"""Tensor.resize_aside: a new shape without touching the old buffer's bytes (kept for an op's rollback),
settling on two buffers when a blob alternates between shapes."""

import numpy as np

from framework.memory.allocator import memory_reporter
from framework.memory.tensor import Tensor


def test_old_bytes_stay_and_alternating_shapes_stop_allocating():
    t = Tensor((4,), np.float32)
    t.mutable_data(np.float32)[:] = 7
    old = t.storage
    out = t.resize_aside((6,), np.float32)
    out[:] = 1
    assert t.storage is not old and np.all(old.view(np.dtype(np.float32), 4, (4,)) == 7)
    rep = memory_reporter()
    for _ in range(2):  # warm-up: both buffers reach the largest size seen
        for shape in ((3,), (9,), (5,)):
            t.resize_aside(shape, np.float32)
    n0 = rep.allocations
    for _ in range(5):
        for shape in ((3,), (9,), (5,)):
            arr = t.resize_aside(shape, np.float32)
            assert arr.shape == shape
    assert rep.allocations == n0


def test_free_memory_drops_the_spare_too():
    t = Tensor((4,), np.float32)
    t.mutable_data(np.float32)
    t.resize_aside((8,), np.float32)
    t.free_memory()
    assert t.storage is None and t._spare is None
