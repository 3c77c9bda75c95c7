"""The same contract for every DB backend, plus minidb's byte layout and damage handling."""

import os
import struct

import pytest

from framework.db import Mode, db_exists, db_types, detect_db_type, open_db
from framework.db.minidb import encode_record
from framework.errors import DBError
from framework.proto import framework_pb2 as pb

BACKENDS = ["minidb", "lmdb", "leveldb", "rocksdb", "protodb"]
ALIASES = [
    ("minidb", "MiniDB"),
    ("lmdb", "LMDB"),
    ("leveldb", "LevelDB"),
    ("rocksdb", "RocksDB"),
    ("protodb", "ProtoDB"),
]


def encode(db_type, key, payload):
    """protodb records are TensorProtos named by their key: wrap the payload in one."""
    if db_type != "protodb":
        return payload
    t = pb.TensorProto(name=key, data_type=pb.TensorProto.STRING)
    t.string_data.append(payload)
    return t.SerializeToString()


def decode(db_type, key, value):
    if db_type != "protodb":
        return value
    t = pb.TensorProto()
    t.ParseFromString(value)
    assert t.name == key
    return t.string_data[0]


def db_path(tmp_path, db_type, name="db"):
    return str(tmp_path / f"{name}.{db_type}")


def write(db_type, path, records, mode=Mode.NEW, per_txn=2):
    with open_db(db_type, path, mode) as db:
        for i in range(0, len(records), per_txn):
            txn = db.new_transaction()
            for k, v in records[i : i + per_txn]:
                txn.put(k, encode(db_type, k, v))
            txn.commit()


def read(db_type, path):
    with open_db(db_type, path, "read") as db:
        cur = db.cursor()
        out = [(k, decode(db_type, k, v)) for k, v in cur]
        cur.close()
        return out


@pytest.mark.parametrize("db_type, alias", ALIASES)
def test_registered_under_both_names(db_type, alias):
    assert db_type in db_types() and alias in db_types()


@pytest.mark.parametrize("db_type", BACKENDS)
def test_write_then_read_in_order(tmp_path, db_type):
    path = db_path(tmp_path, db_type)
    assert not db_exists(db_type, path)
    records = [(f"k{i:03d}", bytes([i % 256]) * (i + 1)) for i in range(20)]
    write(db_type, path, records)
    assert db_exists(db_type, path)
    assert read(db_type, path) == records  # sorted keys: file order == key order here
    assert detect_db_type(path) == db_type


@pytest.mark.parametrize("db_type", BACKENDS)
def test_cursor_rewinds_and_reports_end(tmp_path, db_type):
    path = db_path(tmp_path, db_type)
    write(db_type, path, [("a", b"1"), ("b", b"2")])
    with open_db(db_type, path, Mode.READ) as db:
        cur = db.cursor()
        assert cur.valid() and cur.key() == "a" and decode(db_type, "a", cur.value()) == b"1"
        cur.next()
        cur.next()
        assert not cur.valid()
        with pytest.raises(DBError, match="past the last record"):
            cur.key()
        cur.seek_to_first()
        assert cur.key() == "a"
        cur.close()


@pytest.mark.parametrize("db_type", BACKENDS)
def test_new_replaces_write_appends(tmp_path, db_type):
    path = db_path(tmp_path, db_type)
    write(db_type, path, [("a", b"1"), ("b", b"2")])
    write(db_type, path, [("c", b"3")], mode=Mode.WRITE)
    assert read(db_type, path) == [("a", b"1"), ("b", b"2"), ("c", b"3")]
    write(db_type, path, [("z", b"9")], mode=Mode.NEW)
    assert read(db_type, path) == [("z", b"9")]


@pytest.mark.parametrize("db_type", BACKENDS)
def test_nothing_visible_before_close_and_abort_keeps_old(tmp_path, db_type):
    path = db_path(tmp_path, db_type)
    write(db_type, path, [("old", b"1")])
    db = open_db(db_type, path, Mode.NEW)
    with db.new_transaction() as txn:
        txn.put("new", encode(db_type, "new", b"2"))
    assert read(db_type, path) == [("old", b"1")]
    db.abort()
    assert read(db_type, path) == [("old", b"1")]
    with pytest.raises(RuntimeError):
        with open_db(db_type, path, Mode.NEW) as db:
            db.new_transaction().put("x", encode(db_type, "x", b"y"))
            raise RuntimeError("boom")
    assert read(db_type, path) == [("old", b"1")]
    assert sorted(os.listdir(tmp_path)) == [os.path.basename(path)]  # no temporaries left behind


