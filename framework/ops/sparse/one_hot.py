"""One-hot encodings (Caffe2's ``one_hot_ops.cc``); none has a gradient.

- ``OneHot(INDICES, INDEX_SIZE)``: float ``len(INDICES) x INDEX_SIZE``, 1.0 at each example's index.
- ``BatchOneHot(DATA, LENGTHS, VALUES)``: column j of DATA (N x D) expands to LENGTHS[j] columns, one per
  dictionary value of VALUES (in order), 1 where the entry equals it (DATA's dtype).
- ``BatchBucketOneHot(DATA, LENGTHS, BOUNDARIES)``: column j expands to LENGTHS[j] + 1 buckets over its
  sorted boundaries, right-inclusive: (-inf, b1], (b1, b2], ..., (bn, inf).
- ``SegmentOneHot(LENGTHS, INDICES, INDEX_SIZE)``: float ``len(LENGTHS) x INDEX_SIZE``, 1.0 at every index
  of each segment.
"""

from __future__ import annotations

import numpy as np

from framework.errors import ShapeError, TypeMismatchError
from framework.ops.gradient import no_gradient
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import TensorSpec
from framework.ops.sparse.gather import in_range, int_input
from framework.ops.sparse.lengths import lengths_of

F32 = np.dtype(np.float32)


def index_size(op: Operator, i: int) -> int:
    t = op.input(i)
    if t.size != 1 or t.dtype.kind not in "iu":
        raise TypeMismatchError(f"{op.describe()}: INDEX_SIZE '{op.input_names[i]}' must be one integer")
    n = int(t.reshape(-1)[0])
    if n <= 0:
        raise ShapeError(f"{op.describe()}: INDEX_SIZE must be positive, got {n}")
    return n


@register_op(
    "OneHot",
    inputs=2,
    input_docs=[("INDICES", "the active index of each example"), ("INDEX_SIZE", "one integer: the index size")],
    output_docs=[("ONE_HOTS", "float len(INDICES) x INDEX_SIZE")],
    infer=lambda args, ins: [TensorSpec((ins[0].shape[0] if ins[0].shape else None, None), F32)],
    category="sparse",
)
class OneHot(Operator):
    """A row per example with 1.0 at its index: ``[2, 0]``, size 3 -> ``[[0, 0, 1], [1, 0, 0]]``."""

    def run(self) -> None:
        idx, n = int_input(self, 0, 1), index_size(self, 1)
        in_range(self, 0, idx, n, "columns (INDEX_SIZE)")
        out = self.output(0, (idx.size, n), F32)
        out.fill(0)
        out[np.arange(idx.size), idx] = 1.0


def _columns(op: Operator) -> tuple[np.ndarray, np.ndarray]:
    data = op.input(0)
    if data.ndim < 1:
        raise ShapeError(f"{op.describe()}: DATA '{op.input_names[0]}' must have a batch dimension")
    flat = data.reshape(data.shape[0], int(np.prod(data.shape[1:], dtype=np.int64)))
    lengths = lengths_of(op, 1)
    if len(lengths) != flat.shape[1]:
        raise ShapeError(f"{op.describe()}: LENGTHS has {len(lengths)} entries, DATA has {flat.shape[1]} columns")
    return flat, lengths


@register_op(
    "BatchOneHot",
    inputs=3,
    input_docs=[("DATA", "N x D"), ("LENGTHS", "values per column"), ("VALUES", "the dictionary values, in order")],
    output_docs=[("ONE_HOT", "N x sum(LENGTHS), DATA's dtype")],
    infer=lambda args, ins: [
        TensorSpec((ins[0].shape[0] if ins[0].shape else None, ins[2].shape[0] if ins[2].shape else None), ins[0].dtype)
    ],
    category="sparse",
    input_types={0: "numeric", 2: "numeric"},
)
class BatchOneHot(Operator):
    """Each column of DATA expands to one column per dictionary value: 1 where the entry equals it."""

    def run(self) -> None:
        flat, lengths = _columns(self)
        values = self.input(2)
        if values.ndim != 1 or values.size != int(lengths.sum()):
            raise ShapeError(
                f"{self.describe()}: VALUES has {values.size} entries, LENGTHS sum to {int(lengths.sum())}"
            )
        col = np.repeat(np.arange(len(lengths)), lengths)
        out = self.output(0, (flat.shape[0], values.size), flat.dtype)
        out[...] = flat[:, col] == values.astype(flat.dtype, copy=False)


