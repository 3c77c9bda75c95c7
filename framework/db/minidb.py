"""minidb: Caffe2's embedded record file, byte for byte, written atomically.

Format (no header, no index, no footer, no checksum): records back to back,
each

    int32 key length (little-endian, > 0)
    int32 value length (little-endian, > 0)
    key bytes
    value bytes

End of file is end of records. Files written by Caffe2 read here, and files
written here read in Caffe2.

Writing is crash-safe: a NEW or WRITE DB writes a temporary file in the target's
directory (``.<name>.tmp-<pid>-<random>``; WRITE first copies the existing
records into it), and ``close()`` flushes it, fsyncs it, renames it over the
target and fsyncs the directory. A crash at any moment leaves the previous file
intact (a stale temporary file may remain; the next writer of the same target
removes those whose process is gone). Readers check every length against the
file size, so a truncated or foreign file is a ``DBError`` naming the file, the
record index and its offset.

Keys are ``str`` (bytes that are not UTF-8 round-trip through
``surrogateescape``); values are ``bytes``.
"""

from __future__ import annotations

import glob
import os
import secrets
import shutil
import struct
import threading

from framework.db.base import DB, Cursor, Mode, Transaction, register_db
from framework.errors import DBError

_HEADER = struct.Struct("<ii")
_MAX_LEN = 0x7FFFFFFF


def encode_key(key: str | bytes) -> bytes:
    return key if isinstance(key, bytes) else key.encode("utf-8", "surrogateescape")


def decode_key(raw: bytes) -> str:
    return raw.decode("utf-8", "surrogateescape")


def encode_record(key: str | bytes, value: bytes) -> bytes:
    """One minidb record (header, key, value)."""
    k = encode_key(key)
    return _HEADER.pack(len(k), len(value)) + k + bytes(value)


class MiniDBCursor(Cursor):
    """Sequential reader; validates each record header before reading it."""

    def __init__(self, db: MiniDB) -> None:
        self._db = db
        self._f = open(db.path, "rb")
        self._size = os.fstat(self._f.fileno()).st_size
        self._index = -1
        self._pos = 0
        self._key: str | None = None
        self._value: bytes | None = None
        self.seek_to_first()

    def seek_to_first(self) -> None:
        self._f.seek(0)
        self._pos = 0
        self._index = -1
        self.next()

    def _fail(self, what: str) -> DBError:
        return DBError(
            f"minidb {self._db.path}: record {self._index} at byte offset {self._pos}: {what}; "
            "the file is truncated, damaged or not a minidb"
        )

    def next(self) -> None:
        self._index += 1
        if self._pos >= self._size:
            self._key = self._value = None
            return
        if self._size - self._pos < _HEADER.size:
            raise self._fail(f"only {self._size - self._pos} bytes left, a record header needs {_HEADER.size}")
        header = self._f.read(_HEADER.size)
        if len(header) != _HEADER.size:
            raise self._fail("short read of the record header")
        klen, vlen = _HEADER.unpack(header)
        if klen <= 0 or vlen <= 0:
            raise self._fail(f"key length {klen} and value length {vlen} must both be > 0")
        left = self._size - self._pos - _HEADER.size
        if klen + vlen > left:
            raise self._fail(f"the record needs {klen} + {vlen} bytes but only {left} remain")
        key = self._f.read(klen)
        value = self._f.read(vlen)
        if len(key) != klen or len(value) != vlen:
            raise self._fail("short read (the file changed while reading)")
        self._pos += _HEADER.size + klen + vlen
        self._key, self._value = decode_key(key), value

    def valid(self) -> bool:
        return self._key is not None

    @property
    def index(self) -> int:
        """Index of the current record in the file."""
        return self._index

    def key(self) -> str:
        if self._key is None:
            raise DBError(f"minidb {self._db.path}: cursor is past the last record")
        return self._key

    def value(self) -> bytes:
        if self._value is None:
            raise DBError(f"minidb {self._db.path}: cursor is past the last record")
        return self._value

    def close(self) -> None:
        self._f.close()

    def __del__(self) -> None:
        f = getattr(self, "_f", None)
        if f is not None:
            f.close()


