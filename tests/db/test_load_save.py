"""Save / Load / DBExists / Checkpoint operators and framework.checkpoint, over both backends."""

import os
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from framework import checkpoint
from framework.core import CreateOperator
from framework.db import Mode, open_db
from framework.errors import FrameworkError, OperatorError
from framework.memory.serialize import serialize_blob
from framework.memory.tensor import Tensor
from framework.memory.workspace import Workspace
from framework.net.api import run_operator_once
from framework.ops import get_schema
from framework.ops.inference import infer_op
from framework.ops.schema import UNKNOWN

BACKENDS = ["minidb", "lmdb", "leveldb", "rocksdb"]
DTYPES = [np.float16, np.float32, np.float64, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.bool_]


def run(ws, op_type, inputs, outputs, **kw):
    run_operator_once(ws, CreateOperator(op_type, inputs, outputs, **kw))


def same(a, b):
    assert a.dtype == b.dtype and a.shape == b.shape
    if a.dtype.kind == "f":
        np.testing.assert_array_equal(a.view(f"u{a.itemsize}"), b.view(f"u{b.itemsize}"))
    else:
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("db_type", BACKENDS)
@settings(max_examples=8)
@given(
    arrays=st.lists(
        st.sampled_from(DTYPES).flatmap(
            lambda dt: hnp.arrays(dt, hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=6))
        ),
        min_size=1,
        max_size=len(DTYPES),
    ),
    typed=st.booleans(),
    chunk=st.sampled_from([0, 3, 1000]),
)
def test_every_dtype_roundtrips_through_the_backend(tmp_path_factory, db_type, arrays, typed, chunk):
    path = str(tmp_path_factory.mktemp("rt") / f"c.{db_type}")
    ws = Workspace()
    names = [f"b{i}" for i in range(len(arrays))]
    for n, a in zip(names, arrays):
        ws.feed_blob(n, a)
    ws.feed_blob("s", "a string blob")
    checkpoint.save(ws, path, [*names, "s"], db_type=db_type, chunk_size=chunk, typed=typed)
    ws2 = Workspace()
    assert sorted(checkpoint.load(ws2, path)) == sorted([*names, "s"])
    for n, a in zip(names, arrays):
        same(ws2.fetch_blob(n), a)
    assert ws2.fetch_blob("s") == b"a string blob"
    # and through the operators
    ws3 = Workspace()
    run(ws, "Save", names, [], db=path, db_type=db_type, absolute_path=1, chunk_size=chunk)
    run(ws3, "Load", [], names, db=path, db_type=db_type, absolute_path=1)
    for n, a in zip(names, arrays):
        same(ws3.fetch_blob(n), a)


@pytest.mark.parametrize("db_type", BACKENDS)
def test_chunked_tensor_in_shuffled_record_order(tmp_path, db_type):
    path = str(tmp_path / f"c.{db_type}")
    big = np.random.default_rng(0).standard_normal((37, 29)).astype(np.float32)
    strings = np.array([f"s{i}".encode() for i in range(11)], dtype=object)
    recs = list(serialize_blob("big", big, chunk_size=50)) + list(serialize_blob("strs", strings, chunk_size=3))
    assert len(recs) == 22 + 4
    random.Random(1).shuffle(recs)
    with open_db(db_type, path, Mode.NEW) as db:
        for k, v in recs:
            with db.new_transaction() as txn:
                txn.put(k, v)
    ws = Workspace(root_folder=str(tmp_path))
    run(ws, "Load", [], ["big", "strs"], db=os.path.basename(path), db_type=db_type)  # relative to root
    np.testing.assert_array_equal(ws.fetch_blob("big"), big)
    assert ws.fetch_blob("strs").tolist() == strings.tolist()


def test_default_chunking_of_a_large_tensor(tmp_path):
    ws = Workspace(root_folder=str(tmp_path))
    x = np.arange(2_300_000, dtype=np.int32)
    ws.feed_blob("x", x)
    run(ws, "Save", ["x"], [], db="x.minidb", db_type="minidb")
    with open_db("minidb", str(tmp_path / "x.minidb")) as db:
        cur = db.cursor()
        assert [k for k, _ in cur] == ["x#%0", "x#%1", "x#%2"]
        cur.close()
    ws2 = Workspace(root_folder=str(tmp_path))
    run(ws2, "Load", [], ["x"], db="x.minidb", db_type="minidb")
    np.testing.assert_array_equal(ws2.fetch_blob("x"), x)


