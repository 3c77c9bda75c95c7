"""Blob queue ops (Caffe2's caffe2/queue/queue_ops.h): prefetching between nets and steps.

A reader step fills a queue (``EnqueueBlobs``/``SafeEnqueueBlobs``) while a
train step empties it (``DequeueBlobs``/``SafeDequeueBlobs``), each in its
own concurrent substep of a plan. ``CloseBlobsQueue`` ends the exchange: the
Safe variants then report ``status`` = true once the queue is drained (or
full, for writers), which a step uses as its ``should_stop_blob`` to end
cleanly. The plain variants fail instead (Caffe2's op returns false), which
fails the net. See ``blobs_queue.py`` for the queue itself.
"""

from __future__ import annotations

import bisect

import numpy as np

from framework.errors import ArgumentError, SchemaError, ShapeError
from framework.memory.blob import Blob
from framework.memory.tensor import Tensor
from framework.ops.gradient import no_gradient
from framework.ops.io.blobs_queue import BlobsQueue, QueueClosedError, QueueRecordReader
from framework.ops.object_blobs import held, register_method_op, unknown_outputs
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import BOOL, FLOAT, FLOATS, INT, STRINGS, UNKNOWN, Arg, TensorSpec
from framework.ops.validation import expect_in_range

_BOOL = np.dtype(np.bool_)


def queue_of(op: Operator, i: int = 0, cls: type = BlobsQueue) -> object:
    """The queue held by input ``i`` of ``op``; TypeMismatchError naming op and blob otherwise."""
    return held(op, i, cls, f"Create{cls.__name__}")


def _check_width(op: Operator, queue: BlobsQueue, n: int, what: str) -> None:
    if n != queue.num_blobs:
        raise ShapeError(
            f"{op.describe()}: queue '{op.input_names[0]}' holds records of {queue.num_blobs} blobs, "
            f"the op has {n} {what}"
        )


def _data_unknown_status_bool(args, ins):
    return [UNKNOWN] * (args.num_outputs - 1) + [TensorSpec((), _BOOL)]


_unknown = unknown_outputs


def _set_status(op: Operator, ok: bool) -> None:
    op.output(len(op.outputs) - 1, (), _BOOL)[...] = not ok


@register_op(
    "CreateBlobsQueue",
    inputs=0,
    outputs=1,
    args=[
        Arg("capacity", INT, 1, "records the queue holds before writers block"),
        Arg("num_blobs", INT, 1, "blobs per record"),
        Arg("enforce_unique_name", BOOL, False, "accepted for compatibility (records are not workspace blobs here)"),
        Arg("field_names", STRINGS, [], "optional names of the num_blobs fields"),
    ],
    output_docs=[("queue", "the BlobsQueue")],
    infer=_unknown,
    category="data",
)
class CreateBlobsQueue(Operator):
    """Create a bounded, thread-safe FIFO of records of ``num_blobs`` blobs.

    Departure: Caffe2 keeps the records in workspace blobs named
    ``<queue>_<i>_<j>``; here they are private to the queue object.
    """

    def setup(self) -> None:
        a = self.args
        if a.capacity < 1 or a.num_blobs < 1:
            raise self.arg_error(f"capacity ({a.capacity}) and num_blobs ({a.num_blobs}) must be >= 1")
        if a.field_names and len(a.field_names) != a.num_blobs:
            raise self.arg_error(f"field_names has {len(a.field_names)} names, num_blobs is {a.num_blobs}")

    def run(self) -> None:
        a = self.args
        self.outputs[0].reset(BlobsQueue(self.output_names[0], a.capacity, a.num_blobs, a.field_names))


def _close_input_queue(op: Operator) -> None:
    """``cancel`` of the ops that block on a queue: close it, so a waiting read or write returns (as when
    another op closes it); a queue blob not made yet is left alone."""
    queue = op.inputs[0].held
    if isinstance(queue, BlobsQueue):
        queue.close()


def _enqueue_setup(op: Operator, n_data: int) -> None:
    if len(op.inputs) != n_data + 1:
        raise SchemaError(
            f"{op.describe()}: takes the queue plus one input per data output ({n_data}), got {len(op.inputs)} inputs"
        )


@register_op(
    "EnqueueBlobs",
    inputs=(2, float("inf")),
    outputs=(1, float("inf")),
    enforce_inplace=lambda i, o: i == o + 1,
    input_docs=[("queue", "the BlobsQueue"), ("blobs", "the record's blobs (moved into the queue)")],
    output_docs=[("blobs", "the same blobs: after the call they hold what the queue slot held (usually nothing)")],
    infer=_unknown,
    category="data",
)
class EnqueueBlobs(Operator):
    """Move one record into the queue, blocking while it is full; fails when the queue is closed and full."""

    def setup(self) -> None:
        _enqueue_setup(self, len(self.outputs))

    cancel = _close_input_queue

    def run(self) -> None:
        queue = queue_of(self)
        _check_width(self, queue, len(self.outputs), "data blobs")
        if not queue.blocking_write(self.outputs):
            raise QueueClosedError(f"{self.describe()}: queue '{self.input_names[0]}' is closed and full")


