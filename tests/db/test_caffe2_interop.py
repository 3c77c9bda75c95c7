"""Byte-level interop with Caffe2 checkpoints, both ways.

Caffe2 -> here: a minidb is built in the test exactly as Caffe2's Save writes it (records packed
with struct; BlobProtos with the typed fields float_data/int32_data/... that 2018 Caffe2 fills,
device_detail set by its CPU serializer, a tensor chunked at the default 1,000,000 elements with
its chunks out of order, a std::string blob) and loaded with the Load op and checkpoint.load.

Here -> Caffe2: files written by our Save op are read by a tiny independent reader written in this
test (struct + BlobProto.FromString + numpy), which reassembles the chunks and compares values.
Expected values are literals or plain numpy in this file, never computed by the framework.
"""

import struct

import numpy as np
import pytest

from framework import checkpoint
from framework.core import CreateOperator
from framework.errors import FrameworkError
from framework.memory.workspace import Workspace
from framework.net.api import run_operator_once
from framework.proto.framework_pb2 import BlobProto, DeviceOption, TensorProto

TP = TensorProto


def run(ws, op_type, inputs, outputs, **kw):
    run_operator_once(ws, CreateOperator(op_type, inputs, outputs, **kw))


# -- Caffe2 -> here ------------------------------------------------------------------------------
def c2_record(key: str, value: bytes) -> bytes:
    """One minidb record: int32 key length, int32 value length (little-endian), key, value."""
    k = key.encode()
    return struct.pack("<i", len(k)) + struct.pack("<i", len(value)) + k + value


def c2_tensor_chunk(name, dims, data_type, field, values, begin, end):
    """BlobProto bytes of one chunk as Caffe2's TensorSerializer fills it (typed field, no storage_type)."""
    proto = BlobProto(name=name, type="Tensor")
    t = proto.tensor
    t.name = name
    t.dims.extend(dims)
    t.data_type = data_type
    t.device_detail.CopyFrom(DeviceOption(device_type=0))  # StoreDeviceDetail on CPU
    t.segment.begin, t.segment.end = begin, end
    if field == "string_data":
        t.string_data.extend(values)
    else:
        getattr(t, field).extend(values)
    return proto.SerializeToString()


BIG_N = 1_000_003  # > Caffe2's default chunk size of 1,000,000 elements: two chunks
SMALL = {  # name: (dims, DataType, typed field, values as Caffe2 stores them, expected numpy array)
    "i32": ([2, 3], TP.INT32, "int32_data", [1, -2, 3, 2**31 - 1, -(2**31), 0], None),
    "i64": ([3], TP.INT64, "int64_data", [2**40, -1, 7], None),
    "f64": ([2], TP.DOUBLE, "double_data", [0.1, -1e300], None),
    "b": ([4], TP.BOOL, "int32_data", [1, 0, 0, 1], np.array([True, False, False, True])),
    "u8": ([3], TP.UINT8, "int32_data", [0, 128, 255], np.array([0, 128, 255], np.uint8)),
    "i8": ([3], TP.INT8, "int32_data", [-128, 0, 127], np.array([-128, 0, 127], np.int8)),
    "u16": ([2], TP.UINT16, "int32_data", [0, 65535], np.array([0, 65535], np.uint16)),
    "i16": ([2], TP.INT16, "int32_data", [-32768, 32767], np.array([-32768, 32767], np.int16)),
    # float16 as uint16 bit patterns in int32_data: 1.0 = 0x3C00, -2.0 = 0xC000, 0.5 = 0x3800
    "h": ([3], TP.FLOAT16, "int32_data", [0x3C00, 0xC000, 0x3800], np.array([1.0, -2.0, 0.5], np.float16)),
    "scalar": ([], TP.FLOAT, "float_data", [2.5], np.array(2.5, np.float32)),
    "empty": ([0, 4], TP.FLOAT, "float_data", [], np.zeros((0, 4), np.float32)),
    "names": ([2], TP.STRING, "string_data", [b"cat", b"\x00dog"], None),
}
SMALL_EXPECTED = {
    "i32": np.array([[1, -2, 3], [2**31 - 1, -(2**31), 0]], np.int32),
    "i64": np.array([2**40, -1, 7], np.int64),
    "f64": np.array([0.1, -1e300], np.float64),
    **{k: v[4] for k, v in SMALL.items() if v[4] is not None},
}


