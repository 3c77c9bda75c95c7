"""DBReader: a shared, thread-safe cursor over a DB, the blob ``CreateDB`` makes.

Reading wraps around at the end of the DB. With ``num_shards`` > 1 a reader sees
only the records whose position ``i`` satisfies ``i % num_shards == shard_id``
(after each read it skips the other shards' records, and after a wrap it
starts again at record ``shard_id``), so readers with different shard ids never
return the same record.

A DBReader serializes as ``BlobProto{type="DBReader", content=DBReaderProto}``
(name, source, db_type, and the current key for DBs that can seek), as Caffe2.
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

    def __init__(self, source: str, db_type: str = "minidb", num_shards: int = 1, shard_id: int = 0, name: str = ""):
        if num_shards < 1 or not 0 <= shard_id < num_shards:
            raise DBError(f"DBReader {source}: shard_id {shard_id} must be in [0, num_shards={num_shards})")
        self.source, self.db_type, self.name = source, db_type, name
        self.num_shards, self.shard_id = num_shards, shard_id
        self._lock = threading.Lock()
        self._db = open_db(db_type, source, Mode.READ)
        self._cursor = self._db.cursor()
        self._start()

    def _start(self) -> None:
        self._cursor.seek_to_first()
        for _ in range(self.shard_id):
            if not self._cursor.valid():
                break
            self._cursor.next()

    def read(self) -> tuple[str, bytes]:
        """The next ``(key, value)`` of this reader's shard, wrapping at the end."""
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
        with self._lock:
            if self._cursor.supports_seek:
                self._cursor.seek(key)
                return
            self._cursor.seek_to_first()
            while self._cursor.valid() and self._cursor.key() != key:
                self._cursor.next()

    def current_key(self) -> str:
        with self._lock:
            return self._cursor.key() if self._cursor.valid() else ""

    def close(self) -> None:
        self._cursor.close()
        self._db.close()

    def __repr__(self) -> str:
        return f"DBReader({self.db_type} {self.source!r}, shard {self.shard_id}/{self.num_shards})"


def _serialize(reader: DBReader, name: str) -> BlobProto:
    proto = DBReaderProto(name=name, source=reader.source, db_type=reader.db_type)
    if reader._cursor.supports_seek:
        proto.key = reader.current_key()
    return BlobProto(type="DBReader", content=proto.SerializeToString())


def _deserialize(proto: BlobProto, blob: Blob) -> None:
    rp = DBReaderProto()
    try:
        rp.ParseFromString(proto.content)
    except Exception as e:
        raise SerializationError(f"DBReader blob '{proto.name}': content is not a DBReaderProto: {e}") from e
    reader = DBReader(rp.source, rp.db_type or "minidb", name=rp.name)
    if rp.key:
        reader.seek(rp.key)
    blob.reset(reader)


register_blob_serializer(DBReader, "DBReader", _serialize, _deserialize)
