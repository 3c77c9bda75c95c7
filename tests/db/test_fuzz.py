"""Fuzzing: random, truncated and bit-flipped minidb files and BlobProtos raise only the framework's errors."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from framework import checkpoint
from framework.db import Mode, open_db
from framework.db.blobs import read_blobs
from framework.db.minidb import encode_record
from framework.errors import FrameworkError
from framework.memory.blob import Blob
from framework.memory.serialize import ChunkAssembler, deserialize_blob, parse_blob_proto, serialize_blob
from framework.memory.workspace import Workspace
from framework.proto.framework_pb2 import BlobProto, TensorProto

FUZZ = settings(max_examples=150, suppress_health_check=[HealthCheck.function_scoped_fixture])


def valid_checkpoint_bytes():
    recs = list(serialize_blob("w", np.arange(24, dtype=np.float32).reshape(4, 6), chunk_size=10))
    recs += list(serialize_blob("i", np.arange(5, dtype=np.int64), typed=True))
    recs += list(serialize_blob("s", np.array([b"ab", b"c"], dtype=object)))
    recs += list(serialize_blob("t", b"text"))
    return b"".join(encode_record(k, v) for k, v in recs)


VALID = valid_checkpoint_bytes()


def load_bytes(tmp_path, data):
    path = tmp_path / "f.minidb"
    path.write_bytes(data)
    ws = Workspace()
    try:
        checkpoint.load(ws, str(path))
    except FrameworkError as e:
        assert str(path) in str(e), f"the error does not name the file: {e}"
        assert ws.blobs() == [], "a failed load changed the workspace"
        return None
    return ws


@FUZZ
@given(data=st.binary(max_size=300))
def test_random_files(tmp_path, data):
    load_bytes(tmp_path, data)


@FUZZ
@given(cut=st.integers(0, len(VALID) - 1))
def test_truncated_files(tmp_path, cut):
    ws = load_bytes(tmp_path, VALID[:cut])
    # minidb has no footer: a cut exactly between records reads as a shorter file. What loads is
    # then whole blobs with their exact values (a chunked blob cut short is "Data size mismatch").
    if ws is not None:
        expected = {"w": np.arange(24, dtype=np.float32).reshape(4, 6), "i": np.arange(5), "s": [b"ab", b"c"]}
        for name in ws.blobs():
            if name == "t":
                assert ws.fetch_blob("t") == b"text"
            else:
                np.testing.assert_array_equal(ws.fetch_blob(name), expected[name])


@FUZZ
@given(flips=st.lists(st.tuples(st.integers(0, len(VALID) - 1), st.integers(0, 7)), min_size=1, max_size=4))
def test_bit_flipped_files(tmp_path, flips):
    data = bytearray(VALID)
    for pos, bit in flips:
        data[pos] ^= 1 << bit
    load_bytes(tmp_path, bytes(data))


@FUZZ
@given(data=st.binary(max_size=200))
def test_random_blobproto_bytes(data):
    try:
        deserialize_blob(data, Blob("x"))
    except FrameworkError:
        pass


FIELDS = st.fixed_dictionaries(
    {
        "dims": st.lists(st.integers(-2, 6) | st.sampled_from([1 << 40, 1 << 62]), max_size=3),
        "data_type": st.sampled_from(list(TensorProto.DataType.values())),
        "storage_type": st.integers(1, 4),
        "float_data": st.lists(st.floats(width=32), max_size=6),
        "int32_data": st.lists(st.integers(-(2**31), 2**31 - 1), max_size=6),
        "int64_data": st.lists(st.integers(-(2**63), 2**63 - 1), max_size=6),
        "double_data": st.lists(st.floats(), max_size=6),
        "string_data": st.lists(st.binary(max_size=3), max_size=6),
        "byte_data": st.binary(max_size=12),
        "raw_data": st.binary(max_size=24),
    }
)


@FUZZ
@given(
    fields=FIELDS,
    segment=st.none() | st.tuples(st.integers(-3, 40), st.integers(-3, 40)),
    parts=st.integers(1, 3),
    blob_type=st.sampled_from(["Tensor", "", "std::string", "DBReader", "Other"]),
)
def test_structured_blobprotos(fields, segment, parts, blob_type):
    tp = TensorProto(**fields)
    if segment is not None:
        tp.segment.begin, tp.segment.end = segment
    proto = BlobProto(name="x", type=blob_type, tensor=tp, content=b"\x0a\x01x")
    data = proto.SerializeToString()
    try:
        deserialize_blob(data, Blob("x"))
    except FrameworkError:
        pass
    asm = ChunkAssembler()
    try:
        for _ in range(parts):
            asm.add("x", parse_blob_proto(data), Blob("x"))
        asm.check_complete()
    except FrameworkError:
        pass


@pytest.mark.parametrize("db_type", ["minidb", "lmdb", "leveldb", "rocksdb"])
@settings(max_examples=30, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(values=st.lists(st.binary(min_size=1, max_size=40), min_size=1, max_size=5))
def test_records_of_garbage_values(tmp_path_factory, db_type, values):
    path = str(tmp_path_factory.mktemp("g") / "db")
    with open_db(db_type, path, Mode.NEW) as db:
        txn = db.new_transaction()
        for i, v in enumerate(values):
            txn.put(f"k{i}#%0", v)
        txn.commit()
    try:
        read_blobs([(db_type, path)], None)
    except FrameworkError as e:
        assert path in str(e)


@FUZZ
@given(data=st.binary(max_size=300))
def test_random_protodb_files(tmp_path, data):
    """Any bytes as a protodb: readable records or a DBError naming the file, never another exception."""
    path = tmp_path / "f.protodb"
    path.write_bytes(data)
    try:
        with open_db("protodb", str(path), Mode.READ) as db:
            for _, value in db.cursor():
                TensorProto.FromString(value)
    except FrameworkError as e:
        assert str(path) in str(e)


@pytest.mark.parametrize("db_type", ["leveldb", "rocksdb"])
@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(flips=st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 7)), min_size=1, max_size=4))
def test_damaged_sorted_kv_files(tmp_path_factory, db_type, flips):
    """Bit flips in a LevelDB/RocksDB folder's log or table: the checkpoint loads (damage missed by LevelDB lands in the
    BlobProto checks) or fails with a DBError/FrameworkError naming the folder."""
    import os

    path = str(tmp_path_factory.mktemp("lv") / "ck")
    ws = Workspace()
    ws.feed_blob("w", np.arange(300, dtype=np.float32))
    checkpoint.save(ws, path, db_type=db_type)
    files = sorted(
        f for f in os.listdir(path) if f.endswith((".log", ".ldb", ".sst")) and os.path.getsize(os.path.join(path, f))
    )
    target = os.path.join(path, files[0])
    data = bytearray(open(target, "rb").read())
    for pos, bit in flips:
        data[pos % len(data)] ^= 1 << bit
    open(target, "wb").write(bytes(data))
    ws2 = Workspace()
    try:
        names = checkpoint.load(ws2, path, db_type=db_type)
    except FrameworkError as e:
        assert path in str(e)
        return
    assert names == ["w"]  # never a silent partial load
    np.testing.assert_array_equal(ws2.fetch_blob("w"), np.arange(300, dtype=np.float32))
