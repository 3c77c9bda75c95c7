"""rocksdb: RocksDB through rocksdict in raw mode (``pip install framework[rocksdb]``).

The DB is a folder as Caffe2's ``RocksDB`` writes it; keys in bytewise order, so
a cursor can ``seek``. rocksdict runs in raw mode only: values are the bytes
stored, never unpickled. Registered as "rocksdb" and "RocksDB".

Writes follow ``sorted_kv``: one synced, atomic write batch when the DB is
closed; NEW replaces the content in that batch. Readers open the folder
read-only, so they never block a writer (another process may be saving).
"""

from __future__ import annotations

import os
from typing import Any

from framework.db.base import register_db
from framework.db.handles import SharedHandles
from framework.db.sorted_kv import SortedKVDB, import_extra
from framework.errors import DBError


def _rocksdict() -> Any:
    return import_extra("rocksdict", "rocksdb", "rocksdb", "rocksdict")


def _open(path: str, create: bool) -> Any:
    rd = _rocksdict()
    options = rd.Options(raw_mode=True)
    # Damaged tables are an error. The log recovers to the last whole batch (point in time): a save torn by
    # a crash is dropped whole, which is what keeps the previous checkpoint; a checkpoint whose only batch
    # was lost reads as empty, which checkpoint.load refuses.
    options.set_paranoid_checks(True)
    options.set_wal_recovery_mode(rd.DBRecoveryMode.point_in_time())
    try:
        if create:
            options.create_if_missing(True)
            return rd.Rdict(path, options)
        return rd.Rdict(path, options, access_type=rd.AccessType.read_only())
    except Exception as e:  # rocksdict raises plain Exception for RocksDB status errors
        raise DBError(f"rocksdb {path}: cannot open: {e}") from e


def rocksdb_exists(path: str) -> bool:
    """A RocksDB folder: ``CURRENT`` plus ``IDENTITY`` or an ``OPTIONS-*`` file."""
    if not os.path.isfile(os.path.join(path, "CURRENT")):
        return False
    return any(n == "IDENTITY" or n.startswith("OPTIONS-") for n in os.listdir(path))


class RocksDB(SortedKVDB):
    """RocksDB through rocksdict (see module doc). Registered as "rocksdb" and "RocksDB"."""

    db_type = "rocksdb"
    handles = SharedHandles(_open, lambda db: db.close(), per_mode=True)
    exists = staticmethod(rocksdb_exists)
    errors = (Exception,)  # rocksdict's errors carry no type of their own
    _library = staticmethod(_rocksdict)

    def _iterator(self, handle: Any) -> Any:
        return handle.iter()

    def _write(self, handle: Any, pending: list[tuple[bytes, bytes]], replace: bool) -> None:
        rd = _rocksdict()
        batch = rd.WriteBatch(raw_mode=True)
        if replace:
            it = handle.iter()
            it.seek_to_first()
            while it.valid():
                batch.delete(it.key())
                it.next()
        for key, value in pending:
            batch.put(key, value)
        options = rd.WriteOptions()
        options.sync = True
        handle.write(batch, options)


register_db(("rocksdb", "RocksDB"), RocksDB, rocksdb_exists)