@register_op(
    "SafeEnqueueBlobs",
    inputs=(2, float("inf")),
    outputs=(2, float("inf")),
    enforce_inplace=lambda i, o: i == o + 1,
    input_docs=[("queue", "the BlobsQueue"), ("blobs", "the record's blobs")],
    output_docs=[("blobs", "the same blobs"), ("status", "bool scalar, last output: true when the queue was closed")],
    infer=_data_unknown_status_bool,
    category="data",
)
class SafeEnqueueBlobs(Operator):
    """EnqueueBlobs that reports a closed, full queue in ``status`` (true) instead of failing."""

    def setup(self) -> None:
        _enqueue_setup(self, len(self.outputs) - 1)

    cancel = _close_input_queue

    def run(self) -> None:
        queue = queue_of(self)
        _check_width(self, queue, len(self.outputs) - 1, "data outputs")
        _set_status(self, queue.blocking_write(self.outputs[:-1]))


@register_op(
    "DequeueBlobs",
    inputs=1,
    outputs=(1, float("inf")),
    args=[Arg("timeout_secs", FLOAT, 0.0, "give up after this many seconds (0: wait forever)")],
    input_docs=[("queue", "the BlobsQueue")],
    output_docs=[("blobs", "the dequeued record")],
    infer=_unknown,
    category="data",
)
class DequeueBlobs(Operator):
    """Move the oldest record out of the queue into the outputs, blocking while it is empty.

    Fails (QueueClosedError) when the queue is closed and empty, or on timeout.
    """

    cancel = _close_input_queue

    def run(self) -> None:
        queue = queue_of(self)
        _check_width(self, queue, len(self.outputs), "outputs")
        if not queue.blocking_read(self.outputs, self.args.timeout_secs):
            why = "closed and empty" if queue.closed else f"empty after {self.args.timeout_secs} s"
            raise QueueClosedError(f"{self.describe()}: queue '{self.input_names[0]}' is {why}")


@register_op(
    "SafeDequeueBlobs",
    inputs=1,
    outputs=(2, float("inf")),
    args=[
        Arg(
            "num_records",
            INT,
            1,
            "if > 1, dequeue up to this many records and concatenate each column along its first axis "
            "(tensors at least 1-D with equal inner dimensions)",
        )
    ],
    input_docs=[("queue", "the BlobsQueue")],
    output_docs=[("blobs", "the dequeued data"), ("status", "bool scalar, last output: true when closed and empty")],
    infer=_data_unknown_status_bool,
    category="data",
)
class SafeDequeueBlobs(Operator):
    """DequeueBlobs that reports a closed, empty queue in ``status`` (true) instead of failing.

    With ``num_records`` > 1 the records read are concatenated column by column;
    if the queue closes after at least one record, the partial batch is output
    with status false (as Caffe2).
    """

    def setup(self) -> None:
        if self.args.num_records < 1:
            raise self.arg_error(f"num_records must be > 0, got {self.args.num_records}")
        self._scratch = [Blob(f"{self.output_names[k]}_record") for k in range(len(self.outputs) - 1)]

    cancel = _close_input_queue

    def run(self) -> None:
        queue = queue_of(self)
        size = len(self.outputs) - 1
        _check_width(self, queue, size, "data outputs")
        if self.args.num_records == 1:
            _set_status(self, queue.blocking_read(self.outputs[:-1]))
            return
        columns: list[list[np.ndarray]] = [[] for _ in range(size)]
        for _ in range(self.args.num_records):
            if not queue.blocking_read(self._scratch):
                break
            for col, blob in enumerate(self._scratch):
                obj = blob.held
                if not isinstance(obj, Tensor) or not obj.is_allocated or obj.ndim == 0:
                    raise ShapeError(
                        f"{self.describe()}: column {col} of a record is {obj!r}; num_records > 1 needs "
                        "tensors of at least one dimension"
                    )
                columns[col].append(obj.data())
        if columns[0]:
            for col, parts in enumerate(columns):
                inner = {(p.shape[1:], p.dtype) for p in parts}
                if len(inner) != 1:
                    raise ShapeError(f"{self.describe()}: column {col} records differ in inner shape/dtype: {inner}")
                total = sum(p.shape[0] for p in parts)
                out = self.output(col, (total, *parts[0].shape[1:]), parts[0].dtype)
                np.concatenate(parts, axis=0, out=out)
        _set_status(self, bool(columns[0]))


