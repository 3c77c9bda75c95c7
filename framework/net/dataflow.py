"""One dataflow view of an op list: who writes and who reads each blob, kept current while a pass rewrites.

``DataFlow(ops)`` indexes a list of OperatorDefs in declared order, by their ``input`` / ``output``.
``nested=True`` also counts what nested nets read and write in the outer workspace as their op's own reads
and writes (``net.nested.op_io``): the nets of If / While (and ONNXWhile with ``disable_scopes``), Do's net
through its bindings, a RecurrentNetwork's step nets through its links, states and the parameters they read;
``control=True`` counts ``control_input`` as reads. Each op carries a position key, increasing along the
list; each blob maps to the sorted keys of the ops writing it and of the ops reading it. Queries take op
indices and answer from those maps by bisection: the readers of the value an op leaves, the producer of the
value an op reads, whether a blob is written (anywhere, or between two ops), in O(log n + degree) instead of
a scan of the list (as torch.fx's ``Node.users``).

The view reads every op's inputs and outputs once (``io``); the maps are built from them in one pass when a
query first needs them (SSA numbering, ``versions()``, needs none). Until the first rewrite an op's key is
its index (``keys`` is None), so queries need no key lookups; the first rewrite gives every op its own key
(``keys``, a list) so that an insert takes a key between its neighbours' (their midpoint) instead of
renumbering the list.

Rewrites go through the view so the maps follow: ``delete``, ``insert``, ``replace``, ``move``, and
``edit(i)`` around any change of op ``i``'s inputs or outputs in place (argument and type changes need
nothing). ``check()`` rebuilds the maps from the list and compares. With ``checked=True`` (the default
when ``FRAMEWORK_CHECK_DATAFLOW`` is set, as the test suite sets it) every rewrite ends with ``check()``, so a
pass that changes the list behind the view fails at the rewrite after.

Net-level facts: ``first_writer`` / ``first_use`` / ``last_use`` (a blob's live range within the list),
``read_first`` (read before any op writes it: an input of the list), ``inputs()`` / ``produced()`` /
``sole_writers()``, and the SSA version numbers ``read_version`` / ``write_version`` (``net.ssa``'s
numbering).
"""

from __future__ import annotations

import os
from bisect import bisect_left, bisect_right, insort
from contextlib import contextmanager
from functools import cached_property
from typing import Any, Iterable, Iterator, Sequence

from framework.net.nested import OUTER_IO_TYPES, extra_io

__all__ = ["IO", "DataFlow", "Versions"]

IO = tuple[tuple[str, ...], tuple[str, ...]]  # an op's reads and writes (``DataFlow.io``)
Versions = tuple[tuple[int, ...], tuple[int, ...]]  # the versions of an op's reads and writes (``DataFlow.versions``)


