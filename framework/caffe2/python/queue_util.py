"""Queues as readers and writers (a subset of Caffe2's ``caffe2.python.queue_util``).

``Queue(capacity, schema)`` (handler blob ``<name>[_k]/handler``): ``setup(init_net)`` adds the
CreateBlobsQueue; ``writer().write(net, fields)`` adds SafeEnqueueBlobs, ``reader().read(net)`` adds
SafeDequeueBlobs and returns its status as ``should_stop`` (true once the queue is closed and
drained); ``close(net)`` adds CloseBlobsQueue. ``enqueue``/``dequeue``/``close_queue`` are Caffe2's
helpers. Queues are ``dataio.Pipe``s; ``framework.caffe2.python.pipeline`` pipes into and out of them. As in
Caffe2, a queue's reader/writer used through ``read_ex``/``write_ex`` attaches the queue to the
local init net under ``TaskGroup.LOCAL_SETUP``, so the TaskGroup running the pipe creates it
(``setup``) once before its tasks start.
"""

from __future__ import annotations

import logging
from typing import Any, Sequence

from framework import core
from framework.caffe2.python.dataio import Pipe, Reader, Writer
from framework.caffe2.python.schema import Field
from framework.caffe2.python.task import TaskGroup

log = logging.getLogger("framework.caffe2.python.queue_util")


def enqueue(net: Any, queue: Any, data_blobs: Sequence[Any], status: Any = None) -> Any:
    """Add SafeEnqueueBlobs of ``data_blobs`` (a blob given twice is copied first); the status blob."""
    status = status or net.NextName("status")
    blobs: list[Any] = []
    for b in data_blobs:
        if str(b) in [str(x) for x in blobs]:
            log.warning("need to copy blob %s to enqueue", b)
            b = net.Copy(b)
        blobs.append(b)
    results = net.SafeEnqueueBlobs([queue, *blobs], [*blobs, status])
    return results[-1]


def dequeue(net: Any, queue: Any, num_blobs: int, status: Any = None, field_names: Sequence[str] | None = None,
            num_records: int = 1) -> tuple[list[Any], Any]:  # fmt: skip
    """Add SafeDequeueBlobs; ``(data blobs, status blob)``."""
    if field_names is not None:
        if len(field_names) != num_blobs:
            raise ValueError(f"{len(field_names)} field names for {num_blobs} blobs")
        names = [net.NextName(n.replace(":", "_")) for n in field_names]
    else:
        names = [net.NextName("data", i) for i in range(num_blobs)]
    status = status or net.NextName("status")
    results = list(net.SafeDequeueBlobs([queue], [*names, status], num_records=num_records))
    return results[:-1], results[-1]


def close_queue(step: Any, *queues: Any) -> Any:
    """An execution step running ``step`` then closing ``queues``."""
    close_net = core.Net("close_queue_net")
    for q in queues:
        close_net.CloseBlobsQueue([q], [])
    return core.execution_step(f"{close_net.Proto().name}_wraper_step", [step, core.execution_step("close", close_net)])


class _QueueReader(Reader):
    def __init__(self, wrapper: QueueWrapper, num_dequeue_records: int = 1) -> None:
        super().__init__(wrapper._schema)
        self._wrapper, self._num = wrapper, num_dequeue_records

    def setup_ex(self, init_net: Any, exit_net: Any) -> None:
        exit_net.CloseBlobsQueue([self._wrapper.queue()], [])

    def read_ex(self, local_init_net: Any, local_finish_net: Any) -> tuple[list[Any], Any, list[Any]]:
        self._wrapper._new_reader(local_init_net)
        return super().read_ex(local_init_net, local_finish_net)

    def read(self, read_net: Any) -> tuple[Any, list[Any]]:
        names = self._schema.field_names() if self._schema is not None else None
        n = len(names) if names is not None else self._wrapper.num_blobs
        fields, status = dequeue(read_net, self._wrapper.queue(), n, field_names=names, num_records=self._num)
        return status, fields


class _QueueWriter(Writer):
    def __init__(self, wrapper: QueueWrapper) -> None:
        self._wrapper = wrapper
        self._schema = wrapper._schema

    def setup_ex(self, init_net: Any, exit_net: Any) -> None:
        exit_net.CloseBlobsQueue([self._wrapper.queue()], [])

    def write(self, writer_net: Any, fields: list[Any]) -> None:
        enqueue(writer_net, self._wrapper.queue(), fields)

    def write_ex(self, fields: list[Any], local_init_net: Any, local_finish_net: Any, status: Any = None) -> list[Any]:
        """One enqueue net; its status goes to ``status`` (true once the queue is closed)."""
        self._wrapper._new_writer(self._schema, local_init_net)
        enqueue_net = core.Net("enqueue")
        enqueue(enqueue_net, self._wrapper.queue(), fields, status)
        return [enqueue_net]


class QueueWrapper(Pipe):
    """Reader and writer over an existing queue blob."""

    def __init__(self, handler: Any, schema: Field | None = None, num_dequeue_records: int = 1) -> None:
        super().__init__(schema, TaskGroup.LOCAL_SETUP)
        self._queue, self._num = handler, num_dequeue_records
        self.num_blobs = len(schema.field_names()) if schema is not None else 1

    def reader(self) -> _QueueReader:
        return _QueueReader(self, self._num)

    def writer(self) -> _QueueWriter:
        return _QueueWriter(self)

    def queue(self) -> Any:
        return self._queue


class Queue(QueueWrapper):
    """A BlobsQueue of ``capacity`` records of ``schema``; create it with ``setup(init_net)``."""

    def __init__(self, capacity: int, schema: Field | None = None, name: str = "queue", num_dequeue_records: int = 1):
        super().__init__(f"{core.Net(name).Name()}/handler", schema, num_dequeue_records)
        self.capacity = capacity
        self._setup_done = False

    def setup(self, global_init_net: Any) -> None:
        """Add the CreateBlobsQueue to ``global_init_net`` (once: later calls add nothing). Returns
        None, as Caffe2's: a TaskGroup's LOCAL_SETUP collection takes returned values as nets."""
        if self._schema is None:
            raise ValueError("this queue does not have a schema")
        if self._setup_done:
            return
        self._setup_done = True
        global_init_net.CreateBlobsQueue(
            [], [self._queue], capacity=self.capacity, num_blobs=len(self._schema.field_names()),
            field_names=self._schema.field_names(),
        )  # fmt: skip

    def close(self, net: Any) -> None:
        net.CloseBlobsQueue([self._queue], [])
