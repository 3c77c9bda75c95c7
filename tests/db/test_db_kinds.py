"""What is particular to the DB kinds beyond the shared contract: protodb's Caffe2 layout, kind detection,
Caffe2's default db_type (leveldb) in ops, and the CLI's inspect / convert-db for every kind."""

import os

import numpy as np
import pytest

from framework import checkpoint
from framework.core import CreateOperator
from framework.db import Mode, detect_db_type, open_db
from framework.errors import DBError
from framework.memory.workspace import Workspace
from framework.net.api import run_operator_once
from framework.ops.io.db_input import write_tensor_protos_db
from framework.proto import framework_pb2 as pb
from tests.cli.inprocess import run_cli

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def tensor(name, values):
    t = pb.TensorProto(name=name, data_type=pb.TensorProto.FLOAT, dims=[len(values)])
    t.float_data.extend(values)
    return t


def test_protodb_reads_caffe2_files_binary_and_text(tmp_path):
    protos = pb.TensorProtos(protos=[tensor("w", [1.0, 2.0]), tensor("b", [3.0])])
    binary, text = tmp_path / "bin.protodb", tmp_path / "text.protodb"
    binary.write_bytes(protos.SerializeToString())  # what Caffe2's ProtoDB::Close writes
    text.write_text(
        'protos { name: "w" data_type: FLOAT dims: 2 float_data: 1 float_data: 2 }\n'
        'protos { name: "b" data_type: FLOAT dims: 1 float_data: 3 }\n'
    )
    for path in (binary, text):
        with open_db("protodb", str(path), Mode.READ) as db:
            got = [(k, pb.TensorProto.FromString(v)) for k, v in db.cursor()]
        assert [k for k, _ in got] == ["w", "b"]  # file order, not key order
        assert list(got[0][1].float_data) == [1.0, 2.0] and list(got[1][1].dims) == [1]


def test_protodb_writes_one_tensorprotos_and_refuses_what_caffe2_aborts_on(tmp_path):
    path = str(tmp_path / "t.protodb")
    with open_db("protodb", path, Mode.NEW) as db, db.new_transaction() as txn:
        txn.put("w", tensor("w", [1.0]).SerializeToString())
    assert pb.TensorProtos.FromString(open(path, "rb").read()).protos[0].name == "w"
    with open_db("protodb", path, Mode.WRITE) as db:
        txn = db.new_transaction()
        with pytest.raises(DBError, match="'w' already exists"):
            txn.put("w", tensor("w", [2.0]).SerializeToString())
        with pytest.raises(DBError, match="TensorProto's name is 'x'"):
            txn.put("y", tensor("x", [2.0]).SerializeToString())
        txn.put("z", tensor("z", [2.0]).SerializeToString())
    with open_db("protodb", path, Mode.READ) as db:
        assert [k for k, _ in db.cursor()] == ["w", "z"]
    (tmp_path / "junk.protodb").write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(DBError, match="neither a binary nor a text TensorProtos"):
        open_db("protodb", str(tmp_path / "junk.protodb"), Mode.READ)


@pytest.mark.parametrize("db_type", ["leveldb", "rocksdb"])
def test_checkpoints_roundtrip_and_are_detected(tmp_path, db_type):
    ws = Workspace()
    ws.feed_blob("w", np.arange(6, dtype=np.float32).reshape(2, 3))
    ws.feed_blob("it", np.array([7], dtype=np.int64))
    path = str(tmp_path / "ckpt")
    checkpoint.save(ws, path, db_type=db_type)
    assert detect_db_type(path) == db_type
    ws2 = Workspace()
    assert sorted(checkpoint.load(ws2, path)) == ["it", "w"]  # kind detected
    np.testing.assert_array_equal(ws2.fetch_blob("w"), ws.fetch_blob("w"))
    checkpoint.save(ws2, path, db_type=db_type)  # a save over an existing one replaces it
    assert {r["name"] for r in checkpoint.list_checkpoint(path)} == {"it", "w"}


def test_checkpoint_into_protodb_holds_tensors_only(tmp_path):
    # tensors round-trip (tests/db/test_checkpoint_protodb.py); a non-tensor blob is a clear error
    ws = Workspace()
    ws.feed_blob("w", np.ones(2, np.float32))
    ws.feed_blob("s", b"text")
    with pytest.raises(DBError, match="protodb"):
        checkpoint.save(ws, str(tmp_path / "c.protodb"), db_type="protodb")
    assert not os.path.exists(tmp_path / "c.protodb")


def test_createdb_default_db_type_is_leveldb_as_in_caffe2(tmp_path):
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    write_tensor_protos_db(tmp_path / "data", [x], db_type="leveldb")
    ws = Workspace(root_folder=str(tmp_path))
    run_operator_once(ws, CreateOperator("CreateDB", [], ["r"], db="data"))  # no db_type: leveldb
    run_operator_once(ws, CreateOperator("TensorProtosDBInput", ["r"], ["X"], batch_size=4))
    np.testing.assert_array_equal(ws.fetch_blob("X"), x)


def cli(*args, cwd):
    return run_cli(*args, cwd=cwd)  # in-process (tests/cli/inprocess.py)


def test_cli_inspect_and_convert_every_kind(tmp_path):
    x = np.arange(10, dtype=np.float32).reshape(5, 2)
    write_tensor_protos_db(tmp_path / "src.minidb", [x, np.arange(5, dtype=np.int32)], db_type="minidb")
    previous = "src.minidb"
    for kind in ["lmdb", "leveldb", "rocksdb", "minidb"]:
        dest = f"copy_{kind}"
        p = cli("convert-db", previous, dest, "--to", kind, cwd=tmp_path)
        assert p.returncode == 0 and "copied 5 records" in p.stdout, p.stderr
        p = cli("inspect", dest, cwd=tmp_path)
        assert p.returncode == 0, p.stderr
        assert f"{kind} DB {dest}: 5 records of TensorProtos" in p.stdout
        assert "tensor 0: float [2]" in p.stdout and "'00000004'" in p.stdout
        previous = dest
    p = cli("convert-db", "src.minidb", previous, "--to", "minidb", cwd=tmp_path)
    assert p.returncode == 2 and "--overwrite" in p.stderr and "Traceback" not in p.stderr
    ws = Workspace()
    ws.feed_blob("w", np.ones((2, 2), np.float32))
    checkpoint.save(ws, str(tmp_path / "ck"), db_type="rocksdb")
    p = cli("inspect", "ck", cwd=tmp_path)
    assert p.returncode == 0 and "checkpoint ck: 1 blobs" in p.stdout, p.stdout + p.stderr
