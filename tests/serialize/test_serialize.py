"""BlobProto serialization of tensors, strings and registered types; chunking and reassembly."""

import random
import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from framework.errors import FrameworkError, SerializationError
from framework.memory.blob import Blob
from framework.memory.serialize import (
    ChunkAssembler,
    blob_name_of_key,
    deserialize_blob,
    parse_blob_proto,
    register_blob_serializer,
    serialize_blob,
    serialize_blob_to_string,
    tensor_from_proto,
    tensor_to_proto,
)
from framework.memory.tensor import Tensor
from framework.proto.framework_pb2 import BlobProto, TensorProto

NUMERIC = [np.float16, np.float32, np.float64, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.bool_]
PROTO_TYPE = {
    np.float16: TensorProto.FLOAT16,
    np.float32: TensorProto.FLOAT,
    np.float64: TensorProto.DOUBLE,
    np.int8: TensorProto.INT8,
    np.int16: TensorProto.INT16,
    np.int32: TensorProto.INT32,
    np.int64: TensorProto.INT64,
    np.uint8: TensorProto.UINT8,
    np.uint16: TensorProto.UINT16,
    np.bool_: TensorProto.BOOL,
}


def numeric_arrays(dtype):
    return hnp.arrays(dtype, hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=5))


def assert_same(a, b):
    assert a.dtype == b.dtype and a.shape == b.shape
    if a.dtype.kind == "f":  # compare bit patterns: NaN payloads and -0.0 must survive
        np.testing.assert_array_equal(a.view(f"u{a.itemsize}"), b.view(f"u{b.itemsize}"))
    else:
        np.testing.assert_array_equal(a, b)


def roundtrip_records(records, seed=0):
    random.Random(seed).shuffle(records)
    asm, blobs = ChunkAssembler(), {}
    for key, value in records:
        name = blob_name_of_key(key)
        blob = blobs.setdefault(name, Blob(name))
        asm.add(name, parse_blob_proto(value), blob)
    asm.check_complete()
    return blobs