@pytest.mark.parametrize("db_type", BACKENDS)
def test_prefixes_overrides_and_names(tmp_path, db_type):
    ws = Workspace(root_folder=str(tmp_path))
    ws.feed_blob("gpu_0/w", np.ones(3, np.float32))
    ws.feed_blob("gpu_0/b", np.zeros(2, np.int64))
    run(ws, "Save", ["gpu_0/w", "gpu_0/b"], [], db="p.db", db_type=db_type, strip_prefix="gpu_0/")
    assert [r["name"] for r in checkpoint.list_checkpoint(str(tmp_path / "p.db"), db_type)] in (["w", "b"], ["b", "w"])
    ws2 = Workspace(root_folder=str(tmp_path))
    run(ws2, "Load", [], ["gpu_1/w", "gpu_1/b"], db="p.db", db_type=db_type, add_prefix="gpu_1/")
    assert ws2.fetch_blob("gpu_1/w").tolist() == [1, 1, 1]
    # strip on load, then add
    run(ws, "Save", ["gpu_0/w"], [], db="q.db", db_type=db_type)
    run(ws2, "Load", [], ["cpu/w"], db="q.db", db_type=db_type, strip_prefix="gpu_0/", add_prefix="cpu/")
    assert ws2.fetch_blob("cpu/w").tolist() == [1, 1, 1]
    # blob_name_overrides; source_blob_names maps DB names onto outputs
    run(ws, "Save", ["gpu_0/w", "gpu_0/b"], [], db="o.db", db_type=db_type, blob_name_overrides=["W", "B"])
    run(ws2, "Load", [], ["mine_w", "mine_b"], db="o.db", db_type=db_type, source_blob_names=["W", "B"])
    assert ws2.fetch_blob("mine_w").tolist() == [1, 1, 1] and ws2.fetch_blob("mine_b").tolist() == [0, 0]
    with pytest.raises(FrameworkError, match="blob_name_overrides cannot be combined with strip_prefix"):
        run(ws, "Save", ["gpu_0/w"], [], db="x.db", db_type=db_type, blob_name_overrides=["a"], strip_prefix="g")
    ws.feed_blob("gpu_1/w", np.ones(3, np.float32))
    with pytest.raises(FrameworkError, match="same name 'w'"):
        run(ws, "Save", ["gpu_0/w", "gpu_1/w"], [], db="x.db", db_type=db_type, strip_prefix="/")


@pytest.mark.parametrize("db_type", BACKENDS)
def test_load_all_allow_incomplete_and_missing(tmp_path, db_type):
    ws = Workspace(root_folder=str(tmp_path))
    ws.feed_blob("a", np.ones(2))
    ws.feed_blob("b", "text")
    run(ws, "Save", ["a", "b"], [], db="c", db_type=db_type)
    ws2 = Workspace(root_folder=str(tmp_path))
    # with load_all a named output must be one of the DB's blobs (Caffe2 2020), and nothing is loaded if not
    with pytest.raises(OperatorError, match="Output blob name 'ignored' does not exist in the db"):
        run(ws2, "Load", [], ["a", "ignored"], db="c", db_type=db_type, load_all=1)
    assert "b" not in ws2.blobs()
    run(ws2, "Load", [], ["a"], db="c", db_type=db_type, load_all=1)
    assert sorted(ws2.blobs()) == ["a", "b"] and ws2.fetch_blob("b") == b"text"
    ws3 = Workspace(root_folder=str(tmp_path))
    run(ws3, "Load", [], ["a", "zz"], db="c", db_type=db_type, allow_incomplete=True)
    assert ws3.fetch_blob("a").tolist() == [1, 1] and ws3.get_blob("zz").is_empty
    with pytest.raises(
        OperatorError, match=r"Expected to load 2 blobs, got 1 only: failed to load zz .* holds 2 blobs: a, b"
    ):
        run(ws3, "Load", [], ["a", "zz"], db="c", db_type=db_type)