class DataFlow:
    """See module doc. ``ops`` is the live list: read it freely, change it only through this view."""

    def __init__(self, ops: Any, *, nested: bool = False, control: bool = False, checked: bool | None = None) -> None:
        self.ops = ops
        self.nested = nested
        self.control = control
        self.checked = bool(os.environ.get("FRAMEWORK_CHECK_DATAFLOW")) if checked is None else checked
        self.keys: list[float] | None = None  # None: op i's key is i (see the module doc)
        self._index()

    def io(self, i: int) -> IO:
        """The blobs op ``i`` reads and writes as this view counts them (see the module doc), in their order."""
        return self._io[i]

    def ios(self) -> Sequence[IO]:
        """``io(i)`` of every op, in list order (read only: it changes as the view rewrites)."""
        return self._io

    def _read_io(self, op: Any) -> IO:
        if self.nested and op.arg:
            nested = extra_io(op)
            if nested is not None:
                ins, outs = nested
                if self.control and op.control_input:
                    return (*ins, *op.control_input), tuple(outs)
                return tuple(ins), tuple(outs)
        if self.control and op.control_input:
            return (*op.input, *op.control_input), tuple(op.output)
        return tuple(op.input), tuple(op.output)

    def _index(self) -> None:
        """Read every op's io; the maps follow on first use (``_build_maps``)."""
        self._versions: list[Versions] | None = None
        self.__dict__.pop("_writers", None)
        self.__dict__.pop("_readers", None)
        if self.nested and self.control:
            self._io = [self._read_io(op) for op in self.ops]
        elif self.control:
            self._io = [((*op.input, *op.control_input), tuple(op.output)) for op in self.ops]
        elif self.nested:
            read = self._read_io
            self._io = [
                read(op) if op.type in OUTER_IO_TYPES else (tuple(op.input), tuple(op.output)) for op in self.ops
            ]
        else:
            self._io = [(tuple(op.input), tuple(op.output)) for op in self.ops]

    @cached_property
    def _writers(self) -> dict[str, list[float]]:
        """Blob -> the sorted keys of the ops writing it."""
        return self._build_maps()[0]

    @cached_property
    def _readers(self) -> dict[str, list[float]]:
        """Blob -> the sorted keys of the ops reading it."""
        return self._build_maps()[1]

    def _build_maps(self) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
        """Both maps in one pass over the io (keys ascend along the list, so appending keeps them sorted)."""
        writers: dict[str, list[float]] = {}
        readers: dict[str, list[float]] = {}
        ios = self._io
        for (ins, outs), k in zip(ios, range(len(ios)) if self.keys is None else self.keys):
            for b in ins:
                ks = readers.get(b)
                if ks is None:
                    readers[b] = [k]
                elif ks[-1] != k:  # a blob an op reads twice is one read
                    ks.append(k)
            for b in outs:
                ks = writers.get(b)
                if ks is None:
                    writers[b] = [k]
                elif ks[-1] != k:
                    ks.append(k)
        self.__dict__.update(_writers=writers, _readers=readers)
        return writers, readers

    def _add(self, io: IO, key: float) -> None:
        ins, outs = io
        for blob in set(ins):
            insort(self._readers.setdefault(blob, []), key)
        for blob in set(outs):
            insort(self._writers.setdefault(blob, []), key)

    def _remove(self, io: IO, key: float) -> None:
        ins, outs = io
        for table, blobs in ((self._readers, set(ins)), (self._writers, set(outs))):
            for blob in blobs:
                keys = table[blob]
                del keys[bisect_left(keys, key)]
                if not keys:
                    del table[blob]

    def _pos(self, key: float) -> int:
        """The index of the op whose key is ``key``."""
        return key if self.keys is None else bisect_left(self.keys, key)  # type: ignore[return-value]

    def _positions(self, keys: list[float]) -> list[int]:
        if self.keys is None:
            return list(keys)  # type: ignore[arg-type]
        return [bisect_left(self.keys, k) for k in keys]

    def _key(self, i: int) -> float:
        """Op ``i``'s key; -1 and len(ops) stand for before the first and after the last op."""
        n = len(self._io)
        if self.keys is None:
            return -1 if i < 0 else (n if i >= n else i)
        if i < 0:
            return float("-inf")
        if i >= n:
            return float("inf")
        return self.keys[i]

    # -- queries ---------------------------------------------------------------------------------------
    def writers(self, blob: str) -> list[int]:
        """Indices of the ops writing ``blob``, in order."""
        return self._positions(self._writers.get(blob, []))

    def readers_of(self, blob: str) -> list[int]:
        """Indices of the ops reading ``blob`` (any version), in order."""
        return self._positions(self._readers.get(blob, []))

    def written(self, blob: str) -> bool:
        """Does any op write ``blob``?"""
        return blob in self._writers

    def is_read(self, blob: str) -> bool:
        """Does any op read ``blob``?"""
        return blob in self._readers

    def mentioned(self, blob: str) -> bool:
        """Does any op read or write ``blob``?"""
        return blob in self._writers or blob in self._readers

    def next_writer(self, i: int, blob: str) -> int | None:
        """The first op after ``i`` writing ``blob``."""
        keys = self._writers.get(blob)
        if not keys:
            return None
        w = bisect_right(keys, i if self.keys is None else self.keys[i])
        return self._pos(keys[w]) if w < len(keys) else None

    def producer(self, j: int, blob: str) -> int | None:
        """The last op before ``j`` writing ``blob`` (the producer of the value op ``j`` reads)."""
        keys = self._writers.get(blob)
        if not keys:
            return None
        if self.keys is None:
            w = bisect_left(keys, j)
            return keys[w - 1] if w else None  # type: ignore[return-value]
        w = bisect_left(keys, self.keys[j])
        return bisect_left(self.keys, keys[w - 1]) if w else None

    def readers(self, i: int, blob: str) -> list[int]:
        """Ops after ``i`` reading the version of ``blob`` that op ``i`` leaves: up to and including the next
        op writing it (which may read it first)."""
        keys = self._readers.get(blob)
        if not keys:
            return []
        k = i if self.keys is None else self.keys[i]
        writes = self._writers.get(blob, ())
        w = bisect_right(writes, k)
        lo = bisect_right(keys, k)
        hi = len(keys) if w == len(writes) else bisect_right(keys, writes[w])
        return self._positions(keys[lo:hi])

    def written_between(self, blob: str, i: int, j: int) -> bool:
        """Does an op strictly between ``i`` and ``j`` write ``blob``?"""
        return _any_between(self._writers.get(blob), self._key(i), self._key(j))

    def touched_between(self, blobs: Iterable[str], i: int, j: int) -> bool:
        """Does an op strictly between ``i`` and ``j`` read or write any of ``blobs``?"""
        lo, hi = self._key(i), self._key(j)
        return any(
            _any_between(self._writers.get(b), lo, hi) or _any_between(self._readers.get(b), lo, hi) for b in blobs
        )

    def last_use(self, blob: str) -> int | None:
        """The last op reading or writing ``blob`` (the end of its live range within the list)."""
        r, w = self._readers.get(blob), self._writers.get(blob)
        if r and w:
            return self._pos(max(r[-1], w[-1]))
        return self._pos(r[-1]) if r else self._pos(w[-1]) if w else None

    def first_writer(self, blob: str) -> int | None:
        """The first op writing ``blob`` (the start of its live range when the list produces it)."""
        keys = self._writers.get(blob)
        return self._pos(keys[0]) if keys else None

    def first_use(self, blob: str) -> int | None:
        """The first op reading or writing ``blob``."""
        r, w = self._readers.get(blob), self._writers.get(blob)
        if r and w:
            return self._pos(min(r[0], w[0]))
        return self._pos(r[0]) if r else self._pos(w[0]) if w else None

    def read_first(self, blob: str) -> bool:
        """Is ``blob`` read before any op writes it (an op reading and writing it reads first)?"""
        r, w = self._readers.get(blob), self._writers.get(blob)
        if not r:
            return False
        return not w or r[0] <= w[0]

    def inputs(self, ordered: bool = True) -> list[str]:
        """Blobs read before any op writes them (what the list needs from outside), by first read (in no
        particular order if not ``ordered``)."""
        writers = self._writers
        found = [b for b, r in self._readers.items() if (w := writers.get(b)) is None or r[0] <= w[0]]
        if not ordered:
            return found
        ios, pos, readers = self._io, self._pos, self._readers

        def first_read(b: str) -> tuple[int, int]:
            i = pos(readers[b][0])
            return i, ios[i][0].index(b)

        return sorted(found, key=first_read)

    def blobs(self) -> list[str]:
        """Every blob the list reads or writes, by first mention (an op's inputs before its outputs)."""

        def first(b: str) -> tuple[int, int]:
            i = self.first_use(b)
            assert i is not None
            ins, outs = self._io[i]
            return i, ins.index(b) if b in ins else len(ins) + outs.index(b)

        return sorted(self._readers.keys() | self._writers.keys(), key=first)

    def produced(self) -> set[str]:
        """Blobs some op writes."""
        return set(self._writers)

    def sole_writers(self) -> dict[str, int]:
        """The op writing each blob that exactly one op writes."""
        pos = self._pos
        return {b: pos(ks[0]) for b, ks in self._writers.items() if len(ks) == 1}

    def first_writers(self) -> dict[str, int]:
        """``first_writer`` of every blob some op writes."""
        pos = self._pos
        return {b: pos(ks[0]) for b, ks in self._writers.items()}

    def last_uses(self) -> dict[str, int]:
        """``last_use`` of every blob an op reads or writes."""
        pos = self._pos
        last = {b: ks[-1] for b, ks in self._readers.items()}
        for b, ks in self._writers.items():
            k = last.get(b)
            if k is None or ks[-1] > k:
                last[b] = ks[-1]
        return {b: pos(k) for b, k in last.items()}

    def writes_before(self, i: int, blob: str) -> int:
        """How many ops before op ``i`` write ``blob``."""
        return bisect_left(self._writers.get(blob, ()), self._key(i))

    def read_version(self, i: int, blob: str) -> int:
        """The SSA version of ``blob`` op ``i`` reads: versions count the writes, from 0 for the first; a blob
        read before its first write is version 0 there and its first write makes version 1."""
        return self.writes_before(i, blob) - (0 if self.read_first(blob) else 1)

    def write_version(self, i: int, blob: str) -> int:
        """The SSA version of ``blob`` op ``i`` writes (see ``read_version``)."""
        return self.writes_before(i, blob) + (1 if self.read_first(blob) else 0)

    def versions(self) -> list[Versions]:
        """``read_version`` and ``write_version`` of every op's reads and writes (``io(i)``, in their order),
        all at once: numbered in one replay of the list (reads see the current version, each op writing a
        blob adds one), kept until the next rewrite."""
        if self._versions is None:
            current: dict[str, int] = {}
            table = []
            for ins, outs in self._io:
                reads = tuple([current.setdefault(b, 0) for b in ins])
                for b in dict.fromkeys(outs) if len(outs) > 1 else outs:
                    current[b] = current[b] + 1 if b in current else 0
                table.append((reads, tuple([current[b] for b in outs])))
            self._versions = table
        return self._versions

    # -- rewrites --------------------------------------------------------------------------------------
    def _rewriting(self) -> list[float]:
        """Called first by every rewrite: drops what is kept until a rewrite, builds the maps the rewrite
        updates (from the list as it still is), and returns the keys as a list (op i's key is i until then)."""
        self._versions = None
        if "_writers" not in self.__dict__:
            self._build_maps()
        if self.keys is None:
            self.keys = list(range(len(self._io)))
        return self.keys

    def delete(self, i: int) -> None:
        keys = self._rewriting()
        self._remove(self._io[i], keys[i])
        del self.ops[i]
        del keys[i]
        del self._io[i]
        self._after_rewrite()

    def insert(self, i: int, op: Any) -> None:
        """Put ``op`` at index ``i`` (before the op there)."""
        keys = self._rewriting()
        lo = keys[i - 1] if i > 0 else None
        hi = keys[i] if i < len(keys) else None
        if lo is None and hi is None:
            key: float = 0
        elif lo is None:
            assert hi is not None
            key = hi - 1
        elif hi is None:
            key = lo + 1
        else:
            key = (lo + hi) / 2
        self.ops.insert(i, op)
        if lo is not None and hi is not None and not lo < key < hi:  # keys this close: renumber all
            self.keys = list(range(len(self.ops)))
            self._index()
        else:
            keys.insert(i, key)
            self._io.insert(i, self._read_io(op))
            self._add(self._io[i], key)
        self._after_rewrite()

    def replace(self, i: int, op: Any) -> None:
        keys = self._rewriting()
        self._remove(self._io[i], keys[i])
        self.ops[i] = op
        self._io[i] = self._read_io(op)
        self._add(self._io[i], keys[i])
        self._after_rewrite()

    def move(self, i: int, dest: int) -> None:
        """Move op ``i`` so it ends at index ``dest`` (``list.insert(dest, list.pop(i))``)."""
        op = self.ops[i]
        self.delete(i)
        self.insert(dest, op)

    @contextmanager
    def edit(self, i: int) -> Iterator[Any]:
        """Change op ``i``'s inputs or outputs in place inside the block (yields the op)."""
        keys = self._rewriting()
        op, key = self.ops[i], keys[i]
        self._remove(self._io[i], key)
        try:
            yield op
        finally:
            self._io[i] = self._read_io(op)
            self._add(self._io[i], key)
        self._after_rewrite()

    def _after_rewrite(self) -> None:
        if self.checked:
            self.check()

    def check(self) -> None:
        """Raise AssertionError if the maps disagree with the list (a rewrite bypassed the view)."""
        keys = self.keys
        if keys is not None:
            n = len(keys)
            assert n == len(self.ops) and all(keys[k] < keys[k + 1] for k in range(n - 1)), "keys out of order"
        before = self._writers, self._readers, self._io
        self._index()
        assert before == (self._writers, self._readers, self._io), "the view is stale"


def _any_between(keys: list[float] | None, lo: float, hi: float) -> bool:
    if not keys:
        return False
    w = bisect_right(keys, lo)
    return w < len(keys) and keys[w] < hi
