"""The shared shape of sorted key/value folder databases: LevelDB and RocksDB.

Both keep records in bytewise key order in a folder, iterate with a raw iterator
(``seek_to_first``, ``seek``, ``next``, ``valid``, ``key``, ``value``) over an
implicit snapshot, and apply a write batch atomically and durably (``sync``). So
a ``SortedKVDB`` buffers every ``put`` until ``close()`` and then writes them in
ONE synced batch; a NEW DB deletes the old records in that same batch. Readers
and crashes see the old content or the new, never a mix: a SIGKILL while saving
never loses the previous checkpoint (``tests/db/test_crash_safety.py``).

A backend module subclasses ``SortedKVDB`` with ``db_type``, ``handles`` (a
``SharedHandles`` that opens the library's DB object), ``errors`` (the library's
exception types) and ``_write(handle, pending, replace)``; cursors need nothing
more.
"""

from __future__ import annotations

import os
from typing import Any, Callable

from framework.db.base import DB, Cursor, Mode, Transaction
from framework.db.handles import SharedHandles
from framework.db.minidb import decode_key, encode_key
from framework.errors import DBError


def import_extra(module: str, db_type: str, extra: str, package: str) -> Any:
    """Import ``module`` or raise a DBError naming the extra that installs it."""
    try:
        return __import__(module)
    except ImportError as e:
        raise DBError(
            f"the {db_type} DB type needs the `{package}` package, which is not installed: "
            f"pip install framework[{extra}] (or pip install {package})"
        ) from e


def _kind_hint(path: str) -> str:
    """'; it is a minidb DB: pass db_type "minidb"' when something else is at ``path``."""
    if not os.path.exists(path):
        return ""
    from framework.db import detect_db_type  # the package imports this module

    return f'; it is a {detect_db_type(path)} DB: pass db_type "{detect_db_type(path)}"'


MAX_CURRENT_BYTES = 4096  # CURRENT names one MANIFEST file: a line of a few dozen bytes


def check_folder(db_type: str, path: str) -> None:
    """Refuse, before the C library sees it, a folder it could hang on, crash on or write through.

    Every entry must be a regular file (or a folder): a symlink is refused (on read it can point at
    /dev/zero, which LevelDB and RocksDB read forever with no Python frame to interrupt; on write the
    library follows a symlink named like its next MANIFEST or log out of the folder), and so are
    devices, FIFOs and sockets. ``CURRENT`` must be one short line naming a MANIFEST that is there."""
    if not os.path.isdir(path):
        return  # the library creates it (write) or the caller reports it missing (read)
    with os.scandir(path) as entries:
        for entry in entries:
            if entry.is_symlink():
                raise DBError(
                    f"{db_type} {path}: '{entry.name}' is a symlink (to {os.readlink(entry.path)!r}); "
                    "a DB folder holds only its own files"
                )
            if not (entry.is_file(follow_symlinks=False) or entry.is_dir(follow_symlinks=False)):
                raise DBError(f"{db_type} {path}: '{entry.name}' is not a regular file (a device, FIFO or socket)")
    current = os.path.join(path, "CURRENT")
    if not os.path.exists(current):
        return
    size = os.path.getsize(current)
    if size > MAX_CURRENT_BYTES:
        raise DBError(f"{db_type} {path}: CURRENT is {size} bytes, not one line naming a MANIFEST (damaged)")
    with open(current, "rb") as f:
        name = f.read().decode("ascii", "replace").strip()
    if not name.startswith("MANIFEST-") or "/" in name or not os.path.isfile(os.path.join(path, name)):
        raise DBError(f"{db_type} {path}: CURRENT names {name[:80]!r}, not a MANIFEST file of the folder (damaged)")


EMPTY_LOG_BYTES = 32  # a log holding only empty write batches (a DB saved with no records)


def table_bytes(path: str) -> int:
    """Bytes in the folder's table files (``*.sst``, ``*.ldb``) and in log files (``*.log``) longer than
    an empty write batch: a folder that reads as empty although these hold data lost its records (a
    damaged MANIFEST forgets its tables), or had every record deleted and not yet compacted."""
    if not os.path.isdir(path):
        return 0
    total = 0
    with os.scandir(path) as entries:
        for entry in entries:
            if entry.name.endswith((".sst", ".ldb", ".log")) and entry.is_file(follow_symlinks=False):
                size = entry.stat(follow_symlinks=False).st_size
                total += size if size > EMPTY_LOG_BYTES or not entry.name.endswith(".log") else 0
    return total


