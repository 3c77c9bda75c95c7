"""Tensor.snapshot()/restore() (an op's rollback) cover every slot of Tensor, in SNAPSHOT_FIELDS' order; the
accessors other layers use instead of the slots."""

from __future__ import annotations

import numpy as np

from framework.memory.blob import Blob
from framework.memory.tensor import SNAPSHOT_FIELDS, Tensor


def test_snapshot_fields_are_all_of_the_tensors_slots():
    assert set(SNAPSHOT_FIELDS) == set(Tensor.__slots__) - {"__weakref__"}
    assert len(SNAPSHOT_FIELDS) == len(set(SNAPSHOT_FIELDS))


def test_snapshot_is_each_slot_in_order_and_restore_puts_each_back():
    t = Tensor()
    marks = {f: object() for f in SNAPSHOT_FIELDS}
    for f, v in marks.items():
        setattr(t, f, v)
    snap = t.snapshot()
    assert all(a is marks[f] for f, a in zip(SNAPSHOT_FIELDS, snap))
    other = Tensor()
    other.restore(snap)
    assert all(getattr(other, f) is marks[f] for f in SNAPSHOT_FIELDS)


def test_restore_undoes_a_resize_and_a_type_change():
    t = Tensor.from_numpy(np.arange(6, dtype=np.float32).reshape(2, 3))
    snap = t.snapshot()
    t.resize(10)
    t.mutable_data(np.float64)
    t.restore(snap)
    assert t.dims == (2, 3) and t.dtype == np.float32
    np.testing.assert_array_equal(t.data(), np.arange(6, dtype=np.float32).reshape(2, 3))


def test_blob_and_tensor_accessors():
    b = Blob("b")
    assert b.held is None and b.held_tensor is None
    b.reset(b"text")
    assert b.held == b"text" and b.held_tensor is None
    t = b.get_mutable(Tensor)
    assert b.held_tensor is t and b.held is t and t.array is None
    arr = t.mutable_data(np.int32) if t.resize(3) is None else None
    assert t.array is arr
    state = t.view_state()
    t.reshape((3, 1))
    assert t.array is not arr
    t.set_view_state(state)
    assert t.array is arr and t.dims == (3,)
