"""What a DB holds (``framework inspect DB``) and ``framework convert-db SRC DST --to KIND``.

Every DB kind opens here (minidb, lmdb, leveldb, rocksdb, protodb). A record is
described by what it parses as, tried in this order: a checkpoint's BlobProto
(Save/``checkpoint.save``), a data set's TensorProtos (``make-db``, Caffe2's
data DBs), a protodb TensorProto, a Caffe1 Datum; anything else is shown as
bytes. Checkpoints are listed blob by blob (``inspect_checkpoint``).
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from framework.cli.common import CLIError
from framework.db import Mode, db_exists, detect_db_type, open_db
from framework.db.blobs import RESERVED_KEYS
from framework.db.datum import parse_datum
from framework.db.sorted_kv import table_bytes
from framework.errors import FrameworkError
from framework.proto import framework_pb2 as pb

KINDS = ["minidb", "lmdb", "leveldb", "rocksdb", "protodb"]

# What each format itself can detect when its bytes are damaged (docs/reliability.md has the table).
INTEGRITY = {
    "minidb": "no checksum of its own; checkpoints saved by framework carry a per-record checksum record "
    "(verified on load); data DBs and Caffe2-written files have none: a flipped bit in a value goes undetected",
    "lmdb": "no checksum (LMDB has none): damaged page structure is detected, a flipped bit in a value is not "
    "(unless the framework checkpoint checksum record is there)",
    "leveldb": "CRC32C per log record and table block, verified on every read",
    "rocksdb": "CRC32C per log record and table block, verified on every read",
    "protodb": "no checksum: a damaged protobuf is detected, a flipped bit in a value is not",
}


def integrity_line(kind: str) -> str:
    return f"integrity ({kind}): {INTEGRITY.get(kind, 'unknown format: nothing is checked')}"


SHOWN_KEYS = 5


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "convert-db",
        help="copy a DB into another kind (minidb, lmdb, leveldb, rocksdb, protodb)",
        description="Copy every record of SRC into a new DB DST of kind --to, keys and values unchanged. "
        "The copy is written atomically; an existing DST needs --overwrite.",
    )
    p.add_argument("source", help="the DB to read")
    p.add_argument("dest", help="the DB to write")
    p.add_argument("--to", required=True, choices=KINDS, help="kind of DST")
    p.add_argument("--from", dest="from_kind", choices=KINDS, help="kind of SRC (default: detected)")
    p.add_argument("--overwrite", action="store_true", help="replace DST if it exists")
    p.set_defaults(func=convert_main)


def convert_main(args: argparse.Namespace) -> int:
    if not os.path.exists(args.source):
        raise CLIError(f"file not found: {args.source}")
    src_kind = args.from_kind or detect_db_type(args.source)
    if os.path.exists(args.dest) and not args.overwrite:
        raise CLIError(f"{args.dest} exists", "pass --overwrite to replace it")
    n = 0
    with open_db(src_kind, args.source, Mode.READ) as src, open_db(args.to, args.dest, Mode.NEW) as dst:
        cursor = src.cursor()
        try:
            with dst.new_transaction() as txn:
                for key, value in cursor:
                    txn.put(key, value)
                    n += 1
            _refuse_lost_records(src_kind, args.source, n)
        finally:
            cursor.close()
    print(f"copied {n} records from {src_kind} {args.source} to {args.to} {args.dest}")
    return 0


def is_db(path: str) -> bool:
    """Whether ``path`` is a DB folder of a known kind, or a file named as a DB."""
    if os.path.isdir(path):
        return any(db_exists(k, path) for k in ("lmdb", "leveldb", "rocksdb"))
    return os.path.splitext(path)[1].lower() in (".minidb", ".db", ".lmdb", ".ckpt", ".protodb", ".leveldb")


def inspect_db(path: str, db_type: str | None = None) -> int:
    """Print the kind, record count, first keys and first record of the DB at ``path``."""
    kind = db_type or detect_db_type(path)
    keys: list[str] = []
    first: tuple[str, bytes] | None = None
    count = 0
    with open_db(kind, path, Mode.READ) as db:
        cursor = db.cursor()
        try:
            for key, value in cursor:
                count += 1
                if len(keys) < SHOWN_KEYS:
                    keys.append(key)
                if first is None and key not in RESERVED_KEYS:
                    first = (key, value)
            _refuse_lost_records(kind, path, count)
        finally:
            cursor.close()
    what, lines = describe_record(*first) if first else ("empty", [])
    if what == "checkpoint":
        from framework.cli.inspect import inspect_checkpoint

        return inspect_checkpoint(path)
    print(f"{kind} DB {path}: {count} records of {what}")
    print(integrity_line(kind))
    more = f" ... ({count - len(keys)} more)" if count > len(keys) else ""
    print("keys: " + ", ".join(repr(k) for k in keys) + more)
    if first:
        print(f"first record {first[0]!r}:")
        for line in lines:
            print("  " + line)
    return 0


def _refuse_lost_records(kind: str, path: str, count: int) -> None:
    """A LevelDB/RocksDB folder that reads as 0 records while its table/log files hold data is damaged
    (its MANIFEST lost track of them): an error, not "0 records" (a NEW DST is then not written)."""
    if count or kind not in ("leveldb", "rocksdb"):
        return
    held = table_bytes(path)
    if held:
        raise CLIError(
            f"{kind} {path} reads as 0 records but its table and log files hold {held:,} bytes: the DB is damaged "
            "(its MANIFEST or log lost its records), or every record was deleted and not yet compacted",
            "restore it from a copy; nothing was written",
        )


def describe_record(key: str, value: bytes) -> tuple[str, list[str]]:
    """(what the record is, lines describing its content)."""
    blob = _parse(pb.BlobProto, value)
    if blob is not None and blob.name and (blob.HasField("tensor") or blob.HasField("content")):
        return "checkpoint", []
    protos = _parse(pb.TensorProtos, value)
    if protos is not None and len(protos.protos) and all(_plausible(t) for t in protos.protos):
        return "TensorProtos", [_tensor_line(i, t) for i, t in enumerate(protos.protos)]
    tensor = _parse(pb.TensorProto, value)
    if tensor is not None and tensor.name == key and _plausible(tensor):
        return "TensorProto", [_tensor_line(0, tensor)]
    try:
        d = parse_datum(value)
    except FrameworkError:
        d = None
    if d is not None and (d.encoded or (d.channels > 0 and d.height > 0 and d.width > 0)):
        body = f"encoded image, {len(d.data)} bytes" if d.encoded else f"{d.channels}x{d.height}x{d.width}"
        return "Caffe Datum", [f"{body}, label {d.label}"]
    return "bytes", [f"{len(value)} bytes"]


def _parse(cls: Any, value: bytes) -> Any:
    msg = cls()
    try:
        msg.ParseFromString(value)
    except Exception:  # protobuf's DecodeError and friends: not this message
        return None
    return msg


def _plausible(t: Any) -> bool:
    return t.data_type in pb.TensorProto.DataType.values() and t.data_type != pb.TensorProto.UNDEFINED


def _tensor_line(i: int, t: Any) -> str:
    dtype = pb.TensorProto.DataType.Name(t.data_type).lower()
    name = f" '{t.name}'" if t.name else ""
    return f"tensor {i}{name}: {dtype} {list(t.dims)}"
