"""lmdb: the LMDB database through the ``lmdb`` package (``pip install framework[lmdb]``).

The DB is a folder holding ``data.mdb`` and ``lock.mdb``, as Caffe2's LMDB DB.
Records are kept in sorted key order, so a cursor walks keys in byte order and
can ``seek``. Registered as "lmdb" and "LMDB".

Reading keeps memory at about the size of what is read, not twice it: LMDB memory-maps data.mdb, and
every page a read touches stays resident (and counts in the process's RSS) while the transaction
lasts. A cursor copies each value out of the map and at once drops the value's pages from the
process (``madvise(MADV_DONTNEED)`` on the read-only file mapping: the data stays in the page cache
and is read again if touched), so loading a checkpoint peaks near 1x its size, not twice it.

Writes are atomic: everything put into a NEW or WRITE DB is written in one LMDB
write transaction when the DB is closed (NEW first empties the database in the
same transaction), so readers and crashes see either the old or the new
content, never a mix. The memory map grows as needed: the map is sized for
what is written, and doubled and retried if LMDB still reports it full.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import sys

import numpy as np

from framework.db.base import DB, Cursor, Mode, register_db
from framework.db.handles import SharedHandles
from framework.db.minidb import decode_key, encode_key
from framework.db.sorted_kv import BufferedTransaction, check_folder
from framework.errors import DBError

_INITIAL_MAP = 64 << 20
_MISSING = (
    "the lmdb DB type needs the `lmdb` package, which is not installed: "
    "pip install framework[lmdb] (or pip install lmdb)"
)


def _lmdb():
    try:
        import lmdb
    except ImportError as e:
        raise DBError(_MISSING) from e
    return lmdb


def _open_env(path: str, create: bool):
    lmdb = _lmdb()
    check_folder("lmdb", path)  # data.mdb / lock.mdb as symlinks, FIFOs or devices: refused before mapping
    try:
        if create:
            os.makedirs(path, exist_ok=True)
            return lmdb.open(path, map_size=_INITIAL_MAP, max_readers=256, create=True)
        check_data_file(path)
        if os.path.isfile(os.path.join(path, "lock.mdb")):
            try:
                return lmdb.open(path, map_size=_INITIAL_MAP, max_readers=256, create=False)
            except lmdb.ReadonlyError:
                pass
        # Reading a DB without a lock file (or one we cannot write): read-only and without locking, so
        # reading creates nothing (no lock.mdb beside someone else's data).
        return lmdb.open(path, readonly=True, lock=False, max_readers=256)
    except (OSError, lmdb.Error) as e:
        raise DBError(f"lmdb {path}: cannot open: {e}") from e


_META_MAGIC = 0xBEEFC0DE


def check_data_file(path: str) -> None:
    """DBError unless ``path``/data.mdb holds at least the pages its meta pages promise.

    LMDB memory-maps data.mdb and trusts it: a truncated file makes the first read past its end
    kill the process with SIGBUS. The two meta pages (page 0 and 1) give the page size and the
    last page in use; the file must reach the end of that page.
    """
    data = os.path.join(path, "data.mdb")
    try:
        size = os.path.getsize(data)
        with open(data, "rb") as f:
            head = f.read(2 * 65536)
    except OSError as e:
        raise DBError(f"lmdb {path}: cannot read data.mdb: {e}") from e
    if size < 2 * 160:
        raise DBError(f"lmdb {path}: data.mdb is truncated ({size} bytes; not even its two meta pages)")
    metas = []
    psize = int.from_bytes(head[40:44], "little")  # page 0: meta.mm_dbs[FREE_DBI].md_pad = page size
    if psize < 512 or psize > 65536 or psize & (psize - 1):
        raise DBError(f"lmdb {path}: data.mdb has no valid meta page (page size {psize})")
    for page in (0, 1):
        off = page * psize
        meta = head[off : off + 160]
        if len(meta) < 160:
            raise DBError(f"lmdb {path}: data.mdb is truncated ({size} bytes; page size {psize})")
        if int.from_bytes(meta[16:20], "little") != _META_MAGIC:
            raise DBError(f"lmdb {path}: data.mdb is not an LMDB file (meta page {page} has no magic number)")
        last_pg = int.from_bytes(meta[136:144], "little")
        txnid = int.from_bytes(meta[144:152], "little")
        metas.append((txnid, last_pg))
    _, last_pg = max(metas)
    need = (last_pg + 1) * psize
    if size < need:
        raise DBError(
            f"lmdb {path}: data.mdb is truncated: {size} bytes but its meta page uses pages up to {last_pg} "
            f"({need} bytes); reading it would crash the process (SIGBUS)"
        )
    try:
        with open(data, "rb") as f:
            pages = f.read(need)
    except OSError as e:
        raise DBError(f"lmdb {path}: cannot read data.mdb: {e}") from e
    bad = _damaged_page(pages, psize, last_pg)
    if bad is not None:
        raise DBError(f"lmdb {path}: data.mdb is damaged: {bad}; reading it would crash the process")


_P_BRANCH, _P_LEAF, _P_OVERFLOW, _P_LEAF2, _F_BIGDATA = 0x01, 0x02, 0x04, 0x20, 0x01


def _damaged_page(pages: bytes, psize: int, last_pg: int) -> str | None:
    """What is wrong with the first B-tree page whose node offsets or sizes leave the page, else None.

    LMDB follows a page's node offsets without a bound check: one flipped bit in an offset sends a read
    past the end of the map (SIGBUS). Branch and leaf pages are checked node by node; an overflow page's
    continuation pages (raw value bytes, no header) are skipped; other pages (meta, free) are left alone.
    """
    pg = 2
    while pg <= last_pg:
        off = pg * psize
        flags = int.from_bytes(pages[off + 10 : off + 12], "little")
        if flags & _P_OVERFLOW:
            count = int.from_bytes(pages[off + 12 : off + 16], "little")
            if count < 1 or pg + count > last_pg + 1:
                return f"overflow page {pg} claims {count} pages (the file has {last_pg + 1})"
            pg += count
            continue
        if flags & (_P_BRANCH | _P_LEAF) and not flags & _P_LEAF2:
            lower = int.from_bytes(pages[off + 12 : off + 14], "little")
            upper = int.from_bytes(pages[off + 14 : off + 16], "little")
            if not 16 <= lower <= upper <= psize or lower % 2:
                return f"page {pg} has free-space bounds {lower}..{upper} outside its {psize} bytes"
            for i in range(off + 16, off + lower, 2):
                node = int.from_bytes(pages[i : i + 2], "little")
                if not upper <= node <= psize - 8:
                    return f"page {pg} has a node at offset {node}, outside {upper}..{psize - 8}"
                at = off + node
                dsize = int.from_bytes(pages[at : at + 4], "little")  # mn_lo, mn_hi: a leaf's data size
                nflags = int.from_bytes(pages[at + 4 : at + 6], "little")
                ksize = int.from_bytes(pages[at + 6 : at + 8], "little")
                body = ksize if flags & _P_BRANCH else ksize + (8 if nflags & _F_BIGDATA else dsize)
                if node + 8 + body > psize:
                    return f"page {pg} has a node at offset {node} of {8 + body} bytes, past the page's end"
        pg += 1
    return None


_PAGE = mmap.PAGESIZE
_MADV_DONTNEED = getattr(mmap, "MADV_DONTNEED", 4)
_madvise = None
if sys.platform.startswith("linux"):
    try:
        _madvise = ctypes.CDLL(None, use_errno=True).madvise
        _madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
        _madvise.restype = ctypes.c_int
    except (OSError, AttributeError):
        _madvise = None


def release_pages(view: memoryview) -> None:
    """Drop the whole pages under ``view`` (a value inside LMDB's read-only map) from the process's
    resident set. Harmless to the data: the mapping is a read-only view of the file, so a later read
    faults the page in again from the page cache. A no-op where madvise is not available."""
    if _madvise is None or len(view) < _PAGE:
        return
    addr = np.frombuffer(view, np.uint8).ctypes.data
    start = (addr + _PAGE - 1) // _PAGE * _PAGE  # whole pages only: the partial ones hold other records
    end = (addr + len(view)) // _PAGE * _PAGE
    if end > start:
        _madvise(start, end - start, _MADV_DONTNEED)


# py-lmdb allows one Environment per database per process: DBs on the same path share one.
_ENVS = SharedHandles(_open_env, lambda env: env.close())
_acquire_env, _release_env = _ENVS.acquire, _ENVS.release


class LMDBCursor(Cursor):
    supports_seek = True

    def __init__(self, db: LMDB) -> None:
        self._db = db
        self._txn = db._env.begin(buffers=True)  # values are views into the map (see value())
        self._cur = self._txn.cursor()
        self._valid = self._guard(self._cur.first)

    def _guard(self, fn, *args):
        """Run a cursor step; LMDB's errors on a damaged file become a DBError naming it."""
        try:
            return fn(*args)
        except _lmdb().Error as e:
            raise DBError(f"lmdb {self._db.path}: the database is damaged: {e}") from e

    def seek_to_first(self) -> None:
        self._valid = self._guard(self._cur.first)

    def seek(self, key: str) -> None:
        self._valid = self._guard(self._cur.set_range, encode_key(key))

    def next(self) -> None:
        self._valid = self._guard(self._cur.next)

    def valid(self) -> bool:
        return self._valid

    def key(self) -> str:
        if not self._valid:
            raise DBError(f"lmdb {self._db.path}: cursor is past the last record")
        return decode_key(bytes(self._guard(self._cur.key)))

    def value(self) -> bytes:
        if not self._valid:
            raise DBError(f"lmdb {self._db.path}: cursor is past the last record")
        view = self._guard(self._cur.value)
        data = bytes(view)  # the copy the caller keeps; then the map's pages of it leave the process
        release_pages(view)
        return data

    def close(self) -> None:
        if self._txn is not None:
            self._txn.abort()
            self._txn = None

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass


class LMDB(DB):
    """LMDB through the ``lmdb`` package (see module doc). Registered as "lmdb" and "LMDB"."""

    db_type = "lmdb"

    def __init__(self, path: str, mode: Mode) -> None:
        super().__init__(path, mode)
        _lmdb()  # fail early, with the install hint, when the package is missing
        self._pending: list[tuple[bytes, bytes]] = []
        self._env = None
        self._closed = False
        if mode is Mode.READ:
            if not lmdb_exists(path):
                raise DBError(f"lmdb {path}: no LMDB database here (expected a folder holding data.mdb)")
            self._env = _acquire_env(path, create=False)
        elif os.path.exists(path) and not os.path.isdir(path):
            raise DBError(f"lmdb {path}: exists and is not a folder")

    def cursor(self) -> LMDBCursor:
        self._require(Mode.READ)
        try:
            return LMDBCursor(self)
        except _lmdb().Error as e:
            raise DBError(f"lmdb {self.path}: cannot read: {e}") from e

    def new_transaction(self) -> BufferedTransaction:
        self._require(Mode.NEW, Mode.WRITE)
        return BufferedTransaction(self, max_key_len=511)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self.mode is Mode.READ:
            self._env = None
            _release_env(self.path)
            return
        lmdb = _lmdb()
        pending, self._pending = self._pending, []
        need = sum(len(k) + len(v) for k, v in pending)
        env = _acquire_env(self.path, create=True)
        try:
            info, stat = env.info(), env.stat()
            used = (info["last_pgno"] + 1) * stat["psize"]
            # Values this big live in overflow pages; leave room for a copy-on-write of the old tree too.
            want = used * (2 if self.mode is Mode.NEW else 1) + 2 * need + (16 << 20)
            map_size = max(info["map_size"], want)
            for _ in range(8):
                if map_size > env.info()["map_size"]:
                    env.set_mapsize(map_size)  # grow the map (needs no open read transaction here)
                try:
                    with env.begin(write=True) as txn:
                        if self.mode is Mode.NEW:
                            txn.drop(env.open_db(), delete=False)
                        for k, v in pending:
                            txn.put(k, v)
                    break
                except lmdb.MapFullError:
                    map_size *= 2
            else:
                raise DBError(f"lmdb {self.path}: the map stayed full at {map_size} bytes")
            env.sync(True)
        except lmdb.Error as e:
            raise DBError(f"lmdb {self.path}: write failed: {e}") from e
        finally:
            _release_env(self.path)

    def abort(self) -> None:
        self._pending = []
        if not self._closed and self._env is not None:
            self._env = None
            _release_env(self.path)
        self._closed = True


def lmdb_exists(path: str) -> bool:
    return os.path.isdir(path) and os.path.isfile(os.path.join(path, "data.mdb"))


register_db(("lmdb", "LMDB"), LMDB, lmdb_exists)