class MiniDBTransaction(Transaction):
    """Buffers puts; ``commit`` appends them to the DB's temporary file."""

    def __init__(self, db: MiniDB) -> None:
        self._db = db
        self._pending: list[bytes] = []

    def put(self, key: str | bytes, value: bytes) -> None:
        k = encode_key(key)
        if not 0 < len(k) <= _MAX_LEN or not 0 < len(value) <= _MAX_LEN:
            raise DBError(
                f"minidb {self._db.path}: key {key!r}: key and value must be 1..2^31-1 bytes "
                f"(got {len(k)} and {len(value)})"
            )
        self._pending.append(_HEADER.pack(len(k), len(value)))
        self._pending.append(k)
        self._pending.append(value)

    def commit(self) -> None:
        if self._pending:
            self._db._append(self._pending)
            self._pending = []


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _close_quietly(f) -> None:
    """Close ``f`` even when flushing its buffer fails again (a full disk): the temp file goes next."""
    try:
        f.close()
    except OSError:
        pass


def _fsync_dir(directory: str) -> None:
    try:
        fd = os.open(directory or ".", os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(fd)


class MiniDB(DB):
    """Caffe2's minidb record file (see module doc). Registered as "minidb" and "MiniDB"."""

    db_type = "minidb"

    def __init__(self, path: str, mode: Mode) -> None:
        super().__init__(path, mode)
        self._lock = threading.Lock()
        self._tmp: str | None = None
        self._f = None
        if mode is Mode.READ:
            if not os.path.isfile(path):
                raise DBError(f"minidb {path}: no such file" + (" (it is a directory)" if os.path.isdir(path) else ""))
            return
        directory = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(directory):
            raise DBError(f"minidb {path}: the folder {directory} does not exist")
        self._clean_stale_temporaries()
        base = os.path.basename(path)
        self._tmp = os.path.join(directory, f".{base}.tmp-{os.getpid()}-{secrets.token_hex(4)}")
        try:
            if mode is Mode.WRITE and os.path.isfile(path):
                shutil.copyfile(path, self._tmp)
                self._f = open(self._tmp, "ab")
            else:
                self._f = open(self._tmp, "wb")
        except OSError as e:
            raise DBError(f"minidb {path}: cannot create {self._tmp}: {e}") from e

    def _clean_stale_temporaries(self) -> None:
        directory = os.path.dirname(os.path.abspath(self.path))
        pattern = os.path.join(glob.escape(directory), f".{glob.escape(os.path.basename(self.path))}.tmp-*")
        for stale in glob.glob(pattern):
            try:
                pid = int(stale.rsplit(".tmp-", 1)[1].split("-")[0])
            except (ValueError, IndexError):
                continue
            if pid != os.getpid() and not _pid_alive(pid):
                try:
                    os.remove(stale)
                except OSError:
                    pass

    def cursor(self) -> MiniDBCursor:
        self._require(Mode.READ)
        return MiniDBCursor(self)

    def new_transaction(self) -> MiniDBTransaction:
        self._require(Mode.NEW, Mode.WRITE)
        return MiniDBTransaction(self)

    def _append(self, chunks: list[bytes]) -> None:
        if self._f is None:
            raise DBError(f"minidb {self.path}: the DB is closed")
        with self._lock:
            try:
                self._f.writelines(chunks)
            except OSError as e:
                raise DBError(f"minidb {self.path}: write failed: {e}") from e

    def close(self) -> None:
        f, self._f = self._f, None
        if f is None:
            return
        try:
            f.flush()
            os.fsync(f.fileno())
            f.close()
            os.replace(self._tmp, self.path)
            _fsync_dir(os.path.dirname(os.path.abspath(self.path)))
        except OSError as e:
            _close_quietly(f)
            self._remove_tmp()
            raise DBError(f"minidb {self.path}: could not finish writing: {e}") from e

    def abort(self) -> None:
        f, self._f = self._f, None
        if f is not None:
            _close_quietly(f)
            self._remove_tmp()

    def _remove_tmp(self) -> None:
        if self._tmp is not None:
            try:
                os.remove(self._tmp)
            except OSError:
                pass

    def __del__(self) -> None:
        # Never publish a DB that was not closed explicitly: drop the temporary file.
        if getattr(self, "_f", None) is not None:
            self.abort()


register_db(("minidb", "MiniDB"), MiniDB, os.path.isfile)
