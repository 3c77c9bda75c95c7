"""Dataset ops (Caffe2's dataset_ops.cc) over nested records described by field names; see
``tree_cursor`` for the schema. Cursor ops are thread-safe (the cursor's lock)."""

from __future__ import annotations

import numpy as np

from framework.errors import ArgumentError, ShapeError, TypeMismatchError
from framework.ops.gradient import should_not_do_gradient
from framework.ops.io.std_shuffle import std_shuffle
from framework.ops.io.tree_cursor import INT64_MAX, TreeCursor, TreeIterator
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import BOOL, INT, STRINGS, UNKNOWN, Arg, TensorSpec
from framework.ops.validation import expect_in_range

_I32, _I64 = np.dtype(np.int32), np.dtype(np.int64)
_FIELDS = Arg("fields", STRINGS, [], "field names (see CreateTreeCursor)")


def _unknown(args, ins):
    return [UNKNOWN] * args.num_outputs


def _iterator(op: Operator) -> TreeIterator:
    try:
        return TreeIterator(op.args.fields)
    except ShapeError as e:
        raise op.arg_error(str(e)) from None


def _dataset(op: Operator, it: TreeIterator, first: int) -> tuple[list[np.ndarray], list[np.ndarray], list[int]]:
    """(field arrays, lengths arrays, limits per domain) of inputs ``first..``; checks types."""
    n = len(it.fields)
    if len(op.inputs) - first != n:
        raise ShapeError(f"{op.describe()}: {n} fields need {n} data inputs, got {len(op.inputs) - first}")
    data = [op.input(first + i) for i in range(n)]
    for i, x in enumerate(data):
        if x.ndim == 0:
            raise ShapeError(f"{op.describe()}: field {it.fields[i]} ('{op.input_names[first + i]}') is a scalar")
    lengths = []
    for lid in it.length_field_ids:
        x = data[lid]
        if x.dtype != _I32:
            raise TypeMismatchError(
                f"{op.describe()}: lengths field {it.fields[lid]} ('{op.input_names[first + lid]}') must be int32"
            )
        if x.size and x.min() < 0:
            raise ShapeError(f"{op.describe()}: lengths field {it.fields[lid]} has negative lengths")
        lengths.append(x.reshape(-1))
    limits = [INT64_MAX] * it.num_offset_fields
    for i, x in enumerate(data):
        d = it.domain(i)
        limits[d] = min(limits[d], x.shape[0])
    return data, lengths, limits


def _cursor(op: Operator) -> TreeCursor:
    obj = op.inputs[0].held
    if not isinstance(obj, TreeCursor):
        held = "nothing" if obj is None else type(obj).__qualname__
        raise TypeMismatchError(
            f"{op.describe()}: input 0 ('{op.input_names[0]}') holds {held}, expected a TreeCursor (CreateTreeCursor)"
        )
    return obj


@register_op(
    "CreateTreeCursor",
    inputs=0,
    args=[_FIELDS],
    output_docs=[("cursor", "a TreeCursor over the fields")],
    infer=_unknown,
    category="data",
)
class CreateTreeCursor(Operator):
    """Create a cursor over a dataset whose nesting is given by the field names: ``"{prefix}:lengths"``
    defines a domain ``{prefix}`` with one length per entry of its parent domain, and every later
    field ``"{prefix}:..."`` lives in it (e.g. ``a``, ``b:lengths``, ``b:values:lengths``,
    ``b:values:values``). Length fields must come before the fields of their domain."""

    def setup(self) -> None:
        self._it = _iterator(self)

    def run(self) -> None:
        self.outputs[0].reset(TreeCursor(self._it))


@register_op(
    "ResetCursor", inputs=1, outputs=0, input_docs=[("cursor", "a TreeCursor")], infer=_unknown, category="data"
)
class ResetCursor(Operator):
    """Rewind the cursor to the start (thread-safe)."""

    def run(self) -> None:
        c = _cursor(self)
        with c.lock:
            c.offsets = []


@register_op(
    "GetCursorOffset",
    input_docs=[("cursor", "a TreeCursor")],
    output_docs=[("offsets", "int32 [domains]: the cursor's offsets (empty before the first read)")],
    infer=lambda args, ins: [TensorSpec((None,), _I32)],
    category="data",
)
class GetCursorOffset(Operator):
    """The cursor's current offset in each domain."""

    def run(self) -> None:
        c = _cursor(self)
        with c.lock:
            offs = list(c.offsets)
        self.output(0, (len(offs),), _I32)[:] = offs


def _read_into(op: Operator, it: TreeIterator, data, offsets, sizes) -> None:
    for i, x in enumerate(data):
        d = it.domain(i)
        part = x[offsets[d] : offsets[d] + sizes[d]]
        np.copyto(op.output(i, part.shape, x.dtype), part)