@pytest.mark.parametrize("db_type", BACKENDS)
def test_several_dbs_and_duplicate_keys(tmp_path, db_type):
    ws = Workspace(root_folder=str(tmp_path))
    ws.feed_blob("a", np.ones(2))
    ws.feed_blob("b", np.zeros(2))
    run(ws, "Save", ["a"], [], db="d1", db_type=db_type)
    run(ws, "Save", ["b"], [], db="d2", db_type=db_type)
    run(ws, "Save", ["a", "b"], [], db="d3", db_type=db_type)
    ws2 = Workspace(root_folder=str(tmp_path))
    run(ws2, "Load", [], ["a", "b"], dbs=["d1", "d2"], db_type=db_type)
    assert ws2.fetch_blob("b").tolist() == [0, 0]
    with pytest.raises(OperatorError, match="Duplicate Key a"):
        run(ws2, "Load", [], ["a", "b"], dbs=["d1", "d3"], db_type=db_type)


@pytest.mark.parametrize("db_type", BACKENDS)
def test_failed_load_leaves_the_workspace_unchanged(tmp_path, db_type):
    ws = Workspace(root_folder=str(tmp_path))
    ws.feed_blob("a", np.arange(10.0))
    ws.feed_blob("b", np.arange(5))
    recs = list(serialize_blob("a", np.full(10, 7.0), chunk_size=4)) + list(serialize_blob("b", np.full(5, 9)))
    with open_db(db_type, str(tmp_path / "bad"), Mode.NEW) as db:
        for k, v in recs[:-2] + recs[-1:]:  # chunk a#%2 is missing
            with db.new_transaction() as txn:
                txn.put(k, v)
    before = {n: (ws.get_blob(n)._obj, ws.fetch_blob(n)) for n in ws.blobs()}
    with pytest.raises(OperatorError, match="Data size mismatch for blob a"):
        run(ws, "Load", [], ["a", "b"], db="bad", db_type=db_type)
    for n, (obj, val) in before.items():
        assert ws.get_blob(n)._obj is obj
        np.testing.assert_array_equal(ws.fetch_blob(n), val)
    with pytest.raises(FrameworkError, match="Data size mismatch"):
        checkpoint.load(ws, "bad", db_type=db_type)
    assert ws.get_blob("a")._obj is before["a"][0] and sorted(ws.blobs()) == ["a", "b"]


def test_damaged_minidb_is_a_clear_error(tmp_path):
    ws = Workspace(root_folder=str(tmp_path))
    ws.feed_blob("a", np.arange(100.0))
    ws.feed_blob("b", np.arange(100.0))
    checkpoint.save(ws, "c.minidb", manifest=False)  # record indices as the Save op writes them
    path = tmp_path / "c.minidb"
    data = path.read_bytes()
    path.write_bytes(data[:-10])
    ws2 = Workspace(root_folder=str(tmp_path))
    with pytest.raises(FrameworkError, match=r"c\.minidb: record 1 at byte offset \d+"):
        checkpoint.load(ws2, "c.minidb")
    assert ws2.blobs() == []
    flipped = bytearray(data)
    flipped[30] ^= 0xFF  # inside record 0's BlobProto
    path.write_bytes(bytes(flipped))
    with pytest.raises(FrameworkError, match=r"c\.minidb, record 0 key 'a#%0'"):
        checkpoint.load(ws2, "c.minidb")
    path.write_bytes(b"PK\x03\x04 definitely a zip file")
    with pytest.raises(FrameworkError, match=r"c\.minidb"):
        checkpoint.load(ws2, "c.minidb")
    assert ws2.blobs() == []


