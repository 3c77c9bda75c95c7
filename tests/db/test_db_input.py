"""CreateDB, TensorProtosDBInput, DBReader blobs, and preparing TensorProtos DBs."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.db import Mode, open_db
from framework.db.reader import DBReader
from framework.errors import DBError, FrameworkError, OperatorError, ShapeError
from framework.memory.blob import Blob
from framework.memory.serialize import deserialize_blob, serialize_blob_to_string
from framework.memory.workspace import Workspace
from framework.net.api import run_operator_once
from framework.ops import get_schema
from framework.ops.io.db_input import read_tensor_protos_db, write_tensor_protos_db
from framework.proto.framework_pb2 import BlobProto, DBReaderProto, TensorProtos

BACKENDS = ["minidb", "lmdb", "leveldb", "rocksdb"]


def run(ws, op_type, inputs, outputs, **kw):
    run_operator_once(ws, CreateOperator(op_type, inputs, outputs, **kw))


def dataset(n):
    x = np.arange(n * 6, dtype=np.float32).reshape(n, 2, 3)
    y = np.arange(n, dtype=np.int32) * 10
    return x, y


@pytest.mark.parametrize("db_type", BACKENDS)
@pytest.mark.parametrize("typed", [False, True])
def test_write_and_read_back(tmp_path, db_type, typed):
    x, y = dataset(7)
    path = str(tmp_path / "d")
    assert write_tensor_protos_db(path, [x, y], db_type=db_type, typed=typed) == 7
    rx, ry = read_tensor_protos_db(path)  # db type detected
    np.testing.assert_array_equal(rx, x)
    np.testing.assert_array_equal(ry, y)
    with open_db(db_type, path, Mode.READ) as db:
        cur = db.cursor()
        key, value = cur.key(), cur.value()
        cur.close()
    assert key == "00000000" and len(TensorProtos.FromString(value).protos) == 2
    with pytest.raises(ShapeError, match="same first dimension"):
        write_tensor_protos_db(path, [x, y[:3]], db_type=db_type)


@pytest.mark.parametrize("db_type", BACKENDS)
def test_batches_wrap_around(tmp_path, db_type):
    x, y = dataset(7)
    write_tensor_protos_db(tmp_path / "d", [x, y], db_type=db_type)
    ws = Workspace(root_folder=str(tmp_path))
    run(ws, "CreateDB", [], ["reader"], db="d", db_type=db_type)
    op = CreateOperator("TensorProtosDBInput", ["reader"], ["X", "Y"], batch_size=3)
    seen = []
    for _ in range(3):
        run_operator_once(ws, op)
        bx, by = ws.fetch_blob("X"), ws.fetch_blob("Y")
        assert bx.shape == (3, 2, 3) and bx.dtype == np.float32 and by.dtype == np.int32
        np.testing.assert_array_equal(bx, x[by // 10])
        seen += (by // 10).tolist()
    assert seen == [0, 1, 2, 3, 4, 5, 6, 0, 1]


def test_batch_size_zero_reads_one_record_without_batch_axis(tmp_path):
    x, y = dataset(2)
    write_tensor_protos_db(tmp_path / "d", [x, y])
    ws = Workspace(root_folder=str(tmp_path))
    run(ws, "CreateDB", [], ["r"], db="d", db_type="minidb")
    run(ws, "TensorProtosDBInput", ["r"], ["X", "Y"])
    assert ws.fetch_blob("X").shape == (2, 3) and ws.fetch_blob("Y").shape == ()


@pytest.mark.parametrize("db_type", BACKENDS)
@settings(max_examples=10)
@given(n=st.integers(1, 12), shards=st.integers(1, 4))
def test_shards_split_records_without_overlap(tmp_path_factory, db_type, n, shards):
    folder = tmp_path_factory.mktemp("s")
    _, y = dataset(n)
    write_tensor_protos_db(folder / "d", [y], db_type=db_type)
    ws = Workspace(root_folder=str(folder))
    parts = []
    for k in range(shards):
        mine = list(range(k, n, shards))
        if not mine:
            continue
        run(ws, "CreateDB", [], [f"r{k}"], db="d", db_type=db_type, num_shards=shards, shard_id=k)
        got = []
        for _ in range(2 * len(mine)):  # two epochs: wrapping stays inside the shard
            run(ws, "TensorProtosDBInput", [f"r{k}"], ["Y"], batch_size=1)
            got.append(int(ws.fetch_blob("Y")[0]) // 10)
        assert got == mine * 2
        parts.append(set(mine))
    assert set().union(*parts) == set(range(n)) and sum(map(len, parts)) == n


@pytest.mark.parametrize("db_type", BACKENDS)
def test_dbreader_serializes_as_caffe2(tmp_path, db_type):
    _, y = dataset(3)
    path = str(tmp_path / "d")
    write_tensor_protos_db(path, [y], db_type=db_type)
    reader = DBReader(path, db_type)
    reader.read()
    data = serialize_blob_to_string(Blob("r", reader), "r")
    proto = BlobProto.FromString(data)
    rp = DBReaderProto.FromString(proto.content)
    assert proto.type == "DBReader" and rp.source == path and rp.db_type == db_type and rp.name == "r"
    assert rp.key == ("" if db_type == "minidb" else "00000001")  # only seekable DBs record the position
    b = Blob("r")
    deserialize_blob(data, b)
    again = b.get(DBReader)
    # Restored as data only: the source is not opened until the caller asks.
    assert not again.is_open
    with pytest.raises(DBError, match="data only"):
        again.read()
    assert serialize_blob_to_string(Blob("r", again), "r") == data  # round-trips unopened
    assert again.open().read()[0] == ("00000000" if db_type == "minidb" else "00000001")


def test_errors_name_the_op_and_record(tmp_path):
    x, y = dataset(3)
    write_tensor_protos_db(tmp_path / "d", [x, y])
    ws = Workspace(root_folder=str(tmp_path))
    run(ws, "CreateDB", [], ["r"], db="d", db_type="minidb")
    with pytest.raises(
        OperatorError, match="TensorProtosDBInput.*record '00000000' holds 2 TensorProtos, the op has 1"
    ):
        run(ws, "TensorProtosDBInput", ["r"], ["X"], batch_size=2)
    with open_db("minidb", str(tmp_path / "bad"), Mode.NEW) as db:
        with db.new_transaction() as txn:
            txn.put("k", b"\xff\xff\xff")
    run(ws, "CreateDB", [], ["b"], db="bad", db_type="minidb")
    with pytest.raises(OperatorError, match="record 'k' of minidb .*bad is not a TensorProtos"):
        run(ws, "TensorProtosDBInput", ["b"], ["X"], batch_size=1)
    with pytest.raises(FrameworkError, match=r"shard_id 3 must be in \[0, num_shards=2\)"):
        run(ws, "CreateDB", [], ["r2"], db="d", db_type="minidb", num_shards=2, shard_id=3)
    with pytest.raises(FrameworkError, match='no leveldb database here.*it is a minidb DB: pass db_type "minidb"'):
        run(ws, "CreateDB", [], ["r3"], db="d")  # Caffe2's default db_type
    ws.feed_blob("t", np.ones(2))
    with pytest.raises(OperatorError, match="expected a DBReader"):
        run(ws, "TensorProtosDBInput", ["t"], ["X"], batch_size=1)
    # records of different shapes cannot share a batch
    write_tensor_protos_db(tmp_path / "m1", [np.ones((1, 2))])
    with open_db("minidb", str(tmp_path / "m1"), Mode.WRITE) as db, db.new_transaction() as txn:
        rec = TensorProtos()
        rec.protos.add().CopyFrom(TensorProtos.FromString(_first_value(tmp_path / "m1")).protos[0])
        rec.protos[0].dims[:] = [1]
        rec.protos[0].raw_data = rec.protos[0].raw_data[:8]
        txn.put("z", rec.SerializeToString())
    run(ws, "CreateDB", [], ["m"], db="m1", db_type="minidb")
    with pytest.raises(OperatorError, match="record 'z' tensor 0 is double \\[1\\], but earlier records"):
        run(ws, "TensorProtosDBInput", ["m"], ["X"], batch_size=2)


def _first_value(path):
    with open_db("minidb", str(path), Mode.READ) as db:
        cur = db.cursor()
        v = cur.value()
        cur.close()
    return v


def test_schemas():
    for t in ("CreateDB", "TensorProtosDBInput"):
        s = get_schema(t)
        assert s.doc and s.infer is not None and s.gradient is not None
    assert get_schema("CreateDB").args["db_type"].default == "leveldb"


LONG_READ = """
import resource, sys
import numpy as np
from framework.core import CreateOperator
from framework.memory.workspace import Workspace
from framework.net.api import run_operator_once
from framework.ops.io.db_input import write_tensor_protos_db

