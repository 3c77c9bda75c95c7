"""``RecordQueue`` (Caffe2's ``caffe2.python.record_queue``): a BlobsQueue of schema records with
a writer that checks dataset consistency, a reader, and ``build(reader, process=None)`` making
``num_threads`` concurrent producer steps that read from ``reader`` and enqueue.

``build`` returns ``(queue reader, producer step, exit step, schema)``: run the producer step
concurrently with the consumer, then the exit step closes the queue.
"""

from __future__ import annotations

from typing import Any, Callable

from framework import core, workspace
from framework.caffe2.python.dataio import Reader, Writer
from framework.caffe2.python.schema import Field, Struct


class _QueueReader(Reader):
    def __init__(self, blobs_queue: Any, schema: Field, name: str | None = None) -> None:
        super().__init__(schema)
        self.blobs_queue, self.name = blobs_queue, name or "queue_reader"

    def read(self, read_net: Any) -> tuple[Any, list[Any]]:
        prefix = read_net.NextName(self.name)
        names = [f"{prefix}/{n.replace(':', '_')}" for n in self._schema.field_names()]
        status = f"{prefix}/status"
        fields = list(read_net.SafeDequeueBlobs([self.blobs_queue], [*names, status]))
        return fields[-1], fields[:-1]


class _QueueWriter(Writer):
    def __init__(self, blobs_queue: Any, schema: Field) -> None:
        self.blobs_queue = blobs_queue
        self._schema = schema

    def write(self, writer_net: Any, fields: Any) -> Any:
        if isinstance(fields, Field):
            fields = fields.field_blobs()
        writer_net.CheckDatasetConsistency(list(fields), [], fields=self._schema.field_names())
        status = writer_net.NextName("status")
        writer_net.SafeEnqueueBlobs([self.blobs_queue, *fields], [*fields, status])
        return status


class RecordQueue:
    """A queue of records of ``fields`` (a Struct or a list of (name, field) pairs)."""

    def __init__(self, fields: Any, name: str | None = None, capacity: int = 1, enforce_unique_name: bool = False,
                 num_threads: int = 1) -> None:  # fmt: skip
        self.schema = fields if isinstance(fields, Struct) else Struct(*fields)
        self.name = name or "queue"
        self.num_threads = num_threads
        init_net = core.Net(self.name + "/init_net")
        self.blobs_queue = f"{self.name}/blobs_queue"
        init_net.CreateBlobsQueue(
            [], [self.blobs_queue], capacity=capacity, num_blobs=len(self.schema.field_names()),
            enforce_unique_name=enforce_unique_name,
        )  # fmt: skip
        workspace.RunNetOnce(init_net)
        self.writer = _QueueWriter(self.blobs_queue, self.schema)
        self.reader = _QueueReader(self.blobs_queue, self.schema, self.name + "_reader")
        exit_net = core.Net(self.name + "/exit_net")
        exit_net.CloseBlobsQueue([self.blobs_queue], [])
        self.exit_step = core.execution_step(f"{exit_net.Proto().name}_close_step", exit_net)

    def build(
        self, reader: Reader, process: Callable[[Any, Field], Field] | None = None
    ) -> tuple[Any, Any, Any, Field]:
        producers = []
        for i in range(self.num_threads):
            net_reader = core.Net(f"{self.name}_reader_{i}")
            should_stop, fields = reader.read_record(net_reader)
            net_prod = core.Net(f"{self.name}_queue_writer_{i}")
            if process is not None:
                fields = process(net_prod, fields)
            self.writer.write(net_prod, fields.field_blobs() if isinstance(fields, Field) else fields)
            producers.append(
                core.execution_step(
                    f"producer_{i}",
                    [core.execution_step(f"read_{i}", net_reader), core.execution_step(f"write_{i}", net_prod)],
                    should_stop_blob=should_stop,
                )
            )
        return (
            self.reader,
            core.execution_step("producers", producers, concurrent_substeps=True),
            self.exit_step,
            self.schema,
        )
