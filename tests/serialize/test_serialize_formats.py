"""Typed encodings against protobuf's own, later Caffe2's byte_data holders, the chunk-size default,
and the doctests of the serialization, DB and checkpoint modules."""

import doctest
import importlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from framework.errors import SerializationError
from framework.memory import serialize
from framework.memory.serialize import serialize_blob, tensor_from_proto
from framework.proto.framework_pb2 import BlobProto, TensorProto

TP = TensorProto
INT_TYPES = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16]


def protobuf_typed_chunk(arr, name, begin, end):
    """The BlobProto bytes protobuf itself produces when the typed fields are filled element by element."""
    flat = arr.reshape(-1)[begin:end]
    p = BlobProto(name=name, type="Tensor")
    t = p.tensor
    t.dims.extend(arr.shape)
    t.name = name
    t.segment.begin, t.segment.end = begin, end
    kind = arr.dtype
    if kind == np.float32:
        t.data_type = TP.FLOAT
        t.float_data.extend(float(x) for x in flat)
    elif kind == np.float64:
        t.data_type = TP.DOUBLE
        t.double_data.extend(float(x) for x in flat)
    elif kind == np.int64:
        t.data_type = TP.INT64
        t.int64_data.extend(int(x) for x in flat)
    elif kind == np.float16:
        t.data_type = TP.FLOAT16
        t.int32_data.extend(int(x) for x in flat.view(np.uint16))
    else:
        t.data_type = {
            np.dtype(np.bool_): TP.BOOL,
            np.dtype(np.int8): TP.INT8,
            np.dtype(np.int16): TP.INT16,
            np.dtype(np.int32): TP.INT32,
            np.dtype(np.uint8): TP.UINT8,
            np.dtype(np.uint16): TP.UINT16,
        }[kind]
        t.int32_data.extend(int(x) for x in flat)
    return p.SerializeToString()


ANY_DTYPE = st.sampled_from([np.float16, np.float32, np.float64, np.bool_, *INT_TYPES])


@settings(max_examples=60)
@given(
    arr=ANY_DTYPE.flatmap(lambda dt: hnp.arrays(dt, hnp.array_shapes(min_dims=0, max_dims=2, min_side=0, max_side=7))),
    chunk=st.integers(1, 9),
    name=st.sampled_from(["w", "a_longer_name/with#chars"]),
)
def test_typed_records_are_byte_identical_to_protobufs_encoding(arr, chunk, name):
    records = list(serialize_blob(name, arr, chunk_size=chunk, typed=True))
    for k, (key, value) in enumerate(records):
        begin = k * chunk
        end = min(begin + chunk, arr.size)
        assert key == f"{name}#%{k}"
        assert value == protobuf_typed_chunk(arr, name, begin, end)


def test_extreme_integers_survive_the_varint_encoder():
    for dt in INT_TYPES:
        info = np.iinfo(dt)
        vals = [info.min, info.min + 1, -1, 0, 1, 127, 128, 16383, 16384, 2**31 - 1, 2**35, info.max]
        arr = np.array([v for v in vals if info.min <= v <= info.max], dt)
        (_, value), *_ = serialize_blob("x", arr, typed=True)
        assert value == protobuf_typed_chunk(arr, "x", 0, arr.size)
        back = tensor_from_proto(BlobProto.FromString(value).tensor).data()
        assert back.dtype == dt and back.tolist() == arr.tolist()


@pytest.mark.parametrize(
    "data_type, wire, values",
    [
        (TP.BOOL, "<u1", [1, 0, 1]),
        (TP.UINT8, "<u1", [0, 200, 255]),
        (TP.INT8, "<i1", [-128, 5, 127]),
        (TP.UINT16, "<u2", [0, 40000, 65535]),
        (TP.INT16, "<i2", [-32768, 7, 32767]),
        (TP.INT64, "<i8", [-(2**63), 2**40, 2**63 - 1]),
        (TP.FLOAT16, "<f2", [1.0, -2.0, 0.5]),
    ],
)
def test_reads_types_held_in_byte_data(data_type, wire, values):
    """Later Caffe2 writes these in byte_data (caffe2_serialize_using_bytes_as_holder / _fp16_as_bytes)."""
    raw = np.array(values, dtype=wire).tobytes()
    p = TensorProto(dims=[3], data_type=data_type, byte_data=raw)
    p.segment.begin, p.segment.end = 0, 3
    got = tensor_from_proto(p).data()
    expected = [bool(v) for v in values] if data_type == TP.BOOL else values
    assert got.tolist() == expected
    short = TensorProto(dims=[3], data_type=data_type, byte_data=raw[:-1])
    with pytest.raises(SerializationError, match="byte_data"):
        tensor_from_proto(short)


def test_default_chunk_size_is_configurable():
    arr = np.arange(10, dtype=np.float32)
    assert serialize.DEFAULT_CHUNK_SIZE == 1_000_000
    old = serialize.set_default_chunk_size(4)
    try:
        assert old == 1_000_000
        assert [k for k, _ in serialize_blob("x", arr)] == ["x#%0", "x#%1", "x#%2"]
        assert [k for k, _ in serialize_blob("x", arr, chunk_size=-1)] == ["x#%0", "x#%1", "x#%2"]
        assert [k for k, _ in serialize_blob("x", arr, chunk_size=0)] == ["x#%0"]
        with pytest.raises(SerializationError, match="chunk size must be > 0"):
            serialize.set_default_chunk_size(0)
    finally:
        serialize.set_default_chunk_size(old)
    assert [k for k, _ in serialize_blob("x", arr)] == ["x#%0"]


MODULES = [
    "framework.memory.tensor",
    "framework.memory.blob",
    "framework.memory.typemeta",
    "framework.memory.allocator",
    "framework.memory.serialize",
    "framework.db.base",
    "framework.checkpoint",
    "framework.ops.io.db_input",
    "framework.proto.io",
    "framework.proto.args",
]


@pytest.mark.parametrize("module", MODULES)
def test_module_doctests(module):
    import framework.ops  # noqa: F401  (registers the ops the examples use)

    result = doctest.testmod(importlib.import_module(module), extraglobs={"np": np}, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