@register_op(
    "WeightedSampleDequeueBlobs",
    inputs=(1, float("inf")),
    outputs=(2, float("inf")),
    args=[
        Arg("weights", FLOATS, [], "sampling weight of each input queue (default: all 1)"),
        Arg(
            "table_idx_blob",
            INT,
            -1,
            "index of the output (among the data outputs) that receives the chosen queue's index (int32 [1]); -1: none",
        ),
    ],
    input_docs=[("queues", "BlobsQueues of equal record width")],
    output_docs=[("blobs", "the dequeued record"), ("status", "bool scalar, last output: true when closed and empty")],
    infer=_data_unknown_status_bool,
    category="data",
)
class WeightedSampleDequeueBlobs(Operator):
    """Pick one input queue at random with probability proportional to ``weights``, dequeue from it.

    Status (last output) is true when the chosen queue is closed and empty.
    """

    def setup(self) -> None:
        a = self.args
        if a.table_idx_blob >= len(self.outputs) - 1:
            raise self.arg_error(f"table_idx_blob {a.table_idx_blob} must be < {len(self.outputs) - 1}")
        weights = list(a.weights) or [1.0] * len(self.inputs)
        if len(weights) != len(self.inputs):
            raise self.arg_error(f"{len(weights)} weights for {len(self.inputs)} input queues")
        w = np.asarray(weights, np.float32)
        total = float(w.sum(dtype=np.float32))
        if not total > 0.0:
            raise self.arg_error("sum of weights must be positive")
        if (w < 0).any() or not np.isfinite(w).all():
            raise self.arg_error(f"each weight must be finite and non-negative, got {weights}")
        cum = np.cumsum(w / np.float32(total), dtype=np.float32)
        cum[-1] = np.float32(1.0001)  # as Caffe2, so r in [0, 1) always lands
        self._cum = cum.tolist()

    def run(self) -> None:
        queues = [queue_of(self, i) for i in range(len(self.inputs))]
        size = len(self.outputs) - 1
        r = float(self.rng.random(dtype=np.float32))
        idx = bisect.bisect_left(self._cum, r)
        queue = queues[idx]
        _check_width(self, queue, size, "data outputs")
        ok = queue.blocking_read(self.outputs[:-1])
        if self.args.table_idx_blob >= 0:
            self.output(self.args.table_idx_blob, (1,), np.int32)[0] = idx
        _set_status(self, ok)


register_method_op(
    "CloseBlobsQueue",
    BlobsQueue,
    "CreateBlobsQueue",
    "close",
    "Close the queue: blocked readers and writers wake up; readers drain what is left, then fail "
    "(or report status true in the Safe variants).",
    ("queue", "the BlobsQueue"),
    "data",
    module=__name__,
)


@register_op(
    "CreateBlobsQueueDB",
    inputs=1,
    outputs=1,
    args=[
        Arg("key_blob_index", INT, -1, "column of the record holding the key (-1: no key)"),
        Arg("value_blob_index", INT, 0, "column of the record holding the value"),
        Arg("timeout_secs", FLOAT, 0.0, "timeout of each read (0: wait forever)"),
    ],
    input_docs=[("queue", "a BlobsQueue whose records hold strings (str/bytes blobs or string tensors)")],
    output_docs=[("reader", "a DB reader over the queue, for TensorProtosDBInput / ImageInput")],
    infer=_unknown,
    category="data",
)
class CreateBlobsQueueDB(Operator):
    """A DB reader whose records are dequeued from a BlobsQueue (one record per read).

    A read of a closed, empty queue (or a timeout) fails with a DBError.
    """

    def setup(self) -> None:
        a = self.args
        if a.value_blob_index < 0:
            raise ArgumentError(f"{self.describe()}: value_blob_index must be >= 0, got {a.value_blob_index}")

    def run(self) -> None:
        queue = queue_of(self)
        a = self.args
        for k in (a.key_blob_index, a.value_blob_index):
            of = f"records of {queue.num_blobs} blobs"
            expect_in_range(self.describe(), "blob index", k, 0, queue.num_blobs, of=of, error=ArgumentError)
        reader = QueueRecordReader(queue, a.key_blob_index, a.value_blob_index, a.timeout_secs)
        self.outputs[0].reset(reader)


no_gradient(
    "CreateBlobsQueue",
    "EnqueueBlobs",
    "DequeueBlobs",
    "CloseBlobsQueue",
    "SafeEnqueueBlobs",
    "SafeDequeueBlobs",
    "WeightedSampleDequeueBlobs",
    "CreateBlobsQueueDB",
)