@register_op(
    "ReadNextBatch",
    inputs=(1, float("inf")),
    outputs=(1, float("inf")),
    args=[
        Arg("batch_size", INT, 1, "top-level entries to read"),
        Arg("enforce_batch_size", BOOL, False, "output empty fields instead of a last, incomplete batch"),
    ],
    input_docs=[("cursor", "a TreeCursor"), ("dataset_field_0", "the data of each field")],
    output_docs=[("field_0", "the batch's slice of each field")],
    infer=_unknown,
    category="data",
)
class ReadNextBatch(Operator):
    """Read the next ``batch_size`` top-level entries: each field's rows for them (empty at the end)."""

    def run(self) -> None:
        c = _cursor(self)
        data, lengths, limits = _dataset(self, c.it, 1)
        if len(self.outputs) != len(data):
            raise ShapeError(f"{self.describe()}: {len(data)} fields but {len(self.outputs)} outputs")
        with c.lock:
            if not c.offsets:
                c.offsets = [0] * c.it.num_offset_fields
            offsets = list(c.offsets)
            sizes = c.it.advance(lengths, c.offsets, limits, self.args.batch_size)
            if self.args.enforce_batch_size and sizes[0] < self.args.batch_size:
                sizes = [0] * len(sizes)
        _read_into(self, c.it, data, offsets, sizes)


@register_op(
    "ComputeOffset",
    inputs=(1, float("inf")),
    input_docs=[("cursor", "a TreeCursor (rewound)"), ("dataset_field_0", "the data of each field")],
    output_docs=[("offsets", "int64 [records + 1, domains]: each record's offsets")],
    infer=_unknown,
    category="data",
)
class ComputeOffset(Operator):
    """The offsets of every record in every domain (row k: where record k starts; last row: the end);
    the cursor is left at the start."""

    def run(self) -> None:
        c = _cursor(self)
        data, lengths, limits = _dataset(self, c.it, 1)
        n = limits[0]
        out = self.output(0, (n + 1, c.it.num_offset_fields), _I64)
        with c.lock:
            offsets = list(c.offsets) or [0] * c.it.num_offset_fields
            rows = []
            for _ in range(n + 1):
                rows.append(list(offsets))
                c.it.advance(lengths, offsets, limits, 1)
            c.offsets = [0] * c.it.num_offset_fields
        out[...] = rows


@register_op(
    "SortAndShuffle",
    inputs=(1, float("inf")),
    args=[
        Arg("sort_by_field_idx", INT, 1, "root-level int32 field to sort by (-1: no sort)"),
        Arg("batch_size", INT, 1, "batch size"),
        Arg("shuffle_size", INT, 1, "batches per shuffled chunk"),
    ],
    input_docs=[("cursor", "a TreeCursor"), ("dataset_field_0", "the data of each field")],
    output_docs=[("indices", "int64 [records]: the record order")],
    infer=_unknown,
    category="data",
)
class SortAndShuffle(Operator):
    """Record order for ReadRandomBatch: sort by a field, shuffle within chunks of
    ``batch_size * shuffle_size`` (the last chunk, full or not, is left), then shuffle whole
    batches (the trailing partial batch stays last). Each shuffle is Caffe2's
    ``std::shuffle`` with a fresh default-seeded engine (``std_shuffle``), so the order is the
    same on every run and equals Caffe2's. Departure: the sort is stable; Caffe2's
    ``std::sort`` is too up to 16 records, beyond that equal keys may come in another order."""

    def run(self) -> None:
        c = _cursor(self)
        a = self.args
        k = a.sort_by_field_idx  # -1: no sorting
        n = len(c.it.fields)
        expect_in_range(self.describe(), "sort_by_field_idx", k, -1, n, of=f"{n} fields", error=ArgumentError)
        if a.batch_size <= 0 or a.shuffle_size <= 0:
            raise self.arg_error("batch_size and shuffle_size must be > 0")
        data, _, _ = _dataset(self, c.it, 1)
        size = data[k].shape[0] if k != -1 else data[0].shape[0]
        shuffle = a.shuffle_size if a.batch_size * a.shuffle_size <= size else size // a.batch_size
        idx = np.arange(size)
        if k != -1:
            if c.it.length_field_of[k] != -1:
                raise self.arg_error(f"must sort by a field at the root level, {c.it.fields[k]} is nested")
            if data[k].dtype != _I32:
                raise TypeMismatchError(f"{self.describe()}: sort field must be int32, got {data[k].dtype}")
            idx = np.argsort(data[k].reshape(size, -1)[:, 0], kind="stable")
        chunk = a.batch_size * shuffle
        if chunk > 1:
            off = 0
            while off + chunk < size:
                std_shuffle(idx[off : off + chunk])
                off += chunk
        nb = size // a.batch_size
        order = np.arange(nb)
        std_shuffle(order)
        parts = [idx[b * a.batch_size : (b + 1) * a.batch_size] for b in order] + [idx[nb * a.batch_size :]]
        self.output(0, (size,), _I64)[:] = np.concatenate(parts) if parts else idx