def big_values():
    return (np.arange(BIG_N, dtype=np.float32) * np.float32(0.5)).reshape(BIG_N, 1)


def write_caffe2_checkpoint(path):
    records = []
    big = big_values().reshape(-1)
    records.append(
        ("big#%1", c2_tensor_chunk("big", [BIG_N, 1], TP.FLOAT, "float_data", big[1_000_000:], 10**6, BIG_N))
    )
    for name, (dims, dt, field, values, _) in SMALL.items():
        n = int(np.prod(dims)) if dims else 1
        records.append((f"{name}#%0", c2_tensor_chunk(name, dims, dt, field, values, 0, n)))
    # a tensor chunked with caffe2_tensor_chunk_size=4, chunks out of order
    w = list(range(10))
    for k in (2, 0, 1):
        part = w[4 * k : 4 * k + 4]
        records.append(
            (f"w#%{k}", c2_tensor_chunk("w", [2, 5], TP.INT32, "int32_data", part, 4 * k, 4 * k + len(part)))
        )
    records.append(("s", BlobProto(name="s", type="std::string", content=b"caffe2 \xff bytes").SerializeToString()))
    records.append(("big#%0", c2_tensor_chunk("big", [BIG_N, 1], TP.FLOAT, "float_data", big[:1_000_000], 0, 10**6)))
    with open(path, "wb") as f:
        for key, value in records:
            f.write(c2_record(key, value))
    return [k for k, _ in records]


def check_loaded(ws):
    big = ws.fetch_blob("big")
    assert big.dtype == np.float32 and big.shape == (BIG_N, 1)
    np.testing.assert_array_equal(big[:, 0], np.arange(BIG_N, dtype=np.float32) * np.float32(0.5))
    for name, expected in SMALL_EXPECTED.items():
        got = ws.fetch_blob(name)
        assert got.dtype == expected.dtype and got.shape == expected.shape, name
        np.testing.assert_array_equal(got, expected)
    assert ws.fetch_blob("names").tolist() == [b"cat", b"\x00dog"]
    w = ws.fetch_blob("w")
    assert w.dtype == np.int32 and w.tolist() == [[0, 1, 2, 3, 4], [5, 6, 7, 8, 9]]
    assert ws.fetch_blob("s") == b"caffe2 \xff bytes"


NAMES = ["big", *SMALL, "w", "s"]


@pytest.fixture(scope="module")
def caffe2_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("c2") / "caffe2.minidb"
    keys = write_caffe2_checkpoint(str(path))
    assert keys[-1] == "big#%0"  # the first chunk of big comes last: order is not guaranteed
    return path


def test_caffe2_file_loads_with_the_load_op(caffe2_file):
    ws = Workspace(root_folder=str(caffe2_file.parent))
    run(ws, "Load", [], NAMES, db=caffe2_file.name, db_type="minidb")
    check_loaded(ws)
    ws2 = Workspace()
    run(ws2, "Load", [], [], db=str(caffe2_file), db_type="minidb", absolute_path=1, load_all=1)
    assert sorted(ws2.blobs()) == sorted(NAMES)
    check_loaded(ws2)


def test_caffe2_file_loads_with_checkpoint_load(caffe2_file):
    ws = Workspace()
    assert sorted(checkpoint.load(ws, caffe2_file)) == sorted(NAMES)
    check_loaded(ws)
    rows = {r["name"]: r for r in checkpoint.list_checkpoint(caffe2_file)}
    assert rows["big"]["shape"] == (BIG_N, 1) and rows["big"]["bytes"] == 4 * BIG_N
    assert rows["w"]["dtype"] == "int32" and rows["s"]["bytes"] == len(b"caffe2 \xff bytes")