@pytest.mark.parametrize("dtype", NUMERIC)
@pytest.mark.parametrize("typed", [False, True])
@settings(max_examples=15)
@given(data=st.data())
def test_every_dtype_roundtrips_typed_and_raw(dtype, typed, data):
    arr = data.draw(numeric_arrays(np.dtype(dtype)))
    proto = tensor_to_proto(arr, "x", typed=typed)
    assert proto.data_type == PROTO_TYPE[dtype]
    assert (proto.storage_type == TensorProto.RAW) == (not typed)
    back = tensor_from_proto(TensorProto.FromString(proto.SerializeToString()))
    assert_same(back.data(), arr)
    # and through a whole blob, chunked with a tiny chunk size in shuffled order
    recs = list(serialize_blob("x", Tensor.from_numpy(arr), chunk_size=3, typed=typed))
    assert [k for k, _ in recs] == [f"x#%{k}" for k in range(max(1, -(-arr.size // 3)))]
    assert_same(roundtrip_records(recs, seed=arr.size)["x"].get(Tensor).data(), arr)


@pytest.mark.parametrize("dtype", NUMERIC)
@pytest.mark.parametrize("shape", [(0,), (), (3, 5), (70000,)])
def test_fast_raw_records_equal_protobufs_own_encoding(dtype, shape):
    arr = (np.arange(int(np.prod(shape))) % 7).astype(dtype).reshape(shape)
    for key, value in serialize_blob("x", arr, chunk_size=40000):
        k = int(key.split("#%")[1])
        seg = (k * 40000, min((k + 1) * 40000, arr.size))
        proto = BlobProto(name="x", type="Tensor")
        proto.tensor.CopyFrom(tensor_to_proto(arr, "x", segment=seg))
        assert value == proto.SerializeToString()


def test_typed_encodings_match_caffe2_fields():
    p = tensor_to_proto(np.array([True, False]), typed=True)
    assert list(p.int32_data) == [1, 0]
    p = tensor_to_proto(np.array([-3, 200], dtype=np.int16), typed=True)
    assert list(p.int32_data) == [-3, 200]
    p = tensor_to_proto(np.array([1.5, -2.0], dtype=np.float16), typed=True)
    assert list(p.int32_data) == [0x3E00, 0xC000]
    p = tensor_to_proto(np.array([1.5], dtype=np.float64), typed=True)
    assert list(p.double_data) == [1.5]
    p = tensor_to_proto(np.array([2**40], dtype=np.int64), typed=True)
    assert list(p.int64_data) == [2**40]
    p = tensor_to_proto(np.array([1.0, 2.0], dtype=np.float32))
    assert p.raw_data == struct.pack("<2f", 1.0, 2.0) and p.storage_type == TensorProto.RAW


def test_reads_legacy_storage_variants():
    # float16 as raw bytes in byte_data (caffe2_serialize_fp16_as_bytes)
    p = TensorProto(dims=[2], data_type=TensorProto.FLOAT16, byte_data=np.array([1, -2], "<f2").tobytes())
    assert tensor_from_proto(p).data().tolist() == [1.0, -2.0]
    # BYTE reads as uint8
    p = TensorProto(dims=[3], data_type=TensorProto.BYTE, byte_data=b"\x01\x02\xff")
    out = tensor_from_proto(p).data()
    assert out.dtype == np.uint8 and out.tolist() == [1, 2, 255]
    # NO_CONTENT: shape and type only, no data (a few bytes in a file allocate nothing)
    p = TensorProto(dims=[2, 2], data_type=TensorProto.INT32, storage_type=TensorProto.NO_CONTENT)
    t = tensor_from_proto(p)
    assert t.dims == (2, 2) and t.dtype == np.int32 and not t.is_allocated
    p = TensorProto(dims=[1 << 40], data_type=TensorProto.FLOAT, storage_type=TensorProto.NO_CONTENT)
    assert tensor_from_proto(p).dims == (1 << 40,)
    # EXTERNAL: a clear error
    p = TensorProto(dims=[2], data_type=TensorProto.FLOAT, storage_type=TensorProto.EXTERNAL)
    with pytest.raises(SerializationError, match="EXTERNAL"):
        tensor_from_proto(p)


@settings(max_examples=20)
@given(st.lists(st.binary(max_size=8), min_size=0, max_size=7), st.booleans())
def test_string_tensors_and_string_blobs(items, typed):
    arr = np.empty(len(items), dtype=object)
    arr[:] = items
    recs = list(serialize_blob("s", Tensor.from_numpy(arr) if items else arr, chunk_size=2, typed=typed))
    back = roundtrip_records(recs)["s"].get(Tensor).data()
    assert back.tolist() == items
    b = Blob("t")
    deserialize_blob(serialize_blob_to_string(b"hello\x00world", "t"), b)
    assert b.get(bytes) == b"hello\x00world"
    assert list(serialize_blob("t", b"x")) == [
        ("t", BlobProto(name="t", type="std::string", content=b"x").SerializeToString())
    ]


def test_chunk_keys_and_segments():
    arr = np.arange(2_500_000, dtype=np.float32)
    recs = list(serialize_blob("w", Tensor.from_numpy(arr)))
    assert [k for k, _ in recs] == ["w#%0", "w#%1", "w#%2"]
    segs = [(p.tensor.segment.begin, p.tensor.segment.end) for p in (BlobProto.FromString(v) for _, v in recs)]
    assert segs == [(0, 1_000_000), (1_000_000, 2_000_000), (2_000_000, 2_500_000)]
    assert all(list(BlobProto.FromString(v).tensor.dims) == [2_500_000] for _, v in recs)
    np.testing.assert_array_equal(roundtrip_records(recs, seed=3)["w"].get(Tensor).data(), arr)
    # chunk_size 0: no chunking, still the "#%0" key; empty tensor: one [0, 0] record
    assert [k for k, _ in serialize_blob("w", arr, chunk_size=0)] == ["w#%0"]
    ((key, value),) = serialize_blob("e", np.zeros((0, 4), np.float32))
    p = BlobProto.FromString(value)
    assert key == "e#%0" and (p.tensor.segment.begin, p.tensor.segment.end) == (0, 0)
    assert roundtrip_records([(key, value)])["e"].get(Tensor).data().shape == (0, 4)


def test_missing_duplicate_and_overflowing_chunks():
    recs = list(serialize_blob("w", np.arange(10, dtype=np.int64), chunk_size=4))
    with pytest.raises(SerializationError, match="Data size mismatch for blob w"):
        roundtrip_records(recs[:2])
    with pytest.raises(SerializationError, match="extra part"):
        roundtrip_records(recs + recs[1:2])
    bad = BlobProto.FromString(recs[2][1])
    bad.tensor.segment.begin, bad.tensor.segment.end = 6, 8  # overlaps chunk 1 ([4, 8))
    with pytest.raises(SerializationError, match="extra part"):
        roundtrip_records(recs[:2] + [("w#%2", bad.SerializeToString())])
    bad.tensor.segment.begin, bad.tensor.segment.end = 9, 11  # past the end
    with pytest.raises(SerializationError, match="does not fit"):
        roundtrip_records(recs[:2] + [("w#%2", bad.SerializeToString())])
    short = BlobProto.FromString(recs[0][1])
    short.tensor.raw_data = short.tensor.raw_data[:-8]
    with pytest.raises(SerializationError, match="raw_data holds 3 elements but the segment needs 4"):
        roundtrip_records([("w#%0", short.SerializeToString())])


def test_non_tensor_content_chunks():
    parts = [
        BlobProto(name="c", type="std::string", content=x, content_num_chunks=3, content_chunk_id=i)
        for i, x in enumerate([b"ab", b"cd", b"e"])
    ]
    recs = [("c", p.SerializeToString()) for p in parts]
    assert roundtrip_records(recs, seed=1)["c"].get(bytes) == b"abcde"
    with pytest.raises(SerializationError, match="extra part"):
        roundtrip_records(recs + recs[:1])
    with pytest.raises(SerializationError, match="Data size mismatch"):
        roundtrip_records(recs[:2])


def test_unknown_types_are_clear_errors():
    class Thing:
        pass

    with pytest.raises(SerializationError, match="Thing, which has no serializer"):
        serialize_blob_to_string(Blob("t", Thing()), "t")
    with pytest.raises(SerializationError, match="unknown BlobProto type 'Mystery'"):
        deserialize_blob(BlobProto(name="m", type="Mystery").SerializeToString(), Blob("m"))
    with pytest.raises(SerializationError, match="cannot be read"):
        tensor_from_proto(TensorProto(dims=[1], data_type=TensorProto.UNDEFINED))
    with pytest.raises(SerializationError, match="empty"):
        list(serialize_blob("e", Blob("e")))
    objs = np.empty(2, dtype=object)
    objs[:] = [b"ok", 5]
    with pytest.raises(FrameworkError, match="is a int"):
        serialize_blob_to_string(objs, "o")


def test_registered_custom_type_roundtrips():
    class Counter:
        def __init__(self, n=0):
            self.n = n

    register_blob_serializer(
        Counter,
        "TestCounter",
        lambda obj, name: BlobProto(content=str(obj.n).encode()),
        lambda proto, blob: blob.reset(Counter(int(proto.content))),
    )
    data = serialize_blob_to_string(Blob("c", Counter(41)), "c")
    assert BlobProto.FromString(data).type == "TestCounter"
    b = Blob("c")
    deserialize_blob(data, b)
    assert b.get(Counter).n == 41


def test_deserialize_reuses_nothing_and_rejects_partial_single_string():
    recs = list(serialize_blob("w", np.arange(10.0), chunk_size=4))
    with pytest.raises(SerializationError, match="segment"):
        deserialize_blob(recs[1][1], Blob("w"))
    with pytest.raises(SerializationError, match="cannot parse a BlobProto"):
        deserialize_blob(b"\xff\xff\xff", Blob("w"))
