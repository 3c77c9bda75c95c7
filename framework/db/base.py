"""The DB interface and registry (Caffe2's ``db::DB``, ``Cursor``, ``Transaction``).

A DB is a key/value store of byte strings opened in one of three modes:

- ``READ``: a ``Cursor`` walks the records in the DB's order (file order for
  minidb, sorted key order for lmdb);
- ``NEW``: start from empty (an existing DB is replaced when the DB is closed);
- ``WRITE``: add to what is there.

Writes go through a ``Transaction`` (``put`` then ``commit``). Backends make a
NEW/WRITE DB visible atomically when it is closed: until then readers see the
previous content, and a crash leaves the previous content intact. ``abort()``
(or leaving a ``with`` block by an exception) discards the writes.

Backends register themselves by name (``register_db``); ``open_db(db_type,
path, mode)`` opens one.

>>> with open_db("minidb", "/tmp/doc.minidb", Mode.NEW) as db:
...     with db.new_transaction() as txn:
...         txn.put("a", b"1")
>>> with open_db("minidb", "/tmp/doc.minidb", Mode.READ) as db:
...     [(k, v) for k, v in db.cursor()]
[('a', b'1')]
"""

from __future__ import annotations

import enum
from typing import Callable, Iterator

from framework.errors import DBError


class Mode(enum.Enum):
    READ = "read"
    WRITE = "write"
    NEW = "new"

    @classmethod
    def of(cls, mode: Mode | str) -> Mode:
        if isinstance(mode, Mode):
            return mode
        try:
            return cls(str(mode).lower())
        except ValueError:
            raise DBError(f"unknown DB mode {mode!r}; one of read, write, new") from None


class Cursor:
    """Sequential access to the records of a DB opened for READ.

    ``valid()`` tells whether ``key()``/``value()`` point at a record; ``next()``
    moves on; ``seek_to_first()`` rewinds; ``seek(key)`` (where supported) goes
    to the first record whose key is >= ``key``. Iterating yields ``(key, value)``
    pairs from the current position.
    """

    supports_seek = False

    def seek_to_first(self) -> None:
        raise NotImplementedError

    def seek(self, key: str) -> None:
        raise DBError(f"{type(self).__name__} cannot seek; read it sequentially")

    def next(self) -> None:
        raise NotImplementedError

    def valid(self) -> bool:
        raise NotImplementedError

    def key(self) -> str:
        raise NotImplementedError

    def value(self) -> bytes:
        raise NotImplementedError

    def __iter__(self) -> Iterator[tuple[str, bytes]]:
        while self.valid():
            yield self.key(), self.value()
            self.next()

    def close(self) -> None:
        """Release the cursor (the DB stays open)."""


class Transaction:
    """A batch of ``put``s made durable by ``commit``."""

    def put(self, key: str, value: bytes) -> None:
        raise NotImplementedError

    def commit(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Transaction:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.commit()


class DB:
    """A key/value store opened at ``path`` in ``mode``; see module doc."""

    db_type = ""

    def __init__(self, path: str, mode: Mode) -> None:
        self.path = path
        self.mode = mode

    def cursor(self) -> Cursor:
        raise NotImplementedError

    def new_transaction(self) -> Transaction:
        raise NotImplementedError

    def close(self) -> None:
        """Finish: make written records visible (atomically) and release resources."""

    def abort(self) -> None:
        """Discard what was written since opening; the previous content stays."""
        self.close()

    def __enter__(self) -> DB:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()

    def _require(self, *modes: Mode) -> None:
        if self.mode not in modes:
            want = " or ".join(m.value for m in modes)
            raise DBError(f"{self.db_type} DB {self.path}: opened for {self.mode.value}, this needs {want}")

    def __repr__(self) -> str:
        return f"<{self.db_type} DB {self.path!r} ({self.mode.value})>"


class DBBackend:
    """What the registry knows of a DB type: its class and a test for existence."""

    def __init__(self, name: str, cls: Callable[[str, Mode], DB], exists: Callable[[str], bool], doc: str) -> None:
        self.name, self.cls, self.exists, self.doc = name, cls, exists, doc


_REGISTRY: dict[str, DBBackend] = {}
_UNAVAILABLE: dict[str, str] = {
    "zmqdb": "zmqdb (a network DB served by a Caffe2 zmq server) is not available in this framework; "
    "use minidb (the default), lmdb, leveldb, rocksdb or protodb",
}


def register_db(names: tuple[str, ...], cls: Callable[[str, Mode], DB], exists: Callable[[str], bool]) -> None:
    """Register a DB class under each of ``names`` (e.g. ("minidb", "MiniDB"))."""
    backend = DBBackend(names[0], cls, exists, (getattr(cls, "__doc__", "") or "").strip())
    for n in names:
        _REGISTRY[n] = backend


def db_types() -> list[str]:
    """Registered DB type names."""
    return sorted(_REGISTRY)


def get_backend(db_type: str) -> DBBackend:
    backend = _REGISTRY.get(db_type)
    if backend is None:
        hint = _UNAVAILABLE.get(str(db_type).lower())
        raise DBError(hint or f"unknown db_type {db_type!r}; registered DB types: {', '.join(db_types())}")
    return backend


def open_db(db_type: str, path: str, mode: Mode | str = Mode.READ) -> DB:
    """Open the DB at ``path`` with the backend ``db_type`` in ``mode`` (read/write/new)."""
    return get_backend(db_type).cls(str(path), Mode.of(mode))


def db_exists(db_type: str, path: str) -> bool:
    """Whether a DB of ``db_type`` exists at ``path`` (Caffe2's DBExists)."""
    return bool(get_backend(db_type).exists(str(path)))
