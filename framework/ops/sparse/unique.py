"""Unique (Caffe2's ``unique_ops.cc``) and LengthsTopK (``lengths_top_k_op.cc``).

- ``Unique(INDICES) -> (UNIQUE[, REMAPPING])``: the distinct values of a 1-D integer tensor, sorted
  ascending (Caffe2 sorts; its doc promises no order), and int32 REMAPPING with
  ``UNIQUE[REMAPPING] == INDICES``. No gradient (``SHOULD_NOT_DO_GRADIENT``).
- ``LengthsTopK(DATA, LENGTHS) -> (VALUES, INDICES)``: the ``k`` largest entries of each segment of 1-D
  DATA, descending (ties: the earlier entry first), with their int32 positions inside the segment;
  segments shorter than k pad with 0 and index -1. Gradient ``LengthsTopKGradient(LENGTHS, INDICES,
  dVALUES) -> dDATA``.
"""

from __future__ import annotations

import numpy as np

from framework.errors import ShapeError, TypeMismatchError
from framework.memory.allocator import check_elements
from framework.ops.gradient import gradient, should_not_do_gradient
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import INT, REQUIRED, Arg, TensorSpec
from framework.ops.sparse.lengths import lengths_of

I32 = np.dtype(np.int32)


def _unique_infer(args, ins):
    x = ins[0]
    small = x.shape is not None and len(x.shape) == 1 and x.shape[0] is not None and x.shape[0] <= 1
    out = [TensorSpec(x.shape if small else (None,), x.dtype)]
    if args.num_outputs > 1:
        out.append(TensorSpec(x.shape, I32))
    return out


@register_op(
    "Unique",
    outputs=(1, 2),
    input_docs=[("INDICES", "1-D int32/int64 tensor")],
    output_docs=[("UNIQUE", "the distinct values, ascending"), ("REMAPPING", "int32: UNIQUE[REMAPPING] == INDICES")],
    infer=_unique_infer,
    category="sparse",
)
class Unique(Operator):
    """Deduplicate a vector of ids: ``[5, 2, 5] -> [2, 5]`` with remapping ``[1, 0, 1]``."""

    def run(self) -> None:
        x = self.input(0)
        if x.ndim != 1 or x.dtype.kind not in "iu":
            raise TypeMismatchError(
                f"{self.describe()}: INDICES must be a 1-D integer tensor, got {x.dtype} {list(x.shape)}"
            )
        values, inverse = np.unique(x, return_inverse=True)
        self.output(0, values.shape, x.dtype)[:] = values
        if len(self.outputs) > 1:
            self.output(1, x.shape, I32)[:] = inverse.reshape(-1)


should_not_do_gradient("Unique")


def _top_k_positions(data: np.ndarray, lengths: np.ndarray, k: int) -> np.ndarray:
    """N x k positions (inside each segment) of the k largest entries, -1 padded."""
    n = len(lengths)
    width = int(lengths.max()) if n else 0
    grid = np.full((n, max(width, 1)), -np.inf if data.dtype.kind == "f" else np.iinfo(np.int64).min, np.float64)
    starts = np.cumsum(lengths) - lengths
    seg = np.repeat(np.arange(n), lengths)
    within = np.arange(int(lengths.sum())) - np.repeat(starts, lengths)
    grid[seg, within] = data
    order = np.argsort(-grid, axis=1, kind="stable")[:, :k]  # stable: ties keep the earlier entry first
    pos = np.full((n, k), -1, np.int64)
    take = min(k, order.shape[1])
    pos[:, :take] = order[:, :take]
    pos[np.arange(k)[None, :] >= np.minimum(lengths, k)[:, None]] = -1
    return pos


@register_op(
    "LengthsTopK",
    inputs=2,
    outputs=2,
    args=[Arg("k", INT, REQUIRED, "values kept per segment (>= 1)")],
    input_docs=[("DATA", "1-D values, summing to LENGTHS"), ("LENGTHS", "int32 entries per segment")],
    output_docs=[("TOPK_VALUES", "N x k, descending, 0-padded"), ("TOPK_INDICES", "int32 N x k positions, -1-padded")],
    infer=lambda args, ins: [
        TensorSpec((ins[1].shape[0] if ins[1].shape else None, args.k), ins[0].dtype),
        TensorSpec((ins[1].shape[0] if ins[1].shape else None, args.k), I32),
    ],
    category="sparse",
    input_types=["numeric", "int"],
)
class LengthsTopK(Operator):
    """The k largest values of each segment and their positions in it (see module doc)."""

    def setup(self) -> None:
        if self.args.k < 1:
            raise self.arg_error(f"k must be at least 1, got {self.args.k}")

    def run(self) -> None:
        data, lengths = self.input(0), lengths_of(self, 1)
        if data.ndim != 1 or data.size != int(lengths.sum()):
            raise ShapeError(
                f"{self.describe()}: DATA must be 1-D with sum(LENGTHS) = {int(lengths.sum())} entries, got "
                f"{list(data.shape)}"
            )
        k = self.args.k
        check_elements((len(lengths), k), 8, f"{self.describe()}: the top {k} of {len(lengths)} segments")
        pos = _top_k_positions(data, lengths, k)
        starts = (np.cumsum(lengths) - lengths).astype(np.int64)
        valid = pos >= 0
        vals = self.output(0, (len(lengths), k), data.dtype)
        vals.fill(0)
        vals[valid] = data[(starts[:, None] + pos)[valid]]
        self.output(1, (len(lengths), k), I32)[...] = pos


@register_op(
    "LengthsTopKGradient",
    inputs=3,
    args=[Arg("k", INT, REQUIRED, "as the forward op")],
    input_docs=[("LENGTHS", "forward LENGTHS"), ("TOPK_INDICES", "forward TOPK_INDICES"), ("dVALUES", "gradient")],
    output_docs=[("dDATA", "gradient of DATA")],
    infer=lambda args, ins: [TensorSpec((None,), ins[2].dtype)],
    category="sparse",
    private=True,
)
class LengthsTopKGradient(Operator):
    """Route each top-k value's gradient back to its entry; the rest get 0."""

    def run(self) -> None:
        lengths, pos, dy = lengths_of(self, 0), self.input(1), self.input(2)
        n, k = len(lengths), self.args.k
        if pos.shape != (n, k) or dy.shape != (n, k):
            raise ShapeError(f"{self.describe()}: TOPK_INDICES and dVALUES must be {[n, k]}")
        total = int(lengths.sum())
        d = self.output(0, (total,), dy.dtype)
        d.fill(0)
        valid = (pos >= 0) & (np.arange(k)[None, :] < np.minimum(lengths, k)[:, None])
        flat = (np.cumsum(lengths) - lengths)[:, None] + pos
        if (flat[valid] >= total).any() or (pos[valid] >= lengths[:, None].repeat(k, 1)[valid]).any():
            raise ShapeError(f"{self.describe()}: TOPK_INDICES point outside their segments")
        d[flat[valid]] = dy[valid]


@gradient("LengthsTopK")
def _lengths_top_k_grad(g):
    return [g.op("LengthsTopKGradient", [g.I(1), g.O(1), g.GO(0)], [g.GI(0)])]
