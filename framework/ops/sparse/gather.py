"""Gathers over batches and ranges (Caffe2's ``batch_gather_ops.h``, ``utility_ops.h`` GatherRanges and
LengthsGather, ``gather_ranges_to_dense_op.h``). Plain ``Gather`` lives in the tensor family.

- ``BatchGather(DATA, INDICES)``: ``OUTPUT[b, i...] = DATA[b, INDICES[i...]]`` (gathers along axis 1);
  with ``match_outer`` each batch entry has its own indices, ``OUTPUT[b, i...] = DATA[b, INDICES[b, i...]]``;
  gradient ``BatchGatherGradient(DATA, INDICES, dOUTPUT)`` scatters-adds back (repeated indices add up).
- ``GatherRanges(DATA, RANGES)``: RANGES is N x M x (offset, length) into 1-D DATA; OUTPUT concatenates the
  pieces in order, LENGTHS (int32, N) sums each example's range lengths.
- ``GatherRangesToDense(DATA, RANGES[, KEY])``: one dense N x lengths[j] output per range column j; empty
  ranges and ranges whose length differs from ``lengths[j]`` give zeros (counted; more than
  ``max_mismatched_ratio`` / ``max_empty_ratio`` of them, after ``min_observation`` examples, is an error).
  With KEY (int64), each range's items are sorted by their keys first.
- ``LengthsGather(ITEMS, LENGTHS, INDICES)``: the segments ``INDICES`` of ITEMS (segments by LENGTHS),
  concatenated.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from framework.errors import ShapeError, TypeMismatchError
from framework.ops.gradient import gradient, no_gradient
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import BOOL, FLOAT, INT, INTS, REQUIRED, UNKNOWN, Arg, TensorSpec
from framework.ops.sparse.lengths import lengths_of
from framework.ops.validation import NUMERIC_T, check_indices, expect_axis, expect_kind, expect_rank

I32 = np.dtype(np.int32)


def int_input(op: Operator, i: int, ndim: int | None = None, what: str = "indices") -> np.ndarray:
    v = op.input(i)
    if v.dtype.kind not in "iu" or (ndim is not None and v.ndim != ndim):
        dims = f"{ndim}-D " if ndim is not None else ""
        raise TypeMismatchError(
            f"{op.describe()}: {what} '{op.input_names[i]}' must be a {dims}integer tensor, got {v.dtype} "
            f"{list(v.shape)}"
        )
    return v


def in_range(op: Operator, i: int, idx: np.ndarray, n: int, what: str) -> None:
    check_indices(op, i, idx, n, what=f"{n} {what}")


def _batch_gather_infer(args: Any, ins: list[TensorSpec]) -> list[TensorSpec]:
    data, idx = ins
    if data.shape is None or idx.shape is None or len(data.shape) < 2 or (args.match_outer and not idx.shape):
        return [TensorSpec(None, data.dtype)]
    return [TensorSpec(_batch_gather_shape(tuple(data.shape), tuple(idx.shape), args.match_outer), data.dtype)]


def _batch_gather_shape(data: tuple, idx: tuple, match_outer: bool) -> tuple:
    return (data[0], *(idx[1:] if match_outer else idx), *data[2:])


_MATCH_OUTER = Arg("match_outer", BOOL, False, "INDICES' first dim is DATA's batch: each entry b has its own indices")


def _batch_indices(op: Operator, data: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """INDICES as a (batch, k) array of positions on DATA's axis 1, checked (one row shared by all batch
    entries without match_outer)."""
    if data.ndim < 2:
        raise ShapeError(f"{op.describe()}: DATA '{op.input_names[0]}' must be at least 2-D, got {list(data.shape)}")
    if op.args.match_outer and (idx.ndim < 1 or idx.shape[0] != data.shape[0]):
        raise ShapeError(
            f"{op.describe()}: with match_outer, INDICES '{op.input_names[1]}' {list(idx.shape)} must start with "
            f"DATA's batch dim {data.shape[0]}"
        )
    in_range(op, 1, idx, data.shape[1], "entries of DATA's axis 1")
    if op.args.match_outer:
        return idx.reshape(data.shape[0], int(np.prod(idx.shape[1:], dtype=np.int64)))
    return idx.reshape(1, idx.size)


@register_op(
    "BatchGather",
    inputs=2,
    args=[_MATCH_OUTER],
    input_docs=[("DATA", "tensor of at least 2 dimensions"), ("INDICES", "integer indices into DATA's axis 1")],
    output_docs=[("OUTPUT", "DATA.shape[0] x INDICES.shape (INDICES.shape[1:] with match_outer) x DATA.shape[2:]")],
    infer=_batch_gather_infer,
    category="sparse",
)
class BatchGather(Operator):
    """Gather along axis 1 for every batch entry: ``OUTPUT[b, i...] = DATA[b, INDICES[i...]]``; with
    ``match_outer`` (Caffe2 2020) INDICES starts with DATA's batch dim and ``OUTPUT[b, i...] =
    DATA[b, INDICES[b, i...]]``."""

    def run(self) -> None:
        data, idx = self.input(0), int_input(self, 1)
        rows = _batch_indices(self, data, idx)
        out = self.output(0, _batch_gather_shape(data.shape, idx.shape, self.args.match_outer), data.dtype)
        if not self.args.match_outer:
            np.take(data, idx, axis=1, out=out)
            return
        b = data.shape[0]
        block = int(np.prod(data.shape[2:], dtype=np.int64))
        picked = data.reshape(b, data.shape[1], block)[np.arange(b)[:, None], rows]
        out.reshape(picked.shape)[...] = picked


@register_op(
    "BatchGatherGradient",
    inputs=3,
    args=[
        Arg("axis", INT, 1, "DATA's axis the forward gathered along (Gather's gradient passes its own)"),
        Arg("match_outer", BOOL, False, "INDICES share DATA's dims before axis (one index set per outer position)"),
    ],
    input_docs=[("DATA", "forward DATA"), ("INDICES", "forward INDICES"), ("dOUTPUT", "gradient of OUTPUT")],
    output_docs=[("dDATA", "gradient of DATA (repeated indices add up)")],
    infer=lambda args, ins: [ins[0]],
    category="sparse",
    private=True,
)
class BatchGatherGradient(Operator):
    """Scatter-add of dOUTPUT back into DATA's shape along ``axis`` (default 1, BatchGather's; Gather on
    another axis uses it too). dOUTPUT is shaped DATA[:axis] + INDICES + DATA[axis+1:] (INDICES[axis:]
    with ``match_outer``, each outer position then scattering with its own indices)."""

    def run(self) -> None:
        data, idx, dy = self.input(0), int_input(self, 1), self.input(2)
        expect_kind(self, 2, dy, NUMERIC_T)  # a scatter-add of strings or objects has no meaning
        a = expect_axis(self.describe(), self.args.axis, data.ndim, of=f"DATA {list(data.shape)}")
        match_outer = bool(self.args.match_outer)
        if match_outer and idx.shape[:a] != data.shape[:a]:
            raise ShapeError(
                f"{self.describe()}: with match_outer INDICES {list(idx.shape)} must start with DATA's dims "
                f"before axis {a} {list(data.shape[:a])}"
            )
        in_range(self, 1, idx, data.shape[a], f"entries of DATA's axis {a}")
        want = (*data.shape[:a], *(idx.shape[a:] if match_outer else idx.shape), *data.shape[a + 1 :])
        if dy.shape != want:
            raise ShapeError(f"{self.describe()}: dOUTPUT has shape {list(dy.shape)}, expected {list(want)}")
        d = self.output(0, data.shape, dy.dtype)
        d.fill(0)
        outer = int(np.prod(data.shape[:a], dtype=np.int64))
        d3 = d.reshape(outer, data.shape[a], -1)
        if match_outer:
            rows = idx.reshape(outer, -1)
            g = dy.reshape(outer, rows.shape[1], d3.shape[2])
            np.add.at(d3, (np.arange(outer)[:, None], rows), g)
        else:
            flat = idx.reshape(-1)
            np.add.at(d3, (slice(None), flat), dy.reshape(outer, flat.size, d3.shape[2]))


@gradient("BatchGather")
def _batch_gather_grad(g):
    return [g.op("BatchGatherGradient", [g.I(0), g.I(1), g.GO(0)], [g.GI(0)])]


def checked_ranges(op: Operator, i: int, data_len: int) -> np.ndarray:
    """RANGES input ``i`` as an N x M x 2 array of (offset, length), each inside DATA."""
    r = int_input(op, i, 3, "RANGES")
    if r.shape[2] != 2:
        raise ShapeError(f"{op.describe()}: RANGES '{op.input_names[i]}' must be N x M x 2, got {list(r.shape)}")
    if r.size:
        start, length = r[..., 0].astype(np.int64), r[..., 1].astype(np.int64)
        # length > data_len - start: start + length could wrap past int64
        if (start < 0).any() or (length < 0).any() or (length > data_len - start).any():
            raise ShapeError(
                f"{op.describe()}: RANGES '{op.input_names[i]}' has a range outside DATA's {data_len} items "
                "(or a negative offset/length)"
            )
    return r


def range_positions(r: np.ndarray) -> np.ndarray:
    """Positions into DATA of every item the ranges ``r`` (K x 2) cover, in order."""
    start, length = r[:, 0].astype(np.int64), r[:, 1].astype(np.int64)
    total = int(length.sum())
    if total == 0:
        return np.zeros(0, np.int64)
    first = np.repeat(start - (np.cumsum(length) - length), length)
    return first + np.arange(total)


@register_op(
    "GatherRanges",
    inputs=2,
    outputs=2,
    input_docs=[("DATA", "1-D tensor"), ("RANGES", "N x M x 2 (offset, length) ranges into DATA")],
    output_docs=[("OUTPUT", "the ranges' items concatenated"), ("LENGTHS", "int32 [N]: items per example")],
    infer=lambda args, ins: [
        TensorSpec((None,), ins[0].dtype),
        TensorSpec((ins[1].shape[0],) if ins[1].shape else (None,), I32),
    ],
    category="sparse",
)
class GatherRanges(Operator):
    """Concatenate DATA[offset : offset + length] over all ranges, example by example; LENGTHS per example.

    Shape inference departs from Caffe2's schema, which infers OUTPUT as ``[DATA.size]`` (a bound, not the
    size the kernel writes) and LENGTHS with RANGES' type: OUTPUT's size depends on the ranges' values, so it
    is inferred unknown here, and LENGTHS int32, as the kernel writes it. An inferred shape is taken as the
    real one (the memory planner, the shape checks of ``hypothesis_test_util``)."""

    def run(self) -> None:
        data = self.input(0)
        expect_rank(self, 0, data, 1, "DATA")
        r = checked_ranges(self, 1, len(data))
        if r.shape[1] == 0:
            raise ShapeError(
                f"{self.describe()}: RANGES '{self.input_names[1]}' must hold at least one range per example"
            )
        pos = range_positions(r.reshape(-1, 2))
        lengths = r[..., 1].astype(np.int64).sum(axis=1)
        out = self.output(0, (len(pos),), data.dtype)
        np.take(data, pos, out=out)
        self.output(1, (r.shape[0],), I32)[:] = lengths


@register_op(
    "GatherRangesToDense",
    inputs=(2, 3),
    outputs=(1, float("inf")),
    args=[
        Arg("lengths", INTS, REQUIRED, "expected length of each range column (one output each)"),
        Arg("min_observation", INT, 10000, "examples seen before the ratios are checked"),
        Arg("max_mismatched_ratio", FLOAT, 0.01, "allowed share of ranges whose length differs"),
        Arg("max_empty_ratio", FLOAT, 1.0, "allowed share of empty ranges"),
    ],
    input_docs=[
        ("DATA", "1-D tensor"),
        ("RANGES", "N x M x 2 (offset, length) ranges"),
        ("KEY", "optional int64 [len(DATA)]: items of a range are sorted by key"),
    ],
    output_docs=[("OUTPUT_j", "N x lengths[j] dense values of range column j")],
    infer=lambda args, ins: [
        TensorSpec((ins[1].shape[0] if ins[1].shape else None, n), ins[0].dtype) for n in args.lengths
    ],
    category="sparse",
)
class GatherRangesToDense(Operator):
    """One dense output per range column; mismatched or empty ranges give zero rows (see module doc)."""

    def setup(self) -> None:
        lengths = self.args.lengths
        if not lengths or any(n <= 0 for n in lengths):
            raise self.arg_error(f"lengths must be non-empty and positive, got {list(lengths)}")
        if len(lengths) != len(self.outputs):
            raise self.arg_error(f"{len(lengths)} lengths but {len(self.outputs)} outputs")
        if self.args.min_observation <= 0:
            raise self.arg_error("min_observation must be at least 1")
        self.total = 0
        self.empty = np.zeros(len(lengths), np.int64)
        self.mismatched = np.zeros(len(lengths), np.int64)

    def run(self) -> None:
        data = self.input(0)
        expect_rank(self, 0, data, 1, "DATA")
        r = checked_ranges(self, 1, len(data))
        want = self.args.lengths
        if r.shape[1] != len(want):
            raise ShapeError(f"{self.describe()}: RANGES has {r.shape[1]} range columns, lengths has {len(want)}")
        key = None
        if len(self.inputs) == 3:
            key = self.input(2)
            if key.dtype != np.int64 or key.shape != data.shape:
                raise TypeMismatchError(f"{self.describe()}: KEY must be int64 with DATA's shape {list(data.shape)}")
        n = r.shape[0]
        length = r[..., 1]
        empty = (length == 0).sum(axis=0)
        mismatched = ((length != 0) & (length != np.asarray(want))).sum(axis=0)
        total = self.total + n
        floor = max(total, self.args.min_observation)
        for j in range(len(want)):
            for what, count, ratio in (
                ("length mismatch", self.mismatched[j] + mismatched[j], self.args.max_mismatched_ratio),
                ("empty ranges", self.empty[j] + empty[j], self.args.max_empty_ratio),
            ):
                if ratio < 1.0 and count > floor * ratio:
                    raise ShapeError(
                        f"{self.describe()}: ratio of {what} for range column {j} is {count}/{total}, "
                        f"which exceeds {ratio}"
                    )
        outs = [self.output(j, (n, w), data.dtype) for j, w in enumerate(want)]
        for j, w in enumerate(want):
            out = outs[j]
            out.fill(0)
            ok = np.flatnonzero(length[:, j] == w)
            if not ok.size:
                continue
            pos = r[ok, j, 0].astype(np.int64)[:, None] + np.arange(w)
            if key is not None:
                pos = np.take_along_axis(pos, np.argsort(key[pos], axis=1, kind="stable"), axis=1)
            out[ok] = data[pos]
        self.total = total
        self.empty += empty
        self.mismatched += mismatched


@register_op(
    "LengthsGather",
    inputs=3,
    input_docs=[
        ("ITEMS", "tensor whose rows form segments"),
        ("LENGTHS", "rows per segment"),
        ("INDICES", "segments to gather"),
    ],
    output_docs=[("OUTPUT", "the rows of the chosen segments, concatenated")],
    infer=lambda args, ins: [
        TensorSpec((None, *ins[0].shape[1:]), ins[0].dtype) if ins[0].shape is not None else UNKNOWN
    ],
    category="sparse",
)
class LengthsGather(Operator):
    """Segments of ITEMS chosen by INDICES: ITEMS ``[a, b, c, d]``, LENGTHS ``[1, 3]``, INDICES ``[1, 0]``
    -> ``[b, c, d, a]``."""

    def run(self) -> None:
        items, lengths, idx = self.input(0), lengths_of(self, 1), int_input(self, 2, 1)
        if items.ndim < 1 or int(lengths.sum()) != items.shape[0]:
            raise ShapeError(
                f"{self.describe()}: LENGTHS sum to {int(lengths.sum())}, ITEMS has "
                f"{items.shape[0] if items.ndim else 0} rows"
            )
        in_range(self, 2, idx, len(lengths), "segments")
        offsets = np.cumsum(lengths) - lengths
        r = np.stack([offsets[idx], lengths[idx]], axis=1) if idx.size else np.zeros((0, 2), np.int64)
        pos = range_positions(r)
        out = self.output(0, (len(pos), *items.shape[1:]), items.dtype)
        np.take(items, pos, axis=0, out=out)


no_gradient("GatherRanges", "GatherRangesToDense", "LengthsGather")