@register_op(
    "ReadRandomBatch",
    inputs=(3, float("inf")),
    outputs=(1, float("inf")),
    args=[
        Arg("batch_size", INT, 1, "records per batch"),
        Arg("enforce_batch_size", BOOL, False, "skip a last, incomplete batch"),
        Arg("loop_over", BOOL, False, "start again at the end"),
    ],
    input_docs=[
        ("cursor", "a TreeCursor"),
        ("idx", "int64 record order (SortAndShuffle)"),
        ("offsetsmat", "int64 offsets (ComputeOffset)"),
        ("dataset_field_0", "the data of each field"),
    ],
    output_docs=[("field_0", "the batch's rows of each field")],
    infer=_unknown,
    category="data",
)
class ReadRandomBatch(Operator):
    """Read the next ``batch_size`` records in the order ``idx``, each located by ``offsetsmat``."""

    def run(self) -> None:
        c = _cursor(self)
        a = self.args
        idx, mat = self.input(1), self.input(2)
        data, _, _ = _dataset(self, c.it, 3)
        if idx.dtype != _I64 or mat.dtype != _I64 or mat.ndim != 2 or mat.shape[1] != c.it.num_offset_fields:
            raise TypeMismatchError(
                f"{self.describe()}: idx must be int64 and offsetsmat int64 [records + 1, "
                f"{c.it.num_offset_fields}], got {idx.dtype} {list(idx.shape)} and {mat.dtype} {list(mat.shape)}"
            )
        idx = idx.reshape(-1)
        with c.lock:
            c.offsets = c.offsets[:1] or [0]
            pos = c.offsets[0]
            if a.enforce_batch_size and pos + a.batch_size > idx.size:
                pos = idx.size
            if a.loop_over and pos >= idx.size:
                c.offsets[0] = pos = 0
            c.offsets[0] += a.batch_size
        rows = idx[pos : pos + a.batch_size]
        if rows.size and (rows.min() < 0 or rows.max() + 1 >= mat.shape[0]):
            raise ShapeError(f"{self.describe()}: out of bound when trying to get elem from offsetsmat")
        for i, x in enumerate(data):
            d = c.it.domain(i)
            parts = [x[mat[r, d] : mat[r + 1, d]] for r in rows]
            total = sum(p.shape[0] for p in parts)
            out = self.output(i, (total, *x.shape[1:]), x.dtype)
            if parts:
                np.concatenate(parts, out=out)


@register_op(
    "CheckDatasetConsistency",
    inputs=(1, float("inf")),
    outputs=0,
    args=[_FIELDS],
    input_docs=[("field_0", "the data of each field")],
    infer=_unknown,
    category="data",
)
class CheckDatasetConsistency(Operator):
    """Fail unless the fields form a consistent dataset: fields of one domain have the same number
    of rows, and the lengths add up exactly to the sizes of their domains."""

    def setup(self) -> None:
        self._it = _iterator(self)

    def run(self) -> None:
        it = self._it
        data, lengths, _ = _dataset(self, it, 0)
        limits = [None] * it.num_offset_fields
        for i, x in enumerate(data):
            d = it.domain(i)
            if limits[d] is not None and limits[d] != x.shape[0]:
                raise ShapeError(
                    f"{self.describe()}: inconsistent sizes for fields belonging to same domain: field {i} "
                    f"({it.fields[i]}) has {x.shape[0]} rows, earlier fields {limits[d]}"
                )
            limits[d] = x.shape[0]
        limits = [INT64_MAX if v is None else v for v in limits]
        offsets = [0] * it.num_offset_fields
        it.advance(lengths, offsets, limits, limits[0])
        bad = [j for j in range(len(limits)) if limits[j] != offsets[j] and limits[j] != INT64_MAX]
        if bad:
            raise ShapeError(f"{self.describe()}: lengths do not add up to the domain sizes (domains {bad})")


should_not_do_gradient(
    "CreateTreeCursor", "ResetCursor", "GetCursorOffset", "ReadNextBatch", "ComputeOffset",
    "SortAndShuffle", "ReadRandomBatch", "CheckDatasetConsistency",
)  # fmt: skip