@pytest.mark.parametrize("db_type", BACKENDS)
def test_large_values_and_binary_keys(tmp_path, db_type):
    path = db_path(tmp_path, db_type)
    big = os.urandom(3 << 20)
    records = [("blob#%0", big), ("caf\u00e9", b"x"), (b"\xff\xfe".decode("utf-8", "surrogateescape"), b"raw")]
    if db_type == "protodb":  # its keys are TensorProto names: UTF-8 text
        records = records[:2]
    write(db_type, path, records)
    got = dict(read(db_type, path))
    assert got == dict(records)


@pytest.mark.parametrize("db_type", BACKENDS)
def test_mode_errors_and_missing(tmp_path, db_type):
    path = db_path(tmp_path, db_type)
    with pytest.raises(DBError, match="no "):
        open_db(db_type, path, Mode.READ)
    write(db_type, path, [("a", b"1")])
    with open_db(db_type, path, Mode.READ) as db:
        with pytest.raises(DBError, match="opened for read"):
            db.new_transaction()
    with pytest.raises(DBError):
        write(db_type, path, [("", b"1")])
    with pytest.raises(DBError, match="unknown DB mode"):
        open_db(db_type, path, "sideways")


def test_unknown_and_unavailable_types(tmp_path):
    with pytest.raises(DBError, match="registered DB types: .*minidb"):
        open_db("nosuchdb", str(tmp_path / "x"))
    with pytest.raises(DBError, match="zmqdb .*not available.*leveldb"):
        open_db("zmqdb", str(tmp_path / "x"))


@pytest.mark.parametrize("db_type, module", [("lmdb", "lmdb"), ("leveldb", "plyvel"), ("rocksdb", "rocksdict")])
def test_missing_package_names_the_extra(monkeypatch, tmp_path, db_type, module):
    import builtins
    import sys

    real_import = builtins.__import__

    def fake_import(name, *args, **kwargs):
        if name == module:
            raise ImportError(f"No module named {module!r}")
        return real_import(name, *args, **kwargs)

    monkeypatch.delitem(sys.modules, module, raising=False)
    monkeypatch.setattr(builtins, "__import__", fake_import)
    with pytest.raises(DBError, match=rf"pip install framework\[{db_type}\]"):
        open_db(db_type, str(tmp_path / "x"), Mode.NEW)


def test_lmdb_map_grows(tmp_path):
    path = db_path(tmp_path, "lmdb")
    payload = os.urandom(1 << 20)
    records = [(f"k{i:03d}", payload) for i in range(100)]  # 100 MiB > the 64 MiB initial map
    write("lmdb", path, records, per_txn=10)
    write("lmdb", path, records[:5], mode=Mode.WRITE)
    got = read("lmdb", path)
    assert len(got) == 100 and all(v == payload for _, v in got)


def test_minidb_byte_layout_matches_the_format(tmp_path):
    path = db_path(tmp_path, "minidb")
    write("minidb", path, [("w#%0", b"\x00\x01\x02"), ("name", b"value!")])
    expected = (
        struct.pack("<i", 4) + struct.pack("<i", 3) + b"w#%0" + b"\x00\x01\x02"
        + struct.pack("<i", 4) + struct.pack("<i", 6) + b"name" + b"value!"
    )  # fmt: skip
    with open(path, "rb") as f:
        assert f.read() == expected
    # and a file laid out by hand (as Caffe2 writes it) reads back
    other = tmp_path / "caffe2.minidb"
    other.write_bytes(expected)
    assert read("minidb", str(other)) == [("w#%0", b"\x00\x01\x02"), ("name", b"value!")]
    assert encode_record("name", b"value!") == expected[15:]


@pytest.mark.parametrize(
    "damage, message",
    [
        (lambda b: b[:-1], "only 9 remain"),
        (lambda b: b[:17], "only 2 bytes left"),
        (lambda b: b + b"\x00" * 8, "must both be > 0"),
        (lambda b: b[:15] + struct.pack("<ii", -1, 5) + b[23:], "must both be > 0"),
    ],
)
def test_minidb_damage_names_file_and_record(tmp_path, damage, message):
    path = db_path(tmp_path, "minidb")
    write("minidb", path, [("w#%0", b"\x00\x01\x02"), ("name", b"value!")])
    with open(path, "rb") as f:
        data = f.read()
    with open(path, "wb") as f:
        f.write(damage(data))
    with pytest.raises(DBError, match=rf"minidb .*db\.minidb: record \d at byte offset \d+: .*{message}"):
        read("minidb", path)


def test_minidb_cleans_stale_temporaries(tmp_path):
    path = db_path(tmp_path, "minidb")
    stale = tmp_path / ".db.minidb.tmp-999999999-abcd"
    stale.write_bytes(b"half a checkpoint")
    write("minidb", path, [("a", b"1")])
    assert not stale.exists()
