"""ConcatBatchMatMulBatchGatherOp: the pairwise dot products of n feature vectors per example
(DLRM-style interactions), gathered at given positions of the n x n Gram matrix."""

from __future__ import annotations

import numpy as np

from framework.errors import ShapeError, TypeMismatchError
from framework.ops.gradient import should_not_do_gradient
from framework.ops.operator import Operator
from framework.ops.pointwise import float_input
from framework.ops.registry import register_op
from framework.ops.schema import TensorSpec


def _infer(args, ins):
    idx, x = ins[0], ins[1] if len(ins) > 1 else None
    if x is None or x.shape is None or idx.shape is None or not x.shape:
        return [TensorSpec(None, np.dtype(np.float32))]
    return [TensorSpec((x.shape[0],) + tuple(idx.shape), np.dtype(np.float32))]


@register_op(
    "ConcatBatchMatMulBatchGatherOp",
    inputs=(2, float("inf")),
    input_docs=[
        ("indices", "int32 positions in the flattened n x n Gram matrix"),
        ("X_i", "n tensors B x ... (same shape and dtype): the feature vectors"),
    ],
    output_docs=[("Y", "B x indices.shape: Gram[b].flat[indices]")],
    infer=_infer,
    category="math",
)
class ConcatBatchMatMulBatchGatherOp(Operator):
    """For each example b: stack the n inputs' rows (each flattened to E values) into an n x E
    matrix S, form S S^T, and gather its flattened entries at `indices`. Inference only (Caffe2
    registers no gradient)."""

    def run(self) -> None:
        idx = self.input(0)
        if idx.dtype.kind not in "iu":
            raise TypeMismatchError(
                f"{self.describe()}: indices ('{self.input_names[0]}') must be integers, got {idx.dtype}"
            )
        xs = [float_input(self, i) for i in range(1, len(self.inputs))]
        first = xs[0]
        if first.ndim < 1:
            raise ShapeError(f"{self.describe()}: inputs need a batch dimension")
        for i, x in enumerate(xs[1:], 2):
            if x.shape != first.shape or x.dtype != first.dtype:
                raise ShapeError(
                    f"{self.describe()}: input {i} ('{self.input_names[i]}') is {x.dtype} {list(x.shape)}, "
                    f"expected {first.dtype} {list(first.shape)} as input 1"
                )
        n, b = len(xs), first.shape[0]
        if idx.size and (idx.min() < 0 or idx.max() >= n * n):
            raise ShapeError(f"{self.describe()}: indices ('{self.input_names[0]}') outside [0, {n * n})")
        e = int(np.prod(first.shape[1:], dtype=np.int64))
        s = np.stack([x.reshape(b, e) for x in xs], axis=1).astype(np.float64)  # B x n x E
        gram = np.matmul(s, s.transpose(0, 2, 1)).reshape(b, n * n)
        out = gram[:, idx.reshape(-1)].reshape((b,) + idx.shape)
        self.output(0, out.shape, np.dtype(np.float32))[...] = out


should_not_do_gradient("ConcatBatchMatMulBatchGatherOp")
