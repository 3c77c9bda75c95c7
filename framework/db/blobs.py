"""Blobs to DBs and back: the one implementation behind the Save/Load operators and
``framework.checkpoint``.

``write_blobs`` serializes blobs (tensors chunked into ``name#%k`` records) into a
DB opened in NEW mode, one transaction per record as Caffe2 does; the DB becomes
visible atomically when it is closed, and nothing is published on error.

``read_blobs`` follows Caffe2's Load algorithm (reference/caffe2.md §4): walk
every record of every DB, cut the key at the first ``#%``, strip then add the
prefixes, skip unwanted keys, refuse a key found in two DBs, and reassemble the
chunks (in any order) into **staging** blobs. Only when every wanted blob is
complete are they returned; the caller commits them into the workspace. So a
failed load never leaves a blob half-written.
"""

from __future__ import annotations

import os
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from framework.db.base import Mode, open_db
from framework.errors import DBError, FrameworkError, SerializationError
from framework.memory.blob import Blob
from framework.memory.serialize import (
    STRING_TYPE,
    TENSOR_TYPE,
    ChunkAssembler,
    blob_name_of_key,
    parse_blob_proto,
    proto_elements,
    record_keys,
    serialize_blob,
)
from framework.memory.typemeta import TypeMeta
from framework.proto.framework_pb2 import BlobProto

# First record of a checkpoint written with ``manifest=True``: a std::string blob listing every
# record key that follows, so a file cut short (even exactly between records) is detected.
# Caffe2-style special key ("!!" as predictor_consts); Caffe2's Load skips it unless load_all.
MANIFEST_KEY = "!!FRAMEWORK_CHECKPOINT_MANIFEST"
# Written last by checkpoints with a manifest: "<16 hex digits> <key>" per record, the record's
# checksum (record_checksum). Caffe2's readers ignore it (a string blob under a reserved name).
CHECKSUM_KEY = "!!FRAMEWORK_CHECKPOINT_CHECKSUMS"
RESERVED_KEYS = (MANIFEST_KEY, CHECKSUM_KEY)