def test_caffe2_file_missing_a_chunk_is_named(tmp_path, caffe2_file):
    data = caffe2_file.read_bytes()
    # drop the last record (big#%0) by walking the record headers
    pos, ends = 0, []
    while pos < len(data):
        klen, vlen = struct.unpack_from("<ii", data, pos)
        pos += 8 + klen + vlen
        ends.append(pos)
    (tmp_path / "cut.minidb").write_bytes(data[: ends[-2]])
    ws = Workspace()
    ws.feed_blob("big", np.zeros(3, np.float32))
    with pytest.raises(FrameworkError, match=r"Data size mismatch for blob big .*cut\.minidb"):
        checkpoint.load(ws, tmp_path / "cut.minidb")
    assert ws.blobs() == ["big"] and ws.fetch_blob("big").tolist() == [0, 0, 0]


# -- here -> Caffe2 ------------------------------------------------------------------------------
C2_DTYPES = {  # DataType -> (numpy dtype, typed field); an independent table, as a Caffe2 reader has
    TP.FLOAT: (np.float32, "float_data"),
    TP.DOUBLE: (np.float64, "double_data"),
    TP.INT32: (np.int32, "int32_data"),
    TP.INT64: (np.int64, "int64_data"),
    TP.BOOL: (np.bool_, "int32_data"),
    TP.UINT8: (np.uint8, "int32_data"),
    TP.INT8: (np.int8, "int32_data"),
    TP.UINT16: (np.uint16, "int32_data"),
    TP.INT16: (np.int16, "int32_data"),
    TP.FLOAT16: (np.float16, "int32_data"),
    TP.STRING: (object, "string_data"),
}


def independent_read(path, typed_only=False):
    """Parse a minidb file and reassemble its blobs: {name: ndarray or bytes}, plus the record keys."""
    data = open(path, "rb").read()
    pos, keys, blobs, filled = 0, [], {}, {}
    while pos < len(data):
        klen, vlen = struct.unpack_from("<ii", data, pos)
        assert klen > 0 and vlen > 0
        key = data[pos + 8 : pos + 8 + klen].decode()
        proto = BlobProto.FromString(data[pos + 8 + klen : pos + 8 + klen + vlen])
        pos += 8 + klen + vlen
        keys.append(key)
        if proto.type == "std::string":
            assert key == proto.name
            blobs[key] = proto.content
            continue
        assert proto.type == "Tensor"
        name, chunk = key.split("#%")
        t = proto.tensor
        assert name == proto.name == t.name and t.HasField("segment")
        dtype, field = C2_DTYPES[t.data_type]
        n = int(np.prod(t.dims)) if len(t.dims) else 1
        if name not in blobs:
            blobs[name] = np.zeros(n, dtype=dtype) if dtype is not object else np.empty(n, dtype=object)
            filled[name] = 0
        b, e = t.segment.begin, t.segment.end
        assert b == int(chunk) * 1_000_000 and e - b <= 1_000_000  # the default chunk size
        if t.storage_type == TP.RAW:
            assert not typed_only, "a Caffe2 reader needs the typed fields"
            vals = np.frombuffer(t.raw_data, dtype=np.dtype(dtype).newbyteorder("<"))
        elif t.data_type == TP.FLOAT16:
            vals = np.array(list(t.int32_data), dtype=np.uint16).view(np.float16)
        else:
            vals = np.array(list(getattr(t, field)), dtype=dtype if dtype is not object else object)
        assert vals.size == e - b
        blobs[name][b:e] = vals
        filled[name] += e - b
        blobs[name] = blobs[name].reshape(-1)
        blobs[f"{name}.dims"] = tuple(t.dims)
    for name, count in filled.items():
        assert count == blobs[name].size, f"{name}: {count} of {blobs[name].size} elements"
        blobs[name] = blobs[name].reshape(blobs.pop(f"{name}.dims"))
    return blobs, keys


