"""The queue objects behind Caffe2's queue ops: BlobsQueue and RebatchingQueue.

Both are thread-safe (one lock and condition variable each) and live in a
blob, like Caffe2's ``shared_ptr<BlobsQueue>`` / ``unique_ptr<RebatchingQueue>``.

``BlobsQueue`` (capacity records of ``num_blobs`` blobs): a write *swaps*
the contents of the writer's blobs into the next free slot (the writer's
blobs get the slot's previous contents, usually nothing), a read swaps a
record out into the reader's blobs, as Caffe2 does. Reads and writes block
until they can proceed or the queue is closed; a read of a closed queue still
drains what is left and fails only once it is empty; a write to a closed
queue still succeeds while there is room and fails when it is full (Caffe2's
``blockingWrite``).

``RebatchingQueue`` holds single rows (lists of numpy arrays): writers split
batches into rows (or enqueue one row), readers concatenate up to
``num_elements`` rows under a new first axis.

Neither has a serializer: saving such a blob is a clear SerializationError,
as in Caffe2 (no serializer is registered for queues). ``close()`` is also
what a failing plan calls on every queue of its workspace, so threads blocked
on a queue wake up instead of hanging (``abort_on_plan_failure``).
"""

from __future__ import annotations

import threading
from collections import deque
from typing import Any, Sequence

import numpy as np

from framework.errors import DBError, OperatorError, TypeMismatchError
from framework.memory.blob import Blob
from framework.memory.tensor import Tensor


class QueueClosedError(OperatorError):
    """A blocking queue op could not proceed: the queue is closed (and empty/full) or the read timed out."""


class BlobsQueue:
    """A bounded FIFO of records, each ``num_blobs`` blob contents; see module doc."""

    abort_on_plan_failure = True

    def __init__(self, name: str, capacity: int, num_blobs: int, field_names: Sequence[str] = ()) -> None:
        self.name = name
        self.capacity = int(capacity)
        self.num_blobs = int(num_blobs)
        self.field_names = list(field_names)
        self._records: deque[list[Any]] = deque()
        self._cond = threading.Condition()
        self._closing = False
        self.reads = 0
        self.writes = 0

    @property
    def closed(self) -> bool:
        return self._closing

    def size(self) -> int:
        with self._cond:
            return len(self._records)

    def blocking_write(self, blobs: Sequence[Blob]) -> bool:
        """Move the contents of ``blobs`` into the queue (waiting for room); False if closed."""
        with self._cond:
            self._cond.wait_for(lambda: self._closing or len(self._records) < self.capacity)
            if len(self._records) >= self.capacity:  # closed and full (Caffe2 still writes while room is left)
                return False
            self._records.append([b.held for b in blobs[: self.num_blobs]])
            for b in blobs[: self.num_blobs]:
                b.reset()
            self.writes += 1
            self._cond.notify_all()
            return True

    def blocking_read(self, blobs: Sequence[Blob], timeout_secs: float = 0.0) -> bool:
        """Move the oldest record into ``blobs``; False when closed and empty (or on timeout > 0)."""
        with self._cond:
            ready = lambda: self._closing or bool(self._records)  # noqa: E731
            if timeout_secs > 0:
                self._cond.wait_for(ready, timeout=timeout_secs)
            else:
                self._cond.wait_for(ready)
            if not self._records:
                return False
            record = self._records.popleft()
            for b, obj in zip(blobs, record):
                b.reset(obj)
            self.reads += 1
            self._cond.notify_all()
            return True

    def close(self) -> None:
        with self._cond:
            self._closing = True
            self._cond.notify_all()

    def __repr__(self) -> str:
        state = ", closed" if self._closing else ""
        return f"BlobsQueue({self.name!r}, {len(self._records)}/{self.capacity} records of {self.num_blobs}{state})"


class RebatchingQueue:
    """A bounded FIFO of rows (lists of arrays) that rebatches on dequeue; see module doc."""

    abort_on_plan_failure = True

    def __init__(self, capacity: int, num_blobs: int) -> None:
        self.capacity = int(capacity)
        self.num_blobs = int(num_blobs)
        self._rows: deque[list[np.ndarray]] = deque()
        self._cond = threading.Condition()
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed

    def size(self) -> int:
        with self._cond:
            return len(self._rows)

    def enqueue(self, rows: list[list[np.ndarray]]) -> bool:
        """Append ``rows`` (waiting for room as needed); False if closed before all went in."""
        idx = 0
        while idx < len(rows):
            with self._cond:
                self._cond.wait_for(lambda: self._closed or len(self._rows) < self.capacity)
                if self._closed:
                    return False
                while len(self._rows) < self.capacity and idx < len(rows):
                    self._rows.append(rows[idx])
                    idx += 1
                self._cond.notify_all()
        return True

    def dequeue(self, num_elements: int) -> list[list[np.ndarray]] | None:
        """Up to ``num_elements`` rows (fewer only when closed); None when closed and empty."""
        out: list[list[np.ndarray]] = []
        while len(out) < num_elements:
            with self._cond:
                self._cond.wait_for(lambda: self._closed or bool(self._rows))
                if not self._rows and self._closed:
                    break
                while self._rows and len(out) < num_elements:
                    out.append(self._rows.popleft())
                self._cond.notify_all()
        return out or None

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def __repr__(self) -> str:
        state = ", closed" if self._closed else ""
        return f"RebatchingQueue({len(self._rows)}/{self.capacity} rows of {self.num_blobs}{state})"


def abort_queues(objects: Any) -> int:
    """Close every queue among ``objects`` (blob contents); the number closed. Used by plans on failure."""
    n = 0
    for obj in objects:
        if getattr(obj, "abort_on_plan_failure", False):
            obj.close()
            n += 1
    return n


class QueueRecordReader:
    """A DB reader over a BlobsQueue (``CreateBlobsQueueDB``): each read dequeues one record.

    ``read()`` returns ``(key, value)`` from columns ``key_index`` (-1: empty
    key) and ``value_index``; each must hold str/bytes or a one-element string
    tensor. A closed, empty queue or a timeout is a DBError.
    """

    def __init__(self, queue: BlobsQueue, key_index: int = -1, value_index: int = 0, timeout_secs: float = 0.0):
        self.queue, self.key_index, self.value_index = queue, key_index, value_index
        self.timeout_secs = timeout_secs
        self.db_type, self.source = "blobs_queue", queue.name
        self._blobs = [Blob(f"{queue.name}_read_{k}") for k in range(queue.num_blobs)]
        self._lock = threading.Lock()

    def read(self) -> tuple[str, bytes]:
        with self._lock:
            if not self.queue.blocking_read(self._blobs, self.timeout_secs):
                raise DBError(f"reading BlobsQueue '{self.queue.name}': timed out or the queue is closed")
            key = _string_of(self._blobs[self.key_index], self.queue.name) if self.key_index >= 0 else b""
            value = _string_of(self._blobs[self.value_index], self.queue.name)
        return key.decode("utf-8", "replace"), value

    def __repr__(self) -> str:
        return f"QueueRecordReader({self.queue!r})"


def _string_of(blob: Blob, queue_name: str) -> bytes:
    obj = blob.held
    if isinstance(obj, Tensor) and obj.is_allocated and obj.numel >= 1 and obj.meta.name == "std::string":
        obj = obj.data().reshape(-1)[0]
    if isinstance(obj, str):
        return obj.encode("utf-8")
    if isinstance(obj, bytes):
        return obj
    raise TypeMismatchError(
        f"BlobsQueue '{queue_name}' record column holds {type(obj).__qualname__}, expected a string "
        "(str/bytes blob or string tensor)"
    )