class BufferedTransaction(Transaction):
    """Collects ``put``s into the DB's pending list; the DB writes them when closed."""

    def __init__(self, db: Any, max_key_len: int | None = None) -> None:
        self._db = db
        self._max = max_key_len
        self._pending: list[tuple[bytes, bytes]] = []

    def put(self, key: str | bytes, value: bytes) -> None:
        k = encode_key(key)
        if not k or (self._max is not None and len(k) > self._max):
            limit = f"1..{self._max}" if self._max is not None else "at least 1"
            raise DBError(f"{self._db.db_type} {self._db.path}: key {key!r} must be {limit} bytes, it is {len(k)}")
        self._pending.append((k, bytes(value)))

    def commit(self) -> None:
        self._db._pending.extend(self._pending)
        self._pending = []


class SortedKVCursor(Cursor):
    """A cursor over a library raw iterator (keys in bytewise order, seekable)."""

    supports_seek = True

    def __init__(self, db: SortedKVDB, iterator: Any) -> None:
        self._db, self._it = db, iterator
        self.seek_to_first()

    def _call(self, fn: Callable[..., Any], *args: Any) -> Any:
        try:
            return fn(*args)
        except self._db.errors as e:
            raise DBError(f"{self._db.db_type} {self._db.path}: cannot read: {e}") from e

    def seek_to_first(self) -> None:
        self._call(self._it.seek_to_first)

    def seek(self, key: str) -> None:
        self._call(self._it.seek, encode_key(key))

    def next(self) -> None:
        self._call(self._it.next)

    def valid(self) -> bool:
        return bool(self._call(self._it.valid))

    def _current(self, which: str) -> bytes:
        if not self.valid():
            raise DBError(f"{self._db.db_type} {self._db.path}: cursor is past the last record")
        return self._call(getattr(self._it, which))

    def key(self) -> str:
        return decode_key(self._current("key"))

    def value(self) -> bytes:
        return bytes(self._current("value"))

    def close(self) -> None:
        close = getattr(self._it, "close", None)
        self._it = _Closed(self._db)
        if close is not None:
            close()


class _Closed:
    """Stands in for a closed iterator: invalid, and says so if read."""

    def __init__(self, db: SortedKVDB) -> None:
        self._db = db

    def valid(self) -> bool:
        return False

    def __getattr__(self, name: str) -> Any:
        raise DBError(f"{self._db.db_type} {self._db.path}: the cursor is closed")


class SortedKVDB(DB):
    """A LevelDB/RocksDB-style folder DB; see module doc. Subclasses fill the class attributes."""

    handles: SharedHandles
    errors: tuple[type[BaseException], ...] = ()

    def __init__(self, path: str, mode: Mode) -> None:
        super().__init__(path, mode)
        self._library()  # fail early, naming the extra, when the package is missing
        self._pending: list[tuple[bytes, bytes]] = []
        self._handle: Any = None
        self._closed = False
        check_folder(self.db_type, path)
        if mode is Mode.READ:
            if not self.exists(path):
                raise DBError(
                    f"{self.db_type} {path}: no {self.db_type} database here (expected a folder with CURRENT)"
                    + _kind_hint(path)
                )
            self._handle = self.handles.acquire(path, False)
        elif os.path.exists(path) and not os.path.isdir(path):
            raise DBError(f"{self.db_type} {path}: exists and is not a folder")

    # -- what a backend provides -------------------------------------------------------------
    @staticmethod
    def _library() -> Any:
        raise NotImplementedError

    @staticmethod
    def exists(path: str) -> bool:
        raise NotImplementedError

    def _iterator(self, handle: Any) -> Any:
        raise NotImplementedError

    def _write(self, handle: Any, pending: list[tuple[bytes, bytes]], replace: bool) -> None:
        raise NotImplementedError

    # -- the DB interface ----------------------------------------------------------------------
    def cursor(self) -> SortedKVCursor:
        self._require(Mode.READ)
        try:
            return SortedKVCursor(self, self._iterator(self._handle))
        except self.errors as e:
            raise DBError(f"{self.db_type} {self.path}: cannot read: {e}") from e

    def new_transaction(self) -> BufferedTransaction:
        self._require(Mode.NEW, Mode.WRITE)
        return BufferedTransaction(self)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self.mode is Mode.READ:
            self._handle = None
            self.handles.release(self.path, False)
            return
        pending, self._pending = self._pending, []
        check_folder(self.db_type, self.path)  # again: the folder may have changed since the DB was opened
        handle = self.handles.acquire(self.path, True)
        try:
            self._write(handle, pending, replace=self.mode is Mode.NEW)
        except self.errors as e:
            raise DBError(f"{self.db_type} {self.path}: write failed (the previous content is intact): {e}") from e
        finally:
            self.handles.release(self.path, True)

    def abort(self) -> None:
        self._pending = []
        if not self._closed and self._handle is not None:
            self._handle = None
            self.handles.release(self.path, False)
        self._closed = True