def make_workspace(tmp_path):
    ws = Workspace(root_folder=str(tmp_path))
    ws.feed_blob("fc_w", (np.arange(2_500_000, dtype=np.float32) / 7).reshape(2500, 1000))
    ws.feed_blob("fc_b", np.array([1.5, -0.0, np.inf], np.float32))
    ws.feed_blob("steps", np.array([3, -4, 2**40], np.int64))
    ws.feed_blob("half", np.array([[1.0, -2.0], [0.5, 65504.0]], np.float16))
    ws.feed_blob("mask", np.array([True, False, True]))
    ws.feed_blob("u16", np.array([0, 65535], np.uint16))
    ws.feed_blob("i8", np.array([-128, 127], np.int8))
    ws.feed_blob("d", np.array(3.25, np.float64))
    ws.feed_blob("labels", np.array(["zero", "one", "two"]))
    ws.feed_blob("empty", np.zeros((0, 3), np.int32))
    ws.feed_blob("note", "a std::string blob")
    return ws


def check_independent(blobs):
    np.testing.assert_array_equal(blobs["fc_w"], (np.arange(2_500_000, dtype=np.float32) / 7).reshape(2500, 1000))
    assert blobs["fc_w"].dtype == np.float32
    np.testing.assert_array_equal(blobs["fc_b"], np.array([1.5, -0.0, np.inf], np.float32))
    assert np.signbit(blobs["fc_b"][1])
    assert blobs["steps"].tolist() == [3, -4, 2**40] and blobs["steps"].dtype == np.int64
    assert blobs["half"].dtype == np.float16 and blobs["half"].tolist() == [[1.0, -2.0], [0.5, 65504.0]]
    assert blobs["mask"].tolist() == [True, False, True]
    assert blobs["u16"].tolist() == [0, 65535] and blobs["i8"].tolist() == [-128, 127]
    assert blobs["d"].shape == () and blobs["d"] == 3.25
    assert blobs["labels"].tolist() == [b"zero", b"one", b"two"]
    assert blobs["empty"].shape == (0, 3) and blobs["empty"].dtype == np.int32
    assert blobs["note"] == b"a std::string blob"


NAMES_OUT = ["fc_w", "fc_b", "steps", "half", "mask", "u16", "i8", "d", "labels", "empty", "note"]


def test_save_op_file_reads_with_an_independent_reader(tmp_path):
    ws = make_workspace(tmp_path)
    run(ws, "Save", NAMES_OUT, [], db="ours.minidb", db_type="minidb")
    blobs, keys = independent_read(tmp_path / "ours.minidb")
    # Caffe2's keys: chunks of 1,000,000 elements as name#%k, even one chunk is name#%0; strings plain
    assert keys[:3] == ["fc_w#%0", "fc_w#%1", "fc_w#%2"]
    assert "note" in keys and "fc_b#%0" in keys and "empty#%0" in keys and len(keys) == 13
    check_independent(blobs)


def test_typed_checkpoint_needs_no_raw_data(tmp_path):
    """Caffe2 binaries read only the typed fields: typed=True files have every value there."""
    ws = make_workspace(tmp_path)
    checkpoint.save(ws, "typed.minidb", NAMES_OUT, typed=True, manifest=False)
    blobs, keys = independent_read(tmp_path / "typed.minidb", typed_only=True)
    check_independent(blobs)


def test_manifest_record_is_a_plain_string_blob_to_caffe2(tmp_path):
    """With the manifest on (the default), a Caffe2 Load(load_all=1) sees two extra std::string blobs:
    the manifest (first) and the per-record checksums (last)."""
    ws = make_workspace(tmp_path)
    checkpoint.save(ws, "m.minidb", ["fc_b", "note"])
    blobs, keys = independent_read(tmp_path / "m.minidb")
    assert keys[0] == "!!FRAMEWORK_CHECKPOINT_MANIFEST" and keys[-1] == "!!FRAMEWORK_CHECKPOINT_CHECKSUMS"
    listed = blobs["!!FRAMEWORK_CHECKPOINT_MANIFEST"].split(b"\n")
    assert listed == [b"fc_b#%0", b"note", b"!!FRAMEWORK_CHECKPOINT_CHECKSUMS"]
    sums = blobs["!!FRAMEWORK_CHECKPOINT_CHECKSUMS"].split(b"\n")
    assert [line[17:] for line in sums] == [b"fc_b#%0", b"note"]
