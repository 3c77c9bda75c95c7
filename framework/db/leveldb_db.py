"""leveldb: LevelDB through plyvel (``pip install framework[leveldb]``), Caffe2's default ``db_type``.

The DB is a folder (``CURRENT``, ``MANIFEST-*``, ``*.ldb``/``*.log``) as Caffe2's
``LevelDB`` writes it, opened with Caffe2's options (64 KiB blocks, 256 MiB
write buffer, 100 open files). Keys are kept in bytewise order, so a cursor can
``seek``. Registered as "leveldb" and "LevelDB".

Writes follow ``sorted_kv``: one synced, atomic write batch when the DB is
closed. Caffe2 refused NEW on an existing folder (``error_if_exists``); here
NEW replaces the content atomically, as minidb and lmdb do, so a checkpoint can
be saved over. LevelDB allows one process at a time on a folder: opening one
another process holds is a ``DBError`` naming the lock.
"""

from __future__ import annotations

import os
from typing import Any

from framework.db.base import register_db
from framework.db.handles import SharedHandles
from framework.db.sorted_kv import SortedKVDB, import_extra
from framework.errors import DBError


def _plyvel() -> Any:
    return import_extra("plyvel", "leveldb", "leveldb", "plyvel")


def _open(path: str, create: bool) -> Any:
    plyvel = _plyvel()
    try:
        return plyvel.DB(
            path,
            create_if_missing=create,
            paranoid_checks=True,  # damage is an error, never records silently dropped
            block_size=65536,
            write_buffer_size=256 << 20,
            max_open_files=100,
        )
    except plyvel.Error as e:
        raise DBError(f"leveldb {path}: cannot open: {e}") from e


def leveldb_exists(path: str) -> bool:
    """A LevelDB folder: ``CURRENT`` and no RocksDB marker (``IDENTITY``/``OPTIONS-*``)."""
    if not os.path.isfile(os.path.join(path, "CURRENT")):
        return False
    return not any(n == "IDENTITY" or n.startswith("OPTIONS-") for n in os.listdir(path))


class LevelDB(SortedKVDB):
    """LevelDB through plyvel (see module doc). Registered as "leveldb" and "LevelDB"."""

    db_type = "leveldb"
    handles = SharedHandles(_open, lambda db: db.close())
    exists = staticmethod(leveldb_exists)

    @property
    def errors(self) -> tuple[type[BaseException], ...]:
        return (_plyvel().Error,)

    _library = staticmethod(_plyvel)

    def _iterator(self, handle: Any) -> Any:
        return handle.raw_iterator(verify_checksums=True)  # LevelDB's block CRCs, checked on every read

    def _write(self, handle: Any, pending: list[tuple[bytes, bytes]], replace: bool) -> None:
        with handle.write_batch(sync=True, transaction=True) as batch:
            if replace:
                for key in handle.iterator(include_value=False):
                    batch.delete(key)
            for key, value in pending:
                batch.put(key, value)


register_db(("leveldb", "LevelDB"), LevelDB, leveldb_exists)