ws = Workspace(root_folder=sys.argv[1])
write_tensor_protos_db(sys.argv[1] + "/d", [np.ones((100, 1, 8, 8), np.float32), np.arange(100, dtype=np.int32)])
run_operator_once(ws, CreateOperator("CreateDB", [], ["reader"], db="d", db_type="minidb"))
op = CreateOperator("TensorProtosDBInput", ["reader"], ["X", "Y"], batch_size=64)
from framework.proto import framework_pb2 as pb
nd = pb.NetDef(name="read", op=[op], external_input=["reader"])
n = ws.create_net(nd)
rss = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
for _ in range(300):
    n.run()
before = rss()
for _ in range(2000):
    n.run()
print(rss() - before)
"""


def test_a_long_read_does_not_grow_memory(tmp_path):
    """Reading 128,000 records in steady state leaves the process size flat (a reused protobuf message used
    to grow it by ~0.5 KB per record)."""
    import subprocess
    import sys

    p = subprocess.run([sys.executable, "-c", LONG_READ, str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert int(p.stdout.strip()) < 8 * 1024, f"grew by {p.stdout.strip()} KB"


@pytest.mark.parametrize("batch_size", [0, 1, 3])
def test_string_records_without_dims(tmp_path, batch_size):
    """A string TensorProto with no dims is one string (a scalar); batched, the output is [batch_size] strings,
    as Caffe2 deserializes each record's tensor and copies it to its slot of the batch."""
    words = [b"alpha", b"", b"gamma", b"delta"]
    with open_db("minidb", str(tmp_path / "s"), Mode.NEW) as db, db.new_transaction() as txn:
        for k, w in enumerate(words):
            protos = TensorProtos()
            tp = protos.protos.add()
            tp.data_type = tp.STRING
            tp.string_data.append(w)
            label = protos.protos.add()
            label.data_type = label.INT32
            label.int32_data.append(k)
            txn.put(f"{k:08d}", protos.SerializeToString())
    ws = Workspace(root_folder=str(tmp_path))
    run(ws, "CreateDB", [], ["reader"], db="s", db_type="minidb")
    run(ws, "TensorProtosDBInput", ["reader"], ["S", "L"], batch_size=batch_size)
    s, label = ws.fetch_blob("S"), ws.fetch_blob("L")
    n = max(batch_size, 1)
    if batch_size:
        assert s.shape == (n,) and label.shape == (n,)
        assert list(s) == words[:n] and list(label) == list(range(n))
    else:
        assert s.shape == () and s.item() == words[0] and label.shape == () and int(label) == 0
