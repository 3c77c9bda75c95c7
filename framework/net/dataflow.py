"""One dataflow view of an op list: who writes and who reads each blob, kept current while a pass rewrites.

``DataFlow(ops)`` indexes a list of OperatorDefs in declared order, by their ``input`` / ``output``.
``nested=True`` also counts what the nested nets of If / While (and ONNXWhile with ``disable_scopes``) read
and write in the outer workspace as the op's own reads and writes (``net.nested.op_io``; nets run in a child
workspace, as Do's and RecurrentNetwork's step nets, touch only the op's declared blobs);
``control=True`` counts ``control_input`` as reads. Each op carries a position key (a float,
increasing along the list); each blob maps to the sorted keys of the ops writing it and of the ops
reading it. Queries take op indices and answer from those maps by bisection: the readers of the value an
op leaves, the producer of the value an op reads, whether a blob is written (anywhere, or between two
ops), in O(log n + degree) instead of a scan of the list (as torch.fx's ``Node.users``).

Rewrites go through the view so the maps follow: ``delete``, ``insert``, ``replace``, ``move``, and
``edit(i)`` around any change of op ``i``'s inputs or outputs in place (argument and type changes need
nothing). ``check()`` rebuilds the maps from the list and compares. With ``checked=True`` (the default
when ``FRAMEWORK_CHECK_DATAFLOW`` is set, as the test suite sets it) every rewrite ends with ``check()``, so a
pass that changes the list behind the view fails at the rewrite after.

Net-level facts: ``first_writer`` / ``first_use`` / ``last_use`` (a blob's live range within the list),
``read_first`` (read before any op writes it: an input of the list), ``inputs()`` / ``produced()``, and the
SSA version numbers ``read_version`` / ``write_version`` (``net.ssa``'s numbering).
"""

from __future__ import annotations

import os
from bisect import bisect_left, bisect_right, insort
from contextlib import contextmanager
from typing import Any, Iterable, Iterator

from framework.net.nested import extra_io

__all__ = ["DataFlow"]


