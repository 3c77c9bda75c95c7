"""Rebatching queue ops (Caffe2's caffe2/queue/rebatching_queue_ops.h).

Writers put rows (one row per call, or a batch split into rows along the
first axis with ``enqueue_batch``); readers take ``num_elements`` rows and
get each column stacked under a new first axis, so batch sizes of writers
and readers are independent. Enqueued data is copied.
"""

from __future__ import annotations

import numpy as np

from framework.errors import ShapeError
from framework.ops.gradient import no_gradient
from framework.ops.io.blobs_queue import QueueClosedError, RebatchingQueue
from framework.ops.io.queue_ops import queue_of
from framework.ops.object_blobs import register_create_op, register_method_op, unknown_outputs
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import BOOL, INT, Arg

_unknown = unknown_outputs


def _check_sizes(op: Operator) -> None:
    a = op.args
    if a.capacity < 1 or a.num_blobs < 1:
        raise op.arg_error(f"capacity ({a.capacity}) and num_blobs ({a.num_blobs}) must be >= 1")


register_create_op(
    "CreateRebatchingQueue",
    lambda op: RebatchingQueue(op.args.capacity, op.args.num_blobs),
    "Create a thread-safe queue of rows that readers take in batches of any size.",
    ("queue", "the RebatchingQueue"),
    "data",
    args=[
        Arg("capacity", INT, 1, "rows the queue holds before writers block"),
        Arg("num_blobs", INT, 1, "tensors per row"),
    ],
    check=_check_sizes,
    module=__name__,
)


@register_op(
    "EnqueueRebatchingQueue",
    inputs=(2, float("inf")),
    outputs=0,
    args=[
        Arg(
            "enqueue_batch",
            BOOL,
            False,
            "split the inputs along their first axis into rows (all inputs must share it); "
            "otherwise the inputs are one row",
        )
    ],
    input_docs=[("queue", "the RebatchingQueue"), ("tensors", "num_blobs tensors")],
    infer=_unknown,
    category="data",
)
class EnqueueRebatchingQueue(Operator):
    """Copy the inputs into the queue as one row or (``enqueue_batch``) as one row per first-axis slice.

    Blocks while the queue is full; fails when it is closed before every row went in.
    """

    def run(self) -> None:
        queue = queue_of(self, 0, RebatchingQueue)
        if len(self.inputs) != queue.num_blobs + 1:
            raise ShapeError(
                f"{self.describe()}: queue '{self.input_names[0]}' holds rows of {queue.num_blobs} tensors, "
                f"got {len(self.inputs) - 1}"
            )
        xs = [self.input(i) for i in range(1, len(self.inputs))]
        if self.args.enqueue_batch:
            for i, x in enumerate(xs):
                if x.ndim == 0 or x.shape[0] != xs[0].shape[0] or xs[0].ndim == 0:
                    raise ShapeError(
                        f"{self.describe()}: enqueue_batch needs inputs sharing their first dimension; "
                        f"input {i + 1} ('{self.input_names[i + 1]}') has shape {list(x.shape)}, "
                        f"input 1 {list(xs[0].shape)}"
                    )
            rows = [[x[r].copy() for x in xs] for r in range(xs[0].shape[0])]
        else:
            rows = [[x.copy() for x in xs]]
        if not queue.enqueue(rows):
            raise QueueClosedError(f"{self.describe()}: queue '{self.input_names[0]}' was closed")


@register_op(
    "DequeueRebatchingQueue",
    inputs=1,
    outputs=(1, float("inf")),
    args=[Arg("num_elements", INT, 1, "rows to take (fewer only when the queue is closed)")],
    input_docs=[("queue", "the RebatchingQueue")],
    output_docs=[("tensors", "output i: column i of the rows taken, stacked under a new first axis")],
    infer=_unknown,
    category="data",
)
class DequeueRebatchingQueue(Operator):
    """Take ``num_elements`` rows (blocking) and stack each column; fails when the queue is closed and empty."""

    def setup(self) -> None:
        if self.args.num_elements < 1:
            raise self.arg_error(f"num_elements must be >= 1, got {self.args.num_elements}")

    def run(self) -> None:
        queue = queue_of(self, 0, RebatchingQueue)
        if len(self.outputs) != queue.num_blobs:
            raise ShapeError(
                f"{self.describe()}: queue '{self.input_names[0]}' holds rows of {queue.num_blobs} tensors, "
                f"the op has {len(self.outputs)} outputs"
            )
        rows = queue.dequeue(self.args.num_elements)
        if rows is None:
            raise QueueClosedError(f"{self.describe()}: queue '{self.input_names[0]}' is closed and empty")
        for j in range(len(self.outputs)):
            first = rows[0][j]
            for r, row in enumerate(rows):
                if row[j].shape != first.shape or row[j].dtype != first.dtype:
                    raise ShapeError(
                        f"{self.describe()}: row {r} column {j} is {row[j].dtype} {list(row[j].shape)}, "
                        f"row 0 was {first.dtype} {list(first.shape)}"
                    )
        for j in range(len(self.outputs)):
            out = self.output(j, (len(rows), *rows[0][j].shape), rows[0][j].dtype)
            np.stack([row[j] for row in rows], out=out)


register_method_op(
    "CloseRebatchingQueue",
    RebatchingQueue,
    "CreateRebatchingQueue",
    "close",
    "Close the queue: blocked writers fail, readers drain what is left then fail.",
    ("queue", "the RebatchingQueue"),
    "data",
    module=__name__,
)


no_gradient("CreateRebatchingQueue", "EnqueueRebatchingQueue", "DequeueRebatchingQueue", "CloseRebatchingQueue")
