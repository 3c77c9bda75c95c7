"""Sparse <-> dense conversions (Caffe2's ``sparse_to_dense_op.h``, ``sparse_to_dense_mask_op.h``,
``batch_sparse_to_dense_op.cc``).

- ``SparseToDense(INDICES, VALUES[, DATA_TO_INFER_DIM])``: OUTPUT[INDICES[i]] += VALUES[i] (repeated indices
  add up); first dimension ``output_first_dim`` if > 0, else DATA_TO_INFER_DIM's, else max index + 1.
  Gradient: ``Gather(dOUTPUT, INDICES)``.
- ``SparseToDenseMask(INDICES, VALUES, DEFAULT[, LENGTHS])``: ids listed in the ``mask`` argument become
  columns; each example's values land in their id's column (the last one wins), others keep DEFAULT; ids
  not in the mask are dropped; negative ids are skipped (at most ``max_skipped_indices`` over the op's
  life). Gradient ``SparseToDenseMaskGradient(INDICES, dOUTPUT[, LENGTHS])``: the value that won gets
  its column's gradient, the rest 0 (Caffe2 zeroes only part of its output there; we zero all of it).
- ``BatchSparseToDense(LENGTHS, INDICES, VALUES[, SHAPE_LIKE])`` (int64 LENGTHS and INDICES, as Caffe2):
  ``OUTPUT[i, INDICES[k]] = VALUES[k]`` for the k of example i, the rest ``default_value``;
  ``BatchDenseToSparse(LENGTHS, INDICES, DENSE)`` is its inverse. Each is the other's gradient.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from framework.errors import ShapeError, TypeMismatchError
from framework.ops.gradient import gradient
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import BOOL, FLOAT, INT, INTS, REQUIRED, UNKNOWN, Arg, TensorSpec
from framework.ops.sparse.gather import in_range, int_input
from framework.ops.sparse.lengths import lengths_of


def _std_infer(args: Any, ins: list[TensorSpec]) -> list[TensorSpec]:
    values = ins[1]
    if values.shape is None:
        return [TensorSpec(None, values.dtype)]
    first = None
    if args.output_first_dim > 0:
        first = args.output_first_dim
    elif len(ins) == 3 and ins[2].shape:
        first = ins[2].shape[0]
    return [TensorSpec((first, *values.shape[1:]), values.dtype)]


@register_op(
    "SparseToDense",
    inputs=(2, 3),
    args=[Arg("output_first_dim", INT, 0, "first dimension of OUTPUT; 0: from DATA_TO_INFER_DIM or max index + 1")],
    input_docs=[
        ("INDICES", "1-D integer indices"),
        ("VALUES", "one row per index"),
        ("DATA_TO_INFER_DIM", "optional: its first dimension is OUTPUT's"),
    ],
    output_docs=[("OUTPUT", "dense tensor, rows summed by index")],
    infer=_std_infer,
    category="sparse",
    input_types={0: "int", 1: "numeric"},
)
class SparseToDense(Operator):
    """Scatter-add rows of VALUES into a zero tensor at INDICES (see module doc)."""

    def run(self) -> None:
        idx, values = int_input(self, 0, 1), self.input(1)
        if values.ndim < 1 or values.shape[0] != idx.size:
            raise ShapeError(
                f"{self.describe()}: VALUES '{self.input_names[1]}' has shape {list(values.shape)}, expected "
                f"{idx.size} rows (one per index)"
            )
        if self.args.output_first_dim > 0:
            if len(self.inputs) != 2:
                raise self.arg_error("output_first_dim and DATA_TO_INFER_DIM exclude each other")
            first = self.args.output_first_dim
        elif len(self.inputs) == 3:
            like = self.input(2)
            if like.ndim < 1:
                raise ShapeError(f"{self.describe()}: DATA_TO_INFER_DIM must have at least one dimension")
            first = like.shape[0]
        else:
            first = int(idx.max()) + 1 if idx.size else 0
        in_range(self, 0, idx, first, "rows of OUTPUT")
        out = self.output(0, (first, *values.shape[1:]), values.dtype)
        out.fill(0)
        np.add.at(out, idx, values)


@gradient("SparseToDense", copy_arguments=False)
def _std_grad(g):
    return [g.op("Gather", [g.GO(0), g.I(0)], [g.GI(1)])]


MASK_ARGS = [
    Arg("mask", INTS, REQUIRED, "the ids that become columns, in column order"),
    Arg("return_presence_mask", BOOL, False, "also output which entries were present"),
    Arg("max_skipped_indices", INT, 5, "negative ids tolerated over the op's life"),
]


class _MaskBase(Operator):
    def setup(self) -> None:
        mask = list(self.args.mask)
        if not mask:
            raise self.arg_error("mask can't be empty")
        if min(mask) < 0:
            raise self.arg_error("only non-negative ids are allowed in mask")
        if len(set(mask)) != len(mask):
            raise self.arg_error(f"duplicated id in mask {mask}")
        self.mask_ids = np.array(mask, np.int64)
        self.order = np.argsort(self.mask_ids)
        self.sorted_ids = self.mask_ids[self.order]

    def columns(self, ids: np.ndarray) -> np.ndarray:
        """Column of each id, -1 where the id is not in the mask."""
        ids = ids.astype(np.int64, copy=False)
        pos = np.searchsorted(self.sorted_ids, ids)
        pos = np.minimum(pos, len(self.sorted_ids) - 1)
        return np.where(self.sorted_ids[pos] == ids, self.order[pos], -1)

    def rows(self, n_ids: int, lengths_input: int | None) -> tuple[np.ndarray, bool]:
        """(example of each id, whether the output has a batch dimension)."""
        if lengths_input is None or len(self.inputs) <= lengths_input:
            return np.zeros(n_ids, np.int64), False
        lengths = lengths_of(self, lengths_input)
        if int(lengths.sum()) != n_ids:
            raise ShapeError(f"{self.describe()}: LENGTHS sum to {int(lengths.sum())}, there are {n_ids} ids")
        return np.repeat(np.arange(len(lengths)), lengths), True


@register_op(
    "SparseToDenseMask",
    inputs=(3, 4),
    outputs=(1, 2),
    args=MASK_ARGS,
    input_docs=[
        ("INDICES", "1-D integer ids"),
        ("VALUES", "one value (block) per id"),
        ("DEFAULT", "the value of missing ids (VALUES' block shape)"),
        ("LENGTHS", "optional: ids per example (adds the batch dimension)"),
    ],
    output_docs=[("OUTPUT", "[N,] len(mask) x DEFAULT.shape"), ("PRESENCE_MASK", "bool [N,] len(mask)")],
    infer=lambda args, ins: _mask_infer(args, ins),
    category="sparse",
)
class SparseToDenseMask(_MaskBase):
    """Values of the ids listed in ``mask`` laid out as columns (see module doc)."""

    def setup(self) -> None:
        super().setup()
        self.skipped = 0

    def run(self) -> None:
        idx, values, default = int_input(self, 0, 1), self.input(1), self.input(2)
        if values.ndim != default.ndim + 1 or values.shape[0] != idx.size or values.shape[1:] != default.shape:
            raise ShapeError(
                f"{self.describe()}: VALUES has shape {list(values.shape)}, expected {[idx.size, *default.shape]} "
                f"(one DEFAULT-shaped block per id)"
            )
        if values.dtype != default.dtype:
            raise TypeMismatchError(f"{self.describe()}: VALUES is {values.dtype} but DEFAULT is {default.dtype}")
        row, batched = self.rows(idx.size, 3)
        n_rows = int(len(self.input(3))) if batched else 1
        skipped = int((idx < 0).sum())
        if skipped and self.skipped + skipped >= self.args.max_skipped_indices:
            raise ShapeError(
                f"{self.describe()}: too many sparse indices skipped ({self.skipped + skipped} negative ids)"
            )
        cols = self.columns(idx)
        k = len(self.mask_ids)
        shape = ((n_rows,) if batched else ()) + (k,)
        out = self.output(0, shape + default.shape, values.dtype)
        flat = out.reshape((n_rows * k, *default.shape))
        flat[...] = default
        keep = cols >= 0
        flat[row[keep] * k + cols[keep]] = values[keep]  # numpy assigns in order: the last one wins
        if len(self.outputs) > 1:
            present = self.output(1, shape, np.bool_)
            present.fill(False)
            present.reshape(-1)[row[keep] * k + cols[keep]] = True
        self.skipped += skipped


def _mask_infer(args: Any, ins: list[TensorSpec]) -> list[TensorSpec]:
    default = ins[2]
    k = len(args.mask)
    lead = ((ins[3].shape[0] if ins[3].shape else None,) if len(ins) == 4 else ()) + (k,)
    out = [
        TensorSpec(lead + default.shape, ins[1].dtype) if default.shape is not None else TensorSpec(None, ins[1].dtype)
    ]
    if args.num_outputs > 1:
        out.append(TensorSpec(lead, np.dtype(np.bool_)))
    return out


@register_op(
    "SparseToDenseMaskGradient",
    inputs=(2, 3),
    args=MASK_ARGS,
    input_docs=[("INDICES", "forward INDICES"), ("dOUTPUT", "gradient of OUTPUT"), ("LENGTHS", "forward LENGTHS")],
    output_docs=[("dVALUES", "gradient of VALUES")],
    infer=lambda args, ins: [
        TensorSpec(
            (ins[0].shape[0] if ins[0].shape else None, *ins[1].shape[(2 if len(ins) == 3 else 1) :]), ins[1].dtype
        )
        if ins[1].shape is not None
        else UNKNOWN
    ],
    category="sparse",
    private=True,
)
class SparseToDenseMaskGradient(_MaskBase):
    """dVALUES: the value that won each (example, column) gets its gradient, the others 0."""

    def run(self) -> None:
        idx, dy = int_input(self, 0, 1), self.input(1)
        row, batched = self.rows(idx.size, 2)
        k = len(self.mask_ids)
        n_rows = int(len(self.input(2))) if batched else 1
        lead = ((n_rows,) if batched else ()) + (k,)
        if dy.shape[: len(lead)] != lead:
            raise ShapeError(f"{self.describe()}: dOUTPUT has shape {list(dy.shape)}, expected {list(lead)} first")
        block = dy.shape[len(lead) :]
        d = self.output(0, (idx.size, *block), dy.dtype)
        d.fill(0)
        cols = self.columns(idx)
        slot = np.where(cols >= 0, row * k + cols, -1)
        # the last occurrence of each slot won the forward pass
        rev = slot[::-1]
        _, first_in_rev = np.unique(rev, return_index=True)
        winners = idx.size - 1 - first_in_rev
        winners = winners[slot[winners] >= 0]
        d[winners] = dy.reshape((n_rows * k, *block))[slot[winners]]


@gradient("SparseToDenseMask")
def _stdm_grad(g):
    ins = [g.I(0), g.GO(0)] + ([g.I(3)] if len(g.def_.input) == 4 else [])
    return [g.op("SparseToDenseMaskGradient", ins, [g.GI(1)])]  # the forward op's arguments are copied


def _int64(op: Operator, i: int) -> np.ndarray:
    v = op.input(i)
    if v.ndim != 1 or v.dtype.kind not in "iu":
        raise TypeMismatchError(f"{op.describe()}: '{op.input_names[i]}' must be a 1-D integer tensor")
    return v


def _batch_rows(op: Operator, dense_cols: int) -> tuple[np.ndarray, np.ndarray]:
    lengths, idx = lengths_of(op, 0), _int64(op, 1)
    if int(lengths.sum()) != idx.size:
        raise ShapeError(f"{op.describe()}: LENGTHS sum to {int(lengths.sum())}, INDICES has {idx.size} entries")
    in_range(op, 1, idx, dense_cols, "columns of the dense matrix")
    return np.repeat(np.arange(len(lengths)), lengths), idx


@register_op(
    "BatchSparseToDense",
    inputs=(3, 4),
    args=[
        Arg("dense_last_dim", INT, -1, "columns of OUTPUT (or from the 4th input)"),
        Arg("default_value", FLOAT, 0.0, "value of the missing entries"),
    ],
    input_docs=[
        ("LENGTHS", "indices per example"),
        ("INDICES", "column of each value"),
        ("VALUES", "1-D values"),
        ("SHAPE_LIKE", "optional 2-D tensor: its second dimension is dense_last_dim"),
    ],
    output_docs=[("DENSE", "len(LENGTHS) x dense_last_dim")],
    infer=lambda args, ins: [
        TensorSpec(
            (
                ins[0].shape[0] if ins[0].shape else None,
                ins[3].shape[1]
                if len(ins) == 4 and ins[3].shape
                else (args.dense_last_dim if args.dense_last_dim > 0 else None),
            ),
            ins[2].dtype,
        )
    ],
    category="sparse",
)
class BatchSparseToDense(Operator):
    """``DENSE[i, INDICES[k]] = VALUES[k]`` for the values of example i; the rest ``default_value``."""

    def run(self) -> None:
        cols = self.args.dense_last_dim
        if len(self.inputs) == 4:
            like = self.input(3)
            if like.ndim != 2 or (cols != -1 and cols != like.shape[1]):
                raise ShapeError(f"{self.describe()}: SHAPE_LIKE must be 2-D with dense_last_dim columns")
            cols = like.shape[1]
        elif cols < 1:
            raise self.arg_error(f"dense_last_dim must be >= 1, got {cols}")
        values = self.input(2)
        if values.size != self.input(1).size:
            raise ShapeError(f"{self.describe()}: VALUES has {values.size} entries, INDICES {self.input(1).size}")
        row, idx = _batch_rows(self, cols)
        out = self.output(0, (len(self.input(0)), cols), values.dtype)
        out.fill(self.args.default_value)
        out[row, idx] = values.reshape(-1)


@register_op(
    "BatchDenseToSparse",
    inputs=3,
    input_docs=[("LENGTHS", "indices per example"), ("INDICES", "columns to read"), ("DENSE", "2-D tensor")],
    output_docs=[("VALUES", "DENSE[i, INDICES[k]] for the indices of example i")],
    infer=lambda args, ins: [TensorSpec(ins[1].shape, ins[2].dtype)],
    category="sparse",
)
class BatchDenseToSparse(Operator):
    """The values of DENSE at (example, INDICES) pairs: the inverse of BatchSparseToDense."""

    def run(self) -> None:
        dense = self.input(2)
        if self.input(0).ndim != 1:
            raise ShapeError(f"{self.describe()}: LENGTHS must be 1-D, got {list(self.input(0).shape)}")
        if dense.ndim != 2 or dense.shape[0] != len(self.input(0)):
            raise ShapeError(
                f"{self.describe()}: DENSE must be 2-D with one row per example ({len(self.input(0))}), "
                f"got {list(dense.shape)}"
            )
        row, idx = _batch_rows(self, dense.shape[1])
        out = self.output(0, idx.shape, dense.dtype)
        out[...] = dense[row, idx]


@gradient("BatchSparseToDense", copy_arguments=False)
def _bstd_grad(g):
    return [g.op("BatchDenseToSparse", [g.I(0), g.I(1), g.GO(0)], [g.GI(2)])]


@gradient("BatchDenseToSparse")
def _bdts_grad(g):
    return [g.op("BatchSparseToDense", [g.I(0), g.I(1), g.GO(0), g.I(2)], [g.GI(2)])]