@register_op(
    "BatchBucketOneHot",
    inputs=3,
    input_docs=[
        ("DATA", "float N x D"),
        ("LENGTHS", "boundaries per column (> 0)"),
        ("BOUNDARIES", "sorted per column"),
    ],
    output_docs=[("ONE_HOT", "float N x sum(LENGTHS + 1)")],
    # N x (len(LENGTHS) + len(BOUNDARIES)), from the shapes alone as Caffe2 infers it
    infer=lambda args, ins: [
        TensorSpec(
            (
                ins[0].shape[0] if ins[0].shape else None,
                ins[1].shape[0] + ins[2].shape[0] if ins[1].shape and ins[2].shape else None,
            ),
            F32,
        )
    ],
    category="sparse",
    input_types={0: "numeric", 2: "numeric"},
)
class BatchBucketOneHot(Operator):
    """Each column of DATA bucketized by its boundaries (right-inclusive buckets), then one-hot. A value
    equal to a boundary repeated r times takes the middle of the buckets it touches: the mean of its
    lower and upper bound positions, rounded down (Caffe2 2020; the 2018 kernel took the lower bound,
    the same bucket whenever the boundaries are distinct)."""

    def run(self) -> None:
        flat, lengths = _columns(self)
        bounds = self.input(2)
        if bounds.ndim != 1 or bounds.size != int(lengths.sum()):
            raise ShapeError(
                f"{self.describe()}: BOUNDARIES has {bounds.size} entries, LENGTHS sum to {int(lengths.sum())}"
            )
        if lengths.size and lengths.min() <= 0:
            raise ShapeError(f"{self.describe()}: every column needs at least one boundary")
        out = self.output(0, (flat.shape[0], int(lengths.sum()) + len(lengths)), F32)
        out.fill(0)
        b0, o0 = 0, 0
        rows = np.arange(flat.shape[0])
        for j, n in enumerate(lengths.tolist()):
            col = bounds[b0 : b0 + n]
            bucket = (
                np.searchsorted(col, flat[:, j], side="left") + np.searchsorted(col, flat[:, j], side="right")
            ) // 2
            out[rows, o0 + bucket] = 1.0
            b0, o0 = b0 + n, o0 + n + 1


@register_op(
    "SegmentOneHot",
    inputs=3,
    input_docs=[("LENGTHS", "indices per segment"), ("INDICES", "active indices"), ("INDEX_SIZE", "one integer")],
    output_docs=[("ONE_HOTS", "float len(LENGTHS) x INDEX_SIZE")],
    infer=lambda args, ins: [TensorSpec((ins[0].shape[0] if ins[0].shape else None, None), F32)],
    category="sparse",
)
class SegmentOneHot(Operator):
    """A row per segment with 1.0 at every index of the segment."""

    def run(self) -> None:
        lengths, idx, n = lengths_of(self, 0), int_input(self, 1, 1), index_size(self, 2)
        if int(lengths.sum()) != idx.size:
            raise ShapeError(f"{self.describe()}: LENGTHS sum to {int(lengths.sum())}, INDICES has {idx.size}")
        in_range(self, 1, idx, n, "columns (INDEX_SIZE)")
        out = self.output(0, (len(lengths), n), F32)
        out.fill(0)
        out[np.repeat(np.arange(len(lengths)), lengths), idx] = 1.0


no_gradient("OneHot", "BatchOneHot", "BatchBucketOneHot", "SegmentOneHot")