def test_dbexists_checkpoint_and_snapshot(tmp_path):
    ws = Workspace(root_folder=str(tmp_path))
    run(ws, "DBExists", [], ["e"], db_name="ck_00000004.minidb", db_type="minidb")
    assert ws.fetch_blob("e").dtype == np.bool_ and not ws.fetch_blob("e")
    ws.feed_blob("w", np.ones(4, np.float32))
    for it in range(6):
        ws.feed_blob("iter", np.array(it, dtype=np.int64))
        run(ws, "Checkpoint", ["iter", "w"], [], db="ck_%08d.minidb", db_type="minidb", every=2)
    assert sorted(os.listdir(tmp_path)) == ["ck_00000000.minidb", "ck_00000002.minidb", "ck_00000004.minidb"]
    run(ws, "DBExists", [], ["e"], db_name="ck_00000004.minidb", db_type="minidb")
    assert ws.fetch_blob("e")
    ws.feed_blob("iter", np.array(7, dtype=np.int64))
    run(ws, "Snapshot", ["iter", "w"], [], db=str(tmp_path / "snap_%d"), db_type="lmdb", absolute_path=1)
    assert checkpoint.list_checkpoint(tmp_path / "snap_7")[0]["name"] == "w"


def test_schemas_gradients_and_inference():
    for t in ("Save", "Load", "DBExists", "Checkpoint", "Snapshot"):
        s = get_schema(t)
        assert s.doc and s.infer is not None and s.gradient is not None
    op = CreateOperator("Load", [], ["a", "b"], db="x", db_type="minidb")
    assert infer_op(op, []) == [UNKNOWN, UNKNOWN]
    op = CreateOperator("DBExists", [], ["e"], db_name="x", db_type="minidb")
    assert infer_op(op, [])[0].shape == ()


def test_argument_errors(tmp_path):
    ws = Workspace(root_folder=str(tmp_path))
    ws.feed_blob("a", np.ones(2))
    with pytest.raises(FrameworkError, match=r"Load.*db_type is required"):
        run(ws, "Load", [], ["a"], db="x")
    with pytest.raises(FrameworkError, match="source_blob_names cannot be combined"):
        run(ws, "Load", [], ["a"], db="x", db_type="minidb", source_blob_names=["a"], load_all=1)
    with pytest.raises(FrameworkError, match="expected a DBReader"):
        run(ws, "Load", ["a"], ["b"])
    with pytest.raises(FrameworkError, match="registered DB types"):
        run(ws, "Save", ["a"], [], db="x", db_type="nosuch")
    with pytest.raises(FrameworkError, match="Checkpoint.*every must be >= 1"):
        ws.feed_blob("it", np.array(0, np.int64))
        run(ws, "Checkpoint", ["it", "a"], [], db="c%d", db_type="minidb", every=0)


def test_checkpoint_api_listing_and_manager(tmp_path):
    ws = Workspace(root_folder=str(tmp_path))
    ws.feed_blob("w", np.ones((3, 4), np.float32))
    ws.feed_blob("s", "hello")
    ws.create_blob("empty")
    assert sorted(checkpoint.save(ws, "all.minidb")) == ["s", "w"]  # the empty blob is skipped
    rows = {r["name"]: r for r in checkpoint.list_checkpoint(tmp_path / "all.minidb")}
    assert rows["w"]["dtype"] == "float32" and rows["w"]["shape"] == (3, 4) and rows["w"]["bytes"] == 48
    assert rows["s"]["bytes"] == 5
    ws2 = Workspace(root_folder=str(tmp_path))
    with pytest.raises(FrameworkError, match="failed to load nope"):
        checkpoint.load(ws2, "all.minidb", blobs=["w", "nope"])
    assert checkpoint.load(ws2, "all.minidb", blobs=["w", "nope"], strict=False) == ["w"]
    mgr = checkpoint.CheckpointManager(tmp_path / "ckpts", keep=2)
    assert mgr.load_latest(ws2) is None
    for it in (10, 20, 30):
        ws.feed_blob("w", np.full((3, 4), it, np.float32))
        mgr.save(ws, it, ["w"])
    assert mgr.iterations() == [20, 30]
    assert mgr.load_latest(ws2) == 30 and ws2.fetch_blob("w")[0, 0] == 30


def test_load_from_dbreader_inputs(tmp_path):
    ws = Workspace(root_folder=str(tmp_path))
    ws.feed_blob("w", np.arange(3.0))
    run(ws, "Save", ["w"], [], db=str(tmp_path / "r.minidb"), db_type="minidb", absolute_path=1)
    run(ws, "CreateDB", [], ["reader"], db=str(tmp_path / "r.minidb"), db_type="minidb")
    ws2 = ws
    ws2.feed_blob("w", np.zeros(1))
    run(ws2, "Load", ["reader"], ["w"])
    assert ws2.fetch_blob("w").tolist() == [0.0, 1.0, 2.0]
    assert isinstance(ws2.get_blob("w")._obj, Tensor)


