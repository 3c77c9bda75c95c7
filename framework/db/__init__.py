"""Key/value databases for checkpoints and training data (Caffe2's ``db`` layer).

- ``base``: the interface (``DB``, ``Cursor``, ``Transaction``, ``Mode``) and the
  registry (``register_db``, ``open_db``, ``db_exists``, ``db_types``).
- ``minidb``: Caffe2's record file, the embedded default ("minidb", "MiniDB").
- ``lmdb_db``: LMDB through the ``lmdb`` package ("lmdb", "LMDB").
- ``reader``: ``DBReader``, the shared cursor blob of ``CreateDB``.
- ``blobs``: writing blobs to a DB and reading them back (Save/Load and
  ``framework.checkpoint`` share it).
"""

from framework.db import lmdb_db, minidb, reader  # noqa: F401  (registers the backends and DBReader)
from framework.db.base import DB, Cursor, Mode, Transaction, db_exists, db_types, get_backend, open_db, register_db


def detect_db_type(path: str) -> str:
    """ "lmdb" for an LMDB folder, else "minidb" (the default)."""
    return "lmdb" if lmdb_db.lmdb_exists(path) else "minidb"


__all__ = [
    "DB",
    "Cursor",
    "Mode",
    "Transaction",
    "db_exists",
    "db_types",
    "detect_db_type",
    "get_backend",
    "open_db",
    "register_db",
]