class DataFlow:
    """See module doc. ``ops`` is the live list: read it freely, change it only through this view."""

    def __init__(self, ops: Any, *, nested: bool = False, control: bool = False, checked: bool | None = None) -> None:
        self.ops = ops
        self.nested = nested
        self.control = control
        self.checked = bool(os.environ.get("FRAMEWORK_CHECK_DATAFLOW")) if checked is None else checked
        self._index(list(range(len(ops))))

    def io(self, i: int) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """The blobs op ``i`` reads and writes as this view counts them (see the module doc), in their order."""
        return self._io[i]

    def _read_io(self, op: Any) -> tuple[tuple[str, ...], tuple[str, ...]]:
        ins, outs = (self.nested and extra_io(op)) or (op.input, op.output)
        if self.control and op.control_input:
            return (*ins, *op.control_input), tuple(outs)
        return tuple(ins), tuple(outs)

    def _index(self, keys: list[float]) -> None:
        self.keys: list[float] = [float(k) for k in keys]
        self._writers: dict[str, list[float]] = {}
        self._readers: dict[str, list[float]] = {}
        self._io = [self._read_io(op) for op in self.ops]
        for io, k in zip(self._io, self.keys):
            self._add(io, k)

    def _add(self, io: tuple[tuple[str, ...], tuple[str, ...]], key: float) -> None:
        ins, outs = io
        for blob in set(ins):
            insort(self._readers.setdefault(blob, []), key)
        for blob in set(outs):
            insort(self._writers.setdefault(blob, []), key)

    def _remove(self, io: tuple[tuple[str, ...], tuple[str, ...]], key: float) -> None:
        ins, outs = io
        for table, blobs in ((self._readers, set(ins)), (self._writers, set(outs))):
            for blob in blobs:
                keys = table[blob]
                del keys[bisect_left(keys, key)]
                if not keys:
                    del table[blob]

    def _pos(self, key: float) -> int:
        return bisect_left(self.keys, key)

    # -- queries ---------------------------------------------------------------------------------------
    def writers(self, blob: str) -> list[int]:
        """Indices of the ops writing ``blob``, in order."""
        return [self._pos(k) for k in self._writers.get(blob, ())]

    def readers_of(self, blob: str) -> list[int]:
        """Indices of the ops reading ``blob`` (any version), in order."""
        return [self._pos(k) for k in self._readers.get(blob, ())]

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
        w = bisect_right(keys, self.keys[i])
        return self._pos(keys[w]) if w < len(keys) else None

    def producer(self, j: int, blob: str) -> int | None:
        """The last op before ``j`` writing ``blob`` (the producer of the value op ``j`` reads)."""
        keys = self._writers.get(blob)
        if not keys:
            return None
        w = bisect_left(keys, self.keys[j])
        return self._pos(keys[w - 1]) if w else None

    def readers(self, i: int, blob: str) -> list[int]:
        """Ops after ``i`` reading the version of ``blob`` that op ``i`` leaves: up to and including the next
        op writing it (which may read it first)."""
        keys = self._readers.get(blob)
        if not keys:
            return []
        k = self.keys[i]
        nxt = self.next_writer(i, blob)
        lo = bisect_right(keys, k)
        hi = len(keys) if nxt is None else bisect_right(keys, self.keys[nxt])
        return [self._pos(r) for r in keys[lo:hi]]

    def written_between(self, blob: str, i: int, j: int) -> bool:
        """Does an op strictly between ``i`` and ``j`` write ``blob``?"""
        return _any_between(self._writers.get(blob), self._key(i), self._key(j))

    def touched_between(self, blobs: Iterable[str], i: int, j: int) -> bool:
        """Does an op strictly between ``i`` and ``j`` read or write any of ``blobs``?"""
        lo, hi = self._key(i), self._key(j)
        return any(
            _any_between(self._writers.get(b), lo, hi) or _any_between(self._readers.get(b), lo, hi) for b in blobs
        )

    def _key(self, i: int) -> float:
        """Op ``i``'s key; -1 and len(ops) stand for before the first and after the last op."""
        if i < 0:
            return float("-inf")
        if i >= len(self.keys):
            return float("inf")
        return self.keys[i]

    def last_use(self, blob: str) -> int | None:
        """The last op reading or writing ``blob`` (the end of its live range within the list)."""
        ends = [t[blob][-1] for t in (self._readers, self._writers) if blob in t]
        return self._pos(max(ends)) if ends else None

    def first_writer(self, blob: str) -> int | None:
        """The first op writing ``blob`` (the start of its live range when the list produces it)."""
        keys = self._writers.get(blob)
        return self._pos(keys[0]) if keys else None

    def first_use(self, blob: str) -> int | None:
        """The first op reading or writing ``blob``."""
        starts = [t[blob][0] for t in (self._readers, self._writers) if blob in t]
        return self._pos(min(starts)) if starts else None

    def read_first(self, blob: str) -> bool:
        """Is ``blob`` read before any op writes it (an op reading and writing it reads first)?"""
        r, w = self._readers.get(blob), self._writers.get(blob)
        if not r:
            return False
        return not w or r[0] <= w[0]

    def inputs(self) -> list[str]:
        """Blobs read before any op writes them (what the list needs from outside), by first read."""

        def first_read(b: str) -> tuple[int, int]:
            i = self._pos(self._readers[b][0])
            return i, self._io[i][0].index(b)

        return sorted((b for b in self._readers if self.read_first(b)), key=first_read)

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

    # -- rewrites --------------------------------------------------------------------------------------
    def delete(self, i: int) -> None:
        self._remove(self._io[i], self.keys[i])
        del self.ops[i]
        del self.keys[i]
        del self._io[i]
        self._after_rewrite()

    def insert(self, i: int, op: Any) -> None:
        """Put ``op`` at index ``i`` (before the op there)."""
        lo = self.keys[i - 1] if i > 0 else None
        hi = self.keys[i] if i < len(self.keys) else None
        if lo is None and hi is None:
            key = 0.0
        elif lo is None:
            assert hi is not None
            key = hi - 1.0
        elif hi is None:
            key = lo + 1.0
        else:
            key = (lo + hi) / 2
        self.ops.insert(i, op)
        if lo is not None and hi is not None and not lo < key < hi:  # keys this close: renumber all
            self._index(list(range(len(self.ops))))
        else:
            self.keys.insert(i, key)
            self._io.insert(i, self._read_io(op))
            self._add(self._io[i], key)
        self._after_rewrite()

    def replace(self, i: int, op: Any) -> None:
        self._remove(self._io[i], self.keys[i])
        self.ops[i] = op
        self._io[i] = self._read_io(op)
        self._add(self._io[i], self.keys[i])
        self._after_rewrite()

    def move(self, i: int, dest: int) -> None:
        """Move op ``i`` so it ends at index ``dest`` (``list.insert(dest, list.pop(i))``)."""
        op = self.ops[i]
        self.delete(i)
        self.insert(dest, op)

    @contextmanager
    def edit(self, i: int) -> Iterator[Any]:
        """Change op ``i``'s inputs or outputs in place inside the block (yields the op)."""
        op, key = self.ops[i], self.keys[i]
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
        assert len(self.keys) == len(self.ops) and self.keys == sorted(set(self.keys)), "keys out of order"
        before = self._writers, self._readers, self._io
        self._index(self.keys)
        assert before == (self._writers, self._readers, self._io), "the view is stale"


def _any_between(keys: list[float] | None, lo: float, hi: float) -> bool:
    if not keys:
        return False
    w = bisect_right(keys, lo)
    return w < len(keys) and keys[w] < hi