def test_reads_a_file_laid_out_as_caffe2_writes_it(tmp_path):
    """Typed fields, no storage_type, chunk keys and std::string blobs; records packed with struct by hand."""
    import struct

    from framework.proto.framework_pb2 import BlobProto, TensorProto

    def record(key, proto):
        value = proto.SerializeToString()
        return struct.pack("<i", len(key)) + struct.pack("<i", len(value)) + key.encode() + value

    w0 = BlobProto(name="w", type="Tensor")
    w0.tensor.MergeFrom(TensorProto(name="w", dims=[2, 2], data_type=TensorProto.FLOAT, float_data=[1, 2]))
    w0.tensor.segment.begin, w0.tensor.segment.end = 0, 2
    w1 = BlobProto(name="w", type="Tensor")
    w1.tensor.MergeFrom(TensorProto(name="w", dims=[2, 2], data_type=TensorProto.FLOAT, float_data=[3, 4]))
    w1.tensor.segment.begin, w1.tensor.segment.end = 2, 4
    m = BlobProto(name="m", type="Tensor")
    m.tensor.MergeFrom(TensorProto(name="m", dims=[3], data_type=TensorProto.BOOL, int32_data=[1, 0, 1]))
    m.tensor.segment.begin, m.tensor.segment.end = 0, 3
    s = BlobProto(name="s", type="std::string", content=b"caffe2")
    (tmp_path / "c2.minidb").write_bytes(record("w#%1", w1) + record("m#%0", m) + record("s", s) + record("w#%0", w0))
    ws = Workspace(root_folder=str(tmp_path))
    run(ws, "Load", [], ["w", "m", "s"], db="c2.minidb", db_type="minidb")
    assert ws.fetch_blob("w").tolist() == [[1, 2], [3, 4]] and ws.fetch_blob("w").dtype == np.float32
    assert ws.fetch_blob("m").tolist() == [True, False, True] and ws.fetch_blob("s") == b"caffe2"


@pytest.mark.parametrize("db_type", BACKENDS)
def test_manifest_detects_files_cut_between_records(tmp_path, db_type):
    import struct

    from framework.db.blobs import MANIFEST_KEY

    ws = Workspace(root_folder=str(tmp_path))
    ws.feed_blob("a", np.arange(10.0))
    ws.feed_blob("b", np.arange(3))
    ws.feed_blob("s", "text")
    checkpoint.save(ws, "m", db_type=db_type, chunk_size=4)
    with open_db(db_type, str(tmp_path / "m")) as db:
        cur = db.cursor()
        records = list(cur)
        cur.close()
    assert MANIFEST_KEY in dict(records) and len(records) == 1 + 3 + 1 + 1 + 1  # + the checksums record
    assert sorted(r["name"] for r in checkpoint.list_checkpoint(tmp_path / "m")) == ["a", "b", "s"]
    # Caffe2-style load_all and the Load op skip the manifest record
    ws2 = Workspace(root_folder=str(tmp_path))
    run(ws2, "Load", [], [], db="m", db_type=db_type, load_all=1)
    assert sorted(ws2.blobs()) == ["a", "b", "s"]
    if db_type != "minidb":
        return
    # a minidb cut exactly after any record (except the last) is an error, never fewer blobs
    data = (tmp_path / "m").read_bytes()
    ends, pos = [], 0
    while pos < len(data):
        klen, vlen = struct.unpack_from("<ii", data, pos)
        pos += 8 + klen + vlen
        ends.append(pos)
    for cut in ends[:-1]:
        (tmp_path / "cut").write_bytes(data[:cut])
        ws3 = Workspace(root_folder=str(tmp_path))
        with pytest.raises(FrameworkError, match=r"cut: the file is truncated or damaged|Data size mismatch"):
            checkpoint.load(ws3, "cut")
        assert ws3.blobs() == []
