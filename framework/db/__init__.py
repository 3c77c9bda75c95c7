"""Key/value databases for checkpoints and training data (Caffe2's ``db`` layer).

- ``base``: the interface (``DB``, ``Cursor``, ``Transaction``, ``Mode``) and the
  registry (``register_db``, ``open_db``, ``db_exists``, ``db_types``).
- ``minidb``: Caffe2's record file, the embedded default ("minidb", "MiniDB").
- ``lmdb_db``: LMDB through the ``lmdb`` package ("lmdb", "LMDB").
- ``leveldb_db``, ``rocksdb_db``: LevelDB (Caffe2's default ``db_type``) through
  plyvel and RocksDB through rocksdict, on the shared ``sorted_kv`` base.
- ``protodb``: Caffe2's single-file ``TensorProtos`` DB ("protodb", "ProtoDB").
- ``datum``: Caffe1's ``Datum`` records (image sets converted from Caffe).
- ``reader``: ``DBReader``, the shared cursor blob of ``CreateDB``.
- ``blobs``: writing blobs to a DB and reading them back (Save/Load and
  ``framework.checkpoint`` share it).
"""

from framework.db import leveldb_db, lmdb_db, minidb, protodb, reader, rocksdb_db  # noqa: F401  (registers them)
from framework.db.base import DB, Cursor, Mode, Transaction, db_exists, db_types, get_backend, open_db, register_db


def detect_db_type(path: str) -> str:
    """The DB type of what is at ``path``: "lmdb", "leveldb" or "rocksdb" for their folders,
    "protodb" for a ``*.protodb`` file, else "minidb" (the default)."""
    for name, exists in (
        ("lmdb", lmdb_db.lmdb_exists),
        ("rocksdb", rocksdb_db.rocksdb_exists),
        ("leveldb", leveldb_db.leveldb_exists),
    ):
        if exists(path):
            return name
    return "protodb" if str(path).endswith(".protodb") else "minidb"


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
