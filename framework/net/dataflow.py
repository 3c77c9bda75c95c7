"""One dataflow view of an op list: who writes and who reads each blob, kept current while a pass rewrites.

``DataFlow(ops)`` indexes a list of OperatorDefs (declared order, ``input`` / ``output`` only: nested nets'
blobs are not seen, so a pass over control flow must not use it). Each op carries a position key (a float,
increasing along the list); each blob maps to the sorted keys of the ops writing it and of the ops
reading it. Queries take op indices and answer from those maps by bisection: the readers of the value an
op leaves, the producer of the value an op reads, whether a blob is written (anywhere, or between two
ops), in O(log n + degree) instead of a scan of the list (as torch.fx's ``Node.users``).

Rewrites go through the view so the maps follow: ``delete``, ``insert``, ``replace``, ``move``, and
``edit(i)`` around any change of op ``i``'s inputs or outputs in place (argument and type changes need
nothing). ``check()`` rebuilds the maps from the list and compares (for tests).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right, insort
from contextlib import contextmanager
from typing import Any, Iterable, Iterator

__all__ = ["DataFlow"]


class DataFlow:
    """See module doc. ``ops`` is the live list: read it freely, change it only through this view."""

    def __init__(self, ops: list[Any]) -> None:
        self.ops = ops
        self._index(list(range(len(ops))))

    def _index(self, keys: list[float]) -> None:
        self.keys: list[float] = [float(k) for k in keys]
        self._writers: dict[str, list[float]] = {}
        self._readers: dict[str, list[float]] = {}
        for op, k in zip(self.ops, self.keys):
            self._add(op, k)

    def _add(self, op: Any, key: float) -> None:
        for blob in set(op.input):
            insort(self._readers.setdefault(blob, []), key)
        for blob in set(op.output):
            insort(self._writers.setdefault(blob, []), key)

    def _remove(self, op: Any, key: float) -> None:
        for table, blobs in ((self._readers, set(op.input)), (self._writers, set(op.output))):
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

    # -- rewrites --------------------------------------------------------------------------------------
    def delete(self, i: int) -> None:
        self._remove(self.ops[i], self.keys[i])
        del self.ops[i]
        del self.keys[i]

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
            return
        self.keys.insert(i, key)
        self._add(op, key)

    def replace(self, i: int, op: Any) -> None:
        self._remove(self.ops[i], self.keys[i])
        self.ops[i] = op
        self._add(op, self.keys[i])

    def move(self, i: int, dest: int) -> None:
        """Move op ``i`` so it ends at index ``dest`` (``list.insert(dest, list.pop(i))``)."""
        op = self.ops[i]
        self.delete(i)
        self.insert(dest, op)

    @contextmanager
    def edit(self, i: int) -> Iterator[Any]:
        """Change op ``i``'s inputs or outputs in place inside the block (yields the op)."""
        op, key = self.ops[i], self.keys[i]
        self._remove(op, key)
        try:
            yield op
        finally:
            self._add(op, key)

    def check(self) -> None:
        """Raise AssertionError if the maps disagree with the list (a rewrite bypassed the view)."""
        assert len(self.keys) == len(self.ops) and self.keys == sorted(set(self.keys)), "keys out of order"
        writers, readers = self._writers, self._readers
        self._index(self.keys)
        assert (writers, readers) == (self._writers, self._readers), "the view is stale"


def _any_between(keys: list[float] | None, lo: float, hi: float) -> bool:
    if not keys:
        return False
    w = bisect_right(keys, lo)
    return w < len(keys) and keys[w] < hi