def record_checksum(value: bytes) -> int:
    """The sum, modulo 2**64, of the record's bytes read as little-endian uint64 words (zero padded),
    plus its length: any flipped bit changes it, and numpy computes it at several GB/s."""
    n = len(value)
    whole = n - n % 8
    total = int(np.frombuffer(value, dtype="<u8", count=whole // 8).sum(dtype=np.uint64)) if whole else 0
    if n % 8:
        total += int.from_bytes(bytes(value[whole:]) + b"\0" * (8 - n % 8), "little")
    return (total + n) & 0xFFFFFFFFFFFFFFFF


def strip_prefix_of(name: str, prefix: str) -> str:
    """Drop everything up to and including the first ``prefix`` in ``name`` (unchanged if absent)."""
    if not prefix:
        return name
    i = name.find(prefix)
    return name if i < 0 else name[i + len(prefix) :]


def save_keys(names: Sequence[str], strip_prefix: str = "", overrides: Sequence[str] = ()) -> list[str]:
    """The DB key names Save uses for ``names`` (overrides, else stripped names); duplicates are an error."""
    if overrides:
        if strip_prefix:
            raise DBError("blob_name_overrides cannot be combined with strip_prefix")
        if len(overrides) != len(names):
            raise DBError(f"blob_name_overrides has {len(overrides)} names for {len(names)} blobs")
        keys = list(overrides)
    else:
        keys = [strip_prefix_of(n, strip_prefix) for n in names]
    seen: set[str] = set()
    for k in keys:
        if not k:
            raise DBError("an empty blob name cannot be saved")
        if k in RESERVED_KEYS:
            raise DBError(f"'{k}' is reserved for the checkpoint manifest; save that blob under another name")
        if k in seen:
            raise DBError(f"two blobs would be saved under the same name '{k}'")
        seen.add(k)
    return keys


def write_blobs(
    db_type: str,
    path: str,
    items: Iterable[tuple[str, Any]],
    chunk_size: int | None = None,
    typed: bool = False,
    manifest: bool = False,
) -> int:
    """Write ``(key_name, blob_or_object)`` pairs into a NEW DB; returns the number of records.

    ``chunk_size``: elements per chunk (None or -1: the default; 0: no chunking).
    ``manifest``: first write a record listing every key, which ``read_blobs``
    checks (the Save op leaves it out, to write exactly what Caffe2 writes).
    It is left out when a key contains a newline. The name ``MANIFEST_KEY`` is
    reserved: saving a blob under it is an error.
    """
    n = 0
    items = list(items)
    protodb = _is_protodb(db_type)
    manifest = manifest and not protodb  # a protodb holds tensors only (see _ProtoDBRecords)
    for name, _ in items:
        if name in RESERVED_KEYS:
            raise DBError(f"'{name}' is reserved for the checkpoint manifest; save that blob under another name")
    keys = [k for name, obj in items for k in record_keys(name, obj, chunk_size)] if manifest else []
    # The manifest is one key per line: a key holding a newline cannot be listed, so such a file goes without.
    manifest = manifest and not any("\n" in k for k in keys)
    if manifest:
        keys.append(CHECKSUM_KEY)  # listed, so that readers know to read on to the checksums
    with open_db(db_type, path, Mode.NEW) as db:
        if manifest:
            content = "\n".join(keys).encode("utf-8", "surrogateescape")
            proto = BlobProto(name=MANIFEST_KEY, type=STRING_TYPE, content=content)
            with db.new_transaction() as txn:
                txn.put(MANIFEST_KEY, proto.SerializeToString())
        sums = []
        for name, obj in items:
            for key, value in serialize_blob(name, obj, chunk_size, typed):
                if manifest:
                    sums.append(f"{record_checksum(value):016x} {key}")
                txn = db.new_transaction()
                txn.put(key, _tensor_record(key, value) if protodb else value)
                txn.commit()
                n += 1
        if manifest:
            proto = BlobProto(
                name=CHECKSUM_KEY, type=STRING_TYPE, content="\n".join(sums).encode("utf-8", "surrogateescape")
            )
            with db.new_transaction() as txn:
                txn.put(CHECKSUM_KEY, proto.SerializeToString())
    return n


def source_budget(sources: Sequence[tuple[str, str]]) -> int:
    """Bytes of tensor data DBs of this size can justify: 8 per byte on disk (an int64 packed as a
    one-byte varint is the densest encoding) plus 1 MiB; a missing path counts as empty."""
    total = 0
    for _, path in sources:
        try:
            if os.path.isdir(path):
                for dirpath, _, files in os.walk(path):
                    total += sum(os.path.getsize(os.path.join(dirpath, f)) for f in files)
            else:
                total += os.path.getsize(path)
        except OSError:
            pass
    return 8 * total + (1 << 20)


def read_blobs(
    sources: Sequence[tuple[str, str]],
    wanted: Mapping[str, str] | None = None,
    *,
    strip_prefix: str = "",
    add_prefix: str = "",
    allow_incomplete: bool = False,
) -> dict[str, Blob]:
    """Load blobs from DBs into staging blobs, Caffe2's Load algorithm.

    ``sources``: ``(db_type, path)`` pairs. ``wanted`` maps a derived key
    (``add_prefix + strip(db key cut at '#%')``) to the name the blob gets;
    None loads every key under its own name (``load_all``). Returns
    ``{name: Blob}`` of complete blobs. Raises DBError/SerializationError naming
    the file and record for damage, a key found in two DBs, incomplete chunked
    blobs ("Data size mismatch"), and, unless ``allow_incomplete``, wanted blobs
    the DBs do not hold (listing what they hold).
    """
    asm = ChunkAssembler(budget=source_budget(sources))
    staged: dict[str, Blob] = {}
    key_source: dict[str, int] = {}
    held: list[str] = []
    held_set: set[str] = set()
    where = ", ".join(f"{t} {p}" for t, p in sources)
    for src_index, (db_type, path) in enumerate(sources):
        single = len(sources) == 1 and wanted is not None
        with open_db(db_type, path, Mode.READ) as db:
            cursor = _ProtoDBRecords(db.cursor()) if _is_protodb(db_type) else db.cursor()
            try:
                index = 0
                expected: set[str] | None = None
                seen_keys: set[str] = set()  # the manifest may come anywhere (lmdb sorts keys)
                sums: dict[str, int] | None = None
                computed: dict[str, tuple[int, str]] = {}
                complete_walk = True
                while cursor.valid():
                    db_key = cursor.key()
                    if db_key == MANIFEST_KEY:
                        expected = _manifest_keys(cursor.value(), f"{db_type} {path}, record {index}")
                        cursor.next()
                        index += 1
                        continue
                    if db_key == CHECKSUM_KEY:
                        sums = _checksums(cursor.value(), f"{db_type} {path}, record {index}")
                        seen_keys.add(db_key)
                        cursor.next()
                        index += 1
                        continue
                    seen_keys.add(db_key)
                    base = blob_name_of_key(db_key)
                    key = add_prefix + strip_prefix_of(base, strip_prefix)
                    if key not in held_set:
                        held_set.add(key)
                        held.append(key)
                    target = key if wanted is None else wanted.get(key)
                    if target is not None:
                        first = key_source.setdefault(key, src_index)
                        if first != src_index:
                            raise DBError(
                                f"Duplicate Key {key} is found: in {sources[first][0]} {sources[first][1]} "
                                f"and in {db_type} {path}"
                            )
                        label = f"{db_type} {path}, record {index} key '{db_key}'"
                        value = cursor.value()
                        computed[db_key] = (record_checksum(value), target)
                        proto = parse_blob_proto(value, f"in {label}")
                        blob = staged.get(target)
                        if blob is None:
                            blob = staged[target] = Blob(target)
                        try:
                            asm.add(target, proto, blob, label)
                        except FrameworkError as e:
                            if label in str(e):
                                raise
                            raise SerializationError(f"{label}: {e}") from e
                        sums_pending = expected is not None and CHECKSUM_KEY in expected and sums is None
                        if (
                            single
                            and not sums_pending
                            and len(staged) == len(wanted)
                            and all(asm.is_complete(n) for n in staged)
                        ):
                            complete_walk = False
                            break
                    cursor.next()
                    index += 1
                if complete_walk:
                    check_manifest(expected, seen_keys, db_type, path, index)
                check_checksums(sums, computed, db_type, path)
            finally:
                cursor.close()
    asm.check_complete(where)
    if wanted is not None and not allow_incomplete:
        missing = [name for key, name in wanted.items() if name not in staged]
        if missing:
            raise DBError(
                f"Expected to load {len(wanted)} blobs, got {len(wanted) - len(missing)} only: "
                f"failed to load {', '.join(missing)} from {where}; it holds {len(held)} blobs: "
                f"{', '.join(held) if len(held) <= 50 else ', '.join(held[:50]) + ', ...'}"
            )
    return staged


def check_manifest(expected: set[str] | None, seen: set[str], db_type: str, path: str, records: int) -> None:
    """A DBError if the manifest (when there is one) lists records the DB does not hold."""
    if expected is None or not expected - seen:
        return
    missing = sorted(expected - seen)
    raise DBError(
        f"{db_type} {path}: the file is truncated or damaged: after {records} records, "
        f"{len(missing)} records its manifest lists are missing "
        f"({', '.join(missing[:5])}{', ...' if len(missing) > 5 else ''})"
    )


def check_checksums(sums: dict[str, int] | None, computed: dict[str, tuple[int, str]], db_type: str, path: str) -> None:
    """A DBError naming the blob when a record read does not match the checksum the file lists, or has
    none in a file that lists them (every record written with checksums gets one: a record without is
    a damaged key, e.g. the manifest's own key with a flipped bit, which would otherwise load as a blob)."""
    if not sums:
        return
    for key, (value, blob) in computed.items():
        want = sums.get(key)
        if want is None:
            raise DBError(
                f"{db_type} {path}: record '{key}' (blob '{blob}') has no checksum in a file that lists them: "
                "the file is damaged (a flipped bit in a key?)"
            )
        if want != value:
            raise DBError(
                f"{db_type} {path}: record '{key}' of blob '{blob}' fails its checksum "
                f"(stored {want:016x}, read {value:016x}): the file is damaged (flipped bits?)"
            )


def _checksums(value: bytes, where: str) -> dict[str, int]:
    proto = parse_blob_proto(value, f"in {where} (the checksums)")
    text = bytes(proto.content).decode("utf-8", "surrogateescape")
    out: dict[str, int] = {}
    for line in text.split("\n") if text else ():
        try:
            out[line[17:]] = int(line[:16], 16)
        except ValueError:
            raise DBError(f"{where}: the checksum list is damaged (line {line[:40]!r})") from None
    return out


def _manifest_keys(value: bytes, where: str) -> set[str]:
    proto = parse_blob_proto(value, f"in {where} (the manifest)")
    text = bytes(proto.content).decode("utf-8", "surrogateescape")
    return set(text.split("\n")) if text else set()


def list_blobs(db_type: str, path: str) -> list[dict[str, Any]]:
    """One row per blob of a DB: name, dtype, shape, bytes (from record headers, data not decoded)."""
    rows: dict[str, dict[str, Any]] = {}
    with open_db(db_type, path, Mode.READ) as db:
        cursor = _ProtoDBRecords(db.cursor()) if _is_protodb(db_type) else db.cursor()
        try:
            index = 0
            expected: set[str] | None = None
            seen: set[str] = set()
            for db_key, value in cursor:
                if db_key == MANIFEST_KEY:
                    expected = _manifest_keys(value, f"{db_type} {path}, record {index}")
                    index += 1
                    continue
                if db_key == CHECKSUM_KEY:
                    seen.add(db_key)
                    index += 1
                    continue
                seen.add(db_key)
                name = blob_name_of_key(db_key)
                proto = parse_blob_proto(value, f"in {db_type} {path}, record {index} key '{db_key}'")
                row = rows.get(name)
                if row is None:
                    row = rows[name] = {"name": name, "dtype": "", "shape": (), "bytes": 0, "type": proto.type}
                    if proto.HasField("tensor"):
                        try:
                            meta = TypeMeta.from_proto(proto.tensor.data_type)
                            row["dtype"] = meta.dtype.name if meta.is_pod else "string"
                        except FrameworkError:
                            row["dtype"] = f"type{proto.tensor.data_type}"
                        row["shape"] = tuple(proto.tensor.dims)
                    else:
                        row["dtype"] = proto.type
                row["bytes"] += _payload_bytes(proto)
                index += 1
            check_manifest(expected, seen, db_type, path, index)
        finally:
            cursor.close()
    return list(rows.values())


def _payload_bytes(proto: Any) -> int:
    if not proto.HasField("tensor"):
        return len(proto.content)
    t = proto.tensor
    if t.raw_data:
        return len(t.raw_data)
    try:
        meta, vals = proto_elements(t)
    except FrameworkError:
        return 0
    if vals is None:  # NO_CONTENT: shape only
        return 0
    if meta.is_pod:
        return vals.size * meta.itemsize
    return sum(len(x) for x in t.string_data)


def _is_protodb(db_type: str) -> bool:
    return db_type in ("protodb", "ProtoDB")


def _tensor_record(key: str, value: bytes) -> bytes:
    """A serialized blob record as a protodb record: its TensorProto, named by the key (Caffe2's protodb
    keys are tensor names and its values TensorProtos). Only tensors fit a protodb."""
    from framework.proto.framework_pb2 import TensorProto

    proto = parse_blob_proto(value, f"protodb record '{key}'")
    if not proto.HasField("tensor"):
        raise DBError(
            f"protodb: blob '{proto.name or key}' ({proto.type or 'unknown type'}) is not a tensor; a protodb holds "
            "tensors only (save it to minidb, lmdb, leveldb or rocksdb)"
        )
    tensor = TensorProto()
    tensor.CopyFrom(proto.tensor)
    tensor.name = key
    return tensor.SerializeToString()


class _ProtoDBRecords:
    """A protodb cursor whose values read as the blob records checkpoints write (BlobProto of a tensor)."""

    def __init__(self, cursor: Any) -> None:
        self._cursor = cursor

    def valid(self) -> bool:
        return self._cursor.valid()

    def next(self) -> None:
        self._cursor.next()

    def key(self) -> str:
        return self._cursor.key()

    def value(self) -> bytes:
        from framework.proto.framework_pb2 import TensorProto

        tensor = TensorProto()
        tensor.ParseFromString(self._cursor.value())
        key = self._cursor.key()
        tensor.ClearField("name")
        return BlobProto(name=blob_name_of_key(key), type=TENSOR_TYPE, tensor=tensor).SerializeToString()

    def __iter__(self):
        while self.valid():
            yield self.key(), self.value()
            self.next()

    def close(self) -> None:
        self._cursor.close()
