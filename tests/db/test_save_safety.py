"""Saving: minidb's publish order (fsync, rename, directory fsync), failed saves that keep the previous
checkpoint, Load/DBExists arguments not covered elsewhere, and the manifest's edge cases."""

import os
import stat

import numpy as np
import pytest

from framework import checkpoint
from framework.core import CreateOperator
from framework.db import Mode, open_db
from framework.db.blobs import MANIFEST_KEY
from framework.errors import DBError, FrameworkError
from framework.memory.serialize import serialize_blob
from framework.memory.workspace import Workspace
from framework.net.api import run_operator_once
from framework.proto.framework_pb2 import BlobProto

BACKENDS = ["minidb", "lmdb"]


def run(ws, op_type, inputs, outputs, **kw):
    run_operator_once(ws, CreateOperator(op_type, inputs, outputs, **kw))


def file_state(folder):
    """Every file under ``folder`` with its bytes (lmdb's lock file left out: readers touch it)."""
    out = {}
    for root, _, files in os.walk(folder):
        for f in files:
            if f != "lock.mdb":
                p = os.path.join(root, f)
                out[os.path.relpath(p, folder)] = open(p, "rb").read()
    return out


def test_minidb_publishes_by_fsync_rename_then_directory_fsync(tmp_path, monkeypatch):
    events = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd):
        kind = "dir" if stat.S_ISDIR(os.fstat(fd).st_mode) else "file"
        events.append(("fsync", kind))
        return real_fsync(fd)

    def replace(src, dst):
        assert os.path.basename(src).startswith(".c.minidb.tmp-") and os.path.dirname(src) == str(tmp_path)
        events.append(("replace", os.path.basename(dst)))
        return real_replace(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    ws = Workspace(root_folder=str(tmp_path))
    ws.feed_blob("w", np.arange(5, dtype=np.float32))
    run(ws, "Save", ["w"], [], db="c.minidb", db_type="minidb")
    assert events == [("fsync", "file"), ("replace", "c.minidb"), ("fsync", "dir")]


def test_minidb_failure_while_publishing_keeps_the_old_file(tmp_path, monkeypatch):
    ws = Workspace(root_folder=str(tmp_path))
    ws.feed_blob("w", np.arange(5, dtype=np.float32))
    checkpoint.save(ws, "c.minidb")
    before = file_state(tmp_path)

    def disk_full(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", disk_full)
    ws.feed_blob("w", np.zeros(5, np.float32))
    with pytest.raises(DBError, match=r"c\.minidb: could not finish writing: .*No space left"):
        checkpoint.save(ws, "c.minidb")
    monkeypatch.undo()
    assert file_state(tmp_path) == before  # no temporary file left, the old bytes untouched
    ws2 = Workspace(root_folder=str(tmp_path))
    checkpoint.load(ws2, "c.minidb")
    assert ws2.fetch_blob("w").tolist() == [0, 1, 2, 3, 4]


class Unserializable:
    pass


@pytest.mark.parametrize("db_type", BACKENDS)
def test_a_save_that_fails_midway_keeps_the_previous_checkpoint(tmp_path, db_type):
    ws = Workspace(root_folder=str(tmp_path))
    ws.feed_blob("a", np.arange(10.0))
    ws.feed_blob("b", np.arange(3))
    run(ws, "Save", ["a", "b"], [], db="ck", db_type=db_type)
    before = file_state(tmp_path)
    ws.feed_blob("a", np.full(10, -1.0))
    ws.create_blob("bad").reset(Unserializable())
    with pytest.raises(FrameworkError, match="Unserializable, which has no serializer"):
        run(ws, "Save", ["a", "bad", "b"], [], db="ck", db_type=db_type)  # 'a' was written first
    with pytest.raises(FrameworkError, match="no serializer"):
        checkpoint.save(ws, "ck", ["a", "bad"], db_type=db_type)
    assert file_state(tmp_path) == before
    ws2 = Workspace(root_folder=str(tmp_path))
    run(ws2, "Load", [], ["a", "b"], db="ck", db_type=db_type)
    assert ws2.fetch_blob("a").tolist() == list(range(10)) and ws2.fetch_blob("b").tolist() == [0, 1, 2]


@pytest.mark.parametrize("keep_device", [0, 1])
def test_keep_device_loads_on_the_cpu_either_way(tmp_path, keep_device):
    recs = list(serialize_blob("w", np.array([1.0, 2.0], np.float32), typed=True))
    proto = BlobProto.FromString(recs[0][1])
    proto.tensor.device_detail.device_type = 1  # serialized from a CUDA device
    proto.tensor.device_detail.device_id = 3
    with open_db("minidb", str(tmp_path / "gpu.minidb"), Mode.NEW) as db:
        with db.new_transaction() as txn:
            txn.put("w#%0", proto.SerializeToString())
    ws = Workspace(root_folder=str(tmp_path))
    run(ws, "Load", [], ["w"], db="gpu.minidb", db_type="minidb", keep_device=keep_device)
    assert ws.fetch_blob("w").tolist() == [1.0, 2.0]


def test_dbexists_absolute_path(tmp_path):
    ws = Workspace(root_folder=str(tmp_path / "elsewhere"))
    ws.feed_blob("w", np.ones(2))
    run(ws, "Save", ["w"], [], db=str(tmp_path / "abs.minidb"), db_type="minidb", absolute_path=1)
    assert (tmp_path / "abs.minidb").is_file()
    run(ws, "DBExists", [], ["e"], db_name=str(tmp_path / "abs.minidb"), db_type="minidb", absolute_path=1)
    assert ws.fetch_blob("e") == np.True_
    run(ws, "DBExists", [], ["e"], db_name="abs.minidb", db_type="minidb")  # relative: under the root folder
    assert ws.fetch_blob("e") == np.False_


def test_the_manifest_name_is_reserved(tmp_path):
    ws = Workspace(root_folder=str(tmp_path))
    ws.feed_blob(MANIFEST_KEY, np.ones(2))
    with pytest.raises(FrameworkError, match="reserved for the checkpoint manifest"):
        checkpoint.save(ws, "r.minidb")
    with pytest.raises(FrameworkError, match="reserved for the checkpoint manifest"):
        run(ws, "Save", [MANIFEST_KEY], [], db="r.minidb", db_type="minidb")
    assert not (tmp_path / "r.minidb").exists()


def test_odd_blob_names(tmp_path):
    ws = Workspace(root_folder=str(tmp_path))
    ws.feed_blob("line\nbreak", np.arange(3))
    ws.feed_blob("not-utf8-\udcff", np.arange(2))
    with pytest.raises(FrameworkError, match="is not valid UTF-8 text, which BlobProto.name needs"):
        checkpoint.save(ws, "odd.minidb", ["not-utf8-\udcff"])
    assert not (tmp_path / "odd.minidb").exists()
    ws2 = Workspace(root_folder=str(tmp_path))
    # a name holding a newline cannot be listed one per line: that file goes without a manifest
    checkpoint.save(ws, "nl.minidb", ["line\nbreak"])
    with open_db("minidb", str(tmp_path / "nl.minidb")) as db:
        cur = db.cursor()
        assert [k for k, _ in cur] == ["line\nbreak#%0"]
        cur.close()
    assert checkpoint.load(ws2, "nl.minidb") == ["line\nbreak"] and ws2.fetch_blob("line\nbreak").tolist() == [0, 1, 2]


def test_manifest_can_be_turned_off(tmp_path):
    ws = Workspace(root_folder=str(tmp_path))
    ws.feed_blob("w", np.ones(2))
    checkpoint.save(ws, "on.minidb")
    checkpoint.save(ws, "off.minidb", manifest=False)
    run(ws, "Save", ["w"], [], db="op.minidb", db_type="minidb")
    on, off, op = ((tmp_path / f).read_bytes() for f in ("on.minidb", "off.minidb", "op.minidb"))
    assert off == op  # without the manifest: exactly what the Save op (and Caffe2) writes
    # with it: the manifest first, the same records, then the per-record checksums
    at = on.index(off)
    assert MANIFEST_KEY.encode() in on[:at] and b"!!FRAMEWORK_CHECKPOINT_CHECKSUMS" in on[at + len(off) :]


def test_save_op_typed_argument_writes_the_typed_fields(tmp_path):
    from framework.memory.workspace import Workspace
    from framework.proto.framework_pb2 import BlobProto

    ws = Workspace(root_folder=str(tmp_path))
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    ws.feed_blob("x", x)
    for typed in (0, 1):
        ws.run_operator_once(CreateOperator("Save", ["x"], [], db=f"t{typed}.minidb", db_type="minidb", typed=typed))
        with open_db("minidb", str(tmp_path / f"t{typed}.minidb"), Mode.READ) as db:
            records = list(db.cursor())
        assert [k for k, _ in records] == ["x#%0"]
        proto = BlobProto.FromString(records[0][1])
        assert bool(proto.tensor.raw_data) == (typed == 0)
        assert list(proto.tensor.float_data) == ([] if typed == 0 else x.reshape(-1).tolist())
