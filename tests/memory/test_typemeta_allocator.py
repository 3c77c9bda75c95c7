"""TypeMeta mappings, the 64-byte aligned allocator and the MemoryReporter."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from framework.errors import TypeMismatchError
from framework.memory import (
    Allocator,
    CPUAllocator,
    MemoryReporter,
    Tensor,
    TypeMeta,
    get_cpu_allocator,
    memory_reporter,
    set_cpu_allocator,
)
from framework.memory import typemeta as tm
from framework.proto.framework_pb2 import TensorProto as TP

# (numpy dtype, TensorProto DataType, Caffe2 type name), from reference/caffe2.md §1 and §7.
TABLE = [
    (np.float16, TP.FLOAT16, "float16"),
    (np.float32, TP.FLOAT, "float"),
    (np.float64, TP.DOUBLE, "double"),
    (np.int8, TP.INT8, "int8"),
    (np.int16, TP.INT16, "int16"),
    (np.int32, TP.INT32, "int"),
    (np.int64, TP.INT64, "int64"),
    (np.uint8, TP.UINT8, "uint8"),
    (np.uint16, TP.UINT16, "uint16"),
    (np.bool_, TP.BOOL, "bool"),
]


@pytest.mark.parametrize("dtype,proto,name", TABLE)
def test_dtype_proto_mapping(dtype, proto, name):
    meta = TypeMeta.of(dtype)
    assert meta.dtype == np.dtype(dtype)
    assert meta.proto_type == proto
    assert meta.name == name
    assert meta.itemsize == np.dtype(dtype).itemsize
    assert meta.is_pod
    assert TypeMeta.from_proto(proto) is meta
    assert TypeMeta.of(np.dtype(dtype)) is meta
    assert TypeMeta.of(name) is meta
    assert TypeMeta.of(str(np.dtype(dtype))) is meta  # numpy spelling too
    assert TypeMeta.of(meta) is meta


def test_string_meta():
    s = TypeMeta.of(object)
    assert s is tm.STRING and s.name == "std::string" and not s.is_pod
    assert s.proto_type == TP.STRING
    assert TypeMeta.from_proto(TP.STRING) is s
    for spec in ("string", "str", "bytes", "std::string", np.dtype("S3"), np.dtype("U2")):
        assert TypeMeta.of(spec) is s
    assert s.ctor() == b""


def test_byte_reads_as_uint8_and_every_tensor_dtype_maps_back():
    assert TypeMeta.from_proto(TP.BYTE) is TypeMeta.of(np.uint8)
    covered = {m.proto_type for m in tm.ALL_TENSOR_TYPES}
    every = set(TP.DataType.values()) - {TP.UNDEFINED, TP.BYTE, TP.ZERO_COLLISION_HASH}
    assert covered == every


def test_python_object_types():
    class Reader:
        pass

    meta = TypeMeta.of(Reader)
    assert meta is TypeMeta.of(Reader) and meta.name.endswith("Reader")
    assert meta.proto_type == TP.UNDEFINED and not meta.is_pod and meta.py_type is Reader


@pytest.mark.parametrize("bad", [np.complex64, np.complex128, "float128x", "nonsense"])
def test_unknown_types_are_errors(bad):
    with pytest.raises(TypeMismatchError, match="float16"):
        TypeMeta.of(bad)


@pytest.mark.parametrize("extended", [np.uint32, np.uint64, "bfloat16", "float8_e4m3fn", "int4"])
def test_onnx_types_beyond_caffe2_are_held_but_never_serialized(extended):
    if isinstance(extended, str):
        extended = getattr(pytest.importorskip("ml_dtypes"), extended)
    meta = TypeMeta.of(extended)
    assert meta is TypeMeta.of(np.dtype(extended)) and meta.proto_type == TP.UNDEFINED
    assert meta.dtype == np.dtype(extended) and meta.is_pod
    from framework.errors import SerializationError
    from framework.memory.tensor_proto import tensor_to_proto

    with pytest.raises(SerializationError, match="no TensorProto type"):
        tensor_to_proto(np.zeros(2, extended), "t")


@pytest.mark.parametrize("bad", [TP.UNDEFINED, TP.ZERO_COLLISION_HASH, 99])
def test_unknown_proto_types_are_errors(bad):
    with pytest.raises(TypeMismatchError, match=f"data_type {bad}"):
        TypeMeta.from_proto(bad)


# -- allocator ------------------------------------------------------------------


@given(st.integers(0, 5000), st.booleans())
def test_alignment_and_size(nbytes, zero):
    buf = get_cpu_allocator().allocate(nbytes, zero_fill=zero)
    assert buf.dtype == np.uint8 and buf.nbytes == nbytes
    if nbytes:  # an empty buffer has no meaningful address
        assert buf.ctypes.data % 64 == 0
    if zero:
        assert not buf.any()


def test_tensor_buffers_are_aligned_and_zero_filled():
    for dtype in (np.float16, np.float32, np.float64, np.int8, np.bool_):
        t = Tensor((3, 5))
        a = t.mutable_data(dtype)
        assert a.ctypes.data % 64 == 0
        assert not a.any()


def test_reporter_counts_current_peak_and_buffers():
    r = MemoryReporter()
    alloc = CPUAllocator(r)
    a = alloc.allocate(1000)
    b = alloc.allocate(24)
    assert (r.current_bytes, r.peak_bytes, r.allocations, r.frees) == (1024, 1024, 2, 0)
    assert sorted(r.buffer_sizes()) == [24, 1000]
    del a
    assert (r.current_bytes, r.peak_bytes, r.frees) == (24, 1024, 1)
    assert r.buffer_sizes() == [24]
    c = alloc.allocate(10)
    assert r.peak_bytes == 1024 and r.current_bytes == 34 and r.allocated_bytes == 1034
    snap = r.snapshot()
    assert snap == {
        "current_bytes": 34,
        "peak_bytes": 1024,
        "allocations": 3,
        "frees": 1,
        "allocated_bytes": 1034,
        "live_buffers": 2,
    }
    r.reset_peak()
    assert r.peak_bytes == 34
    r.reset()
    assert (r.current_bytes, r.peak_bytes, r.allocations, r.frees, r.buffer_sizes()) == (0, 0, 0, 0, [])
    del b, c  # frees of buffers from before the reset are not counted
    assert r.frees == 0 and r.current_bytes == 0


def test_free_reported_only_when_the_last_view_goes():
    r = MemoryReporter()
    buf = CPUAllocator(r).allocate(64)
    view = buf[8:16].view(np.float32)
    del buf
    assert r.current_bytes == 64  # the view still keeps the memory alive
    del view
    assert r.current_bytes == 0 and r.frees == 1


def test_object_buffers_are_reported():
    r = MemoryReporter()
    arr = CPUAllocator(r).allocate_objects(5)
    assert arr.dtype == object and len(arr) == 5 and r.allocations == 1 and r.current_bytes == arr.nbytes


def test_tensor_allocations_go_to_the_global_reporter():
    r = memory_reporter()
    before, current = r.allocations, r.current_bytes
    t = Tensor((10, 10))
    t.mutable_data(np.float64)
    assert r.allocations == before + 1 and r.current_bytes == current + 800
    assert 800 in r.buffer_sizes()
    del t
    assert r.current_bytes == current


class CountingAllocator(CPUAllocator):
    def __init__(self):
        super().__init__(MemoryReporter())
        self.calls = []

    def allocate(self, nbytes, zero_fill=True):
        self.calls.append(("bytes", nbytes, zero_fill))
        return super().allocate(nbytes, zero_fill)

    def allocate_objects(self, count):
        self.calls.append(("objects", count))
        return super().allocate_objects(count)


def test_pluggable_allocator():
    mine = CountingAllocator()
    old = set_cpu_allocator(mine)
    try:
        assert get_cpu_allocator() is mine
        t = Tensor((4, 4))
        t.mutable_data(np.float32)
        t.mutable_data(np.float32)  # cached: no second call
        s = Tensor((3,))
        s.mutable_data(str)
        assert mine.calls == [("bytes", 64, True), ("objects", 3)]
        assert mine.reporter.allocations == 2
    finally:
        assert set_cpu_allocator(old) is mine
    assert get_cpu_allocator() is old


def test_set_cpu_allocator_refuses_non_allocators():
    with pytest.raises(TypeError, match="Allocator"):
        set_cpu_allocator(object())
    assert isinstance(get_cpu_allocator(), Allocator)


def test_zero_fill_option(monkeypatch):
    from framework.memory import tensor as tensor_mod

    mine = CountingAllocator()
    old = set_cpu_allocator(mine)
    monkeypatch.setattr(tensor_mod.OPTIONS, "zero_fill", False)
    try:
        Tensor((2,)).mutable_data(np.int32)
    finally:
        set_cpu_allocator(old)
    assert mine.calls == [("bytes", 8, False)]
