"""Bucketization (Caffe2's ``bucketize_op``, ``batch_bucketize_op``).

- ``Bucketize(X)`` with sorted ``boundaries``: int32 bucket of each element, the number of boundaries
  strictly below it (``std::lower_bound``: a value equal to boundary b falls in b's bucket).
- ``BatchBucketize(FEATURE, INDICES, BOUNDARIES, LENGTHS)``: for each chosen column ``INDICES[k]`` of the
  float ``FEATURE`` [N, D], its bucket among the ``LENGTHS[k]`` boundaries of column k (consecutive in
  BOUNDARIES): int32 [N, len(INDICES)].
No gradients.
"""

from __future__ import annotations

import numpy as np

from framework.errors import ShapeError, TypeMismatchError
from framework.ops.gradient import no_gradient
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import FLOATS, REQUIRED, Arg, TensorSpec
from framework.ops.sparse.gather import in_range, int_input
from framework.ops.sparse.lengths import lengths_of

I32 = np.dtype(np.int32)


@register_op(
    "Bucketize",
    args=[Arg("boundaries", FLOATS, REQUIRED, "sorted bucket boundaries")],
    input_docs=[("data", "float tensor")],
    output_docs=[("buckets", "int32, data's shape: the number of boundaries below each value")],
    infer=lambda args, ins: [TensorSpec(ins[0].shape, I32)],
    category="sparse",
)
class Bucketize(Operator):
    """Bucket ids by sorted boundaries: boundaries ``[1, 3]``: ``0.5 -> 0``, ``1 -> 0``, ``2 -> 1``, ``5 -> 2``."""

    def setup(self) -> None:
        b = np.asarray(self.args.boundaries, np.float32)
        if b.size > 1 and (np.diff(b) < 0).any():
            raise self.arg_error(f"boundaries must be sorted, got {list(self.args.boundaries)}")
        self.bounds = b

    def run(self) -> None:
        x = self.input(0)
        if x.dtype.kind != "f":
            raise TypeMismatchError(f"{self.describe()}: data must be float, got {x.dtype}")
        self.output(0, x.shape, I32)[...] = np.searchsorted(self.bounds, x, side="left")


@register_op(
    "BatchBucketize",
    inputs=4,
    input_docs=[
        ("feature", "float [N, D]"),
        ("indices", "int32 columns to bucketize"),
        ("boundaries", "float, each column's sorted boundaries one after the other"),
        ("lengths", "int32 boundaries per chosen column"),
    ],
    output_docs=[("bucketized_feature", "int32 [N, len(indices)]")],
    infer=lambda args, ins: [
        TensorSpec((ins[0].shape[0] if ins[0].shape else None, ins[1].shape[0] if ins[1].shape else None), I32)
    ],
    category="sparse",
)
class BatchBucketize(Operator):
    """Bucketize chosen columns of a feature matrix, each by its own boundaries."""

    def run(self) -> None:
        x, idx, bounds, lengths = self.input(0), int_input(self, 1, 1), self.input(2), lengths_of(self, 3)
        if x.ndim != 2 or x.dtype.kind != "f":
            raise ShapeError(f"{self.describe()}: feature must be a 2-D float tensor, got {x.dtype} {list(x.shape)}")
        if len(lengths) != idx.size or bounds.ndim != 1 or int(lengths.sum()) != bounds.size:
            raise ShapeError(
                f"{self.describe()}: lengths ({len(lengths)}) must match indices ({idx.size}) and sum to the "
                f"{bounds.size} boundaries"
            )
        in_range(self, 1, idx, x.shape[1], "columns of feature")
        out = self.output(0, (x.shape[0], idx.size), I32)
        start = 0
        for k, n in enumerate(lengths.tolist()):
            out[:, k] = np.searchsorted(bounds[start : start + n], x[:, idx[k]], side="left")
            start += n


no_gradient("Bucketize", "BatchBucketize")
