"""DBReader: a shared, thread-safe cursor over a DB, the blob ``CreateDB`` makes.

Reading wraps around at the end of the DB. With ``num_shards`` > 1 a reader sees
only the records whose position ``i`` satisfies ``i % num_shards == shard_id``
(after each read it skips the other shards' records, and after a wrap it
starts again at record ``shard_id``), so readers with different shard ids never
return the same record.

A DBReader serializes as ``BlobProto{type="DBReader", content=DBReaderProto}``
(name, source, db_type, and the current key for DBs that can seek), as Caffe2.
Loading one from a checkpoint restores it as data only: its ``source`` is not
opened (a checkpoint never makes the framework open another file) until the
caller calls ``reader.open()``; reading before that is a DBError saying so.
"""

from __future__ import annotations

import threading

from framework.db.base import Mode, open_db
from framework.errors import DBError, SerializationError
from framework.memory.blob import Blob
from framework.memory.serialize import register_blob_serializer
from framework.proto.framework_pb2 import BlobProto, DBReaderProto


class DBReader:
    """A cursor over ``source`` (a DB of ``db_type``) shared by the ops that read it."""

    def __init__(
        self,
        source: str,
        db_type: str = "minidb",
        num_shards: int = 1,
        shard_id: int = 0,
        name: str = "",
        open: bool = True,
        key: str = "",
    ):
        if num_shards < 1 or not 0 <= shard_id < num_shards:
            raise DBError(f"DBReader {source}: shard_id {shard_id} must be in [0, num_shards={num_shards})")
        self.source, self.db_type, self.name = source, db_type, name
        self.num_shards, self.shard_id = num_shards, shard_id
        self._lock = threading.Lock()
        self._db = self._cursor = None
        self._saved_key = key
        if open:
            self.open()

    @property
    def is_open(self) -> bool:
        return self._cursor is not None

    def open(self) -> DBReader:
        """Open the source (a reader restored from a checkpoint starts closed); returns self."""
        if self._cursor is None:
            self._db = open_db(self.db_type, self.source, Mode.READ)
            self._cursor = self._db.cursor()
            self._start()
            if self._saved_key:
                self.seek(self._saved_key)
        return self

    def _require_open(self) -> None:
        if self._cursor is None:
            raise DBError(
                f"DBReader '{self.name}' over {self.db_type} '{self.source}' was restored from a checkpoint as "
                "data only: its source is not opened unless you call reader.open()"
            )

    def _start(self) -> None:
        self._cursor.seek_to_first()
        for _ in range(self.shard_id):
            if not self._cursor.valid():
                break
            self._cursor.next()

    def read(self) -> tuple[str, bytes]:
        """The next ``(key, value)`` of this reader's shard, wrapping at the end."""
        self._require_open()
        with self._lock:
            cur = self._cursor
            if not cur.valid():
                self._start()
                if not cur.valid():
                    shard = f" (shard {self.shard_id} of {self.num_shards})" if self.num_shards > 1 else ""
                    raise DBError(f"{self.db_type} {self.source}: no records to read{shard}")
            key, value = cur.key(), cur.value()
            for _ in range(self.num_shards):
                cur.next()
                if not cur.valid():
                    break
            return key, value

    def seek(self, key: str) -> None:
        self._require_open()
        with self._lock:
            if self._cursor.supports_seek:
                self._cursor.seek(key)
                return
            self._cursor.seek_to_first()
            while self._cursor.valid() and self._cursor.key() != key:
                self._cursor.next()

    def current_key(self) -> str:
        if self._cursor is None:
            return self._saved_key
        with self._lock:
            return self._cursor.key() if self._cursor.valid() else ""

    def close(self) -> None:
        if self._cursor is not None:
            self._cursor.close()
            self._db.close()

    def __repr__(self) -> str:
        return f"DBReader({self.db_type} {self.source!r}, shard {self.shard_id}/{self.num_shards})"


def _serialize(reader: DBReader, name: str) -> BlobProto:
    proto = DBReaderProto(name=name, source=reader.source, db_type=reader.db_type)
    if reader._cursor is None:
        if reader._saved_key:
            proto.key = reader._saved_key
    elif reader._cursor.supports_seek:
        proto.key = reader.current_key()
    return BlobProto(type="DBReader", content=proto.SerializeToString())


def _deserialize(proto: BlobProto, blob: Blob) -> None:
    rp = DBReaderProto()
    try:
        rp.ParseFromString(proto.content)
    except Exception as e:
        raise SerializationError(f"DBReader blob '{proto.name}': content is not a DBReaderProto: {e}") from e
    # Data only: a checkpoint never opens another file (reader.open() does, when the caller asks).
    blob.reset(DBReader(rp.source, rp.db_type or "minidb", name=rp.name, open=False, key=rp.key))


register_blob_serializer(DBReader, "DBReader", _serialize, _deserialize)
