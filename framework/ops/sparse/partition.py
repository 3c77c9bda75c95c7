"""Sharding by key (Caffe2's ``partition_ops.h``, ``key_split_ops.h``, ``remove_data_blocks_op.h``,
``sparse_dropout_with_replacement_op.cc``).

- ``Partition(KEYS, X_1, ...)`` with N x (inputs) outputs: each key goes to shard ``key mod N`` (non-negative
  remainder), its rows of every input with it; outputs are shard-major (shard j: ``KEYS_j, X_1_j, ...``);
  ``pack_first_input`` stores ``(key - shard) / N`` instead of the key.
- ``LengthsPartition(LENGTHS, KEYS, X_1, ...)``: the same over the keys, plus each shard's lengths (keys per
  segment that went there).
- ``GatherByKey(KEYS, PART_0, ..., PART_{N-1})``: the inverse: rows back in key order.
- ``KeySplit(KEYS)`` with ``categorical_limit`` outputs: output k lists (int32) the positions of key k.
- ``RemoveDataBlocks(DATA, INDICES)``: DATA without the rows INDICES (repeats ignored).
- ``SparseDropoutWithReplacement(X, LENGTHS)``: each segment is replaced, with probability ``ratio``, by the
  single value ``replacement_value`` (even an empty one).
None has a gradient.
"""

from __future__ import annotations

import numpy as np

from framework.errors import ShapeError
from framework.ops.gradient import no_gradient
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import FLOAT, INT, UNKNOWN, Arg, TensorSpec
from framework.ops.sparse.gather import in_range, int_input
from framework.ops.sparse.lengths import lengths_of

I32, I64 = np.dtype(np.int32), np.dtype(np.int64)


def _unknown(args, ins):
    return [UNKNOWN] * args.num_outputs


def shards(keys: np.ndarray, n: int) -> np.ndarray:
    return np.mod(keys.astype(np.int64), n)  # numpy's mod is non-negative for positive n


class _PartitionBase(Operator):
    def partition(self, main: int) -> tuple[np.ndarray, int, list[np.ndarray]]:
        n_in = len(self.inputs)
        if len(self.outputs) % n_in:
            raise ShapeError(f"{self.describe()}: the outputs must be a multiple of the {n_in} inputs")
        parts = len(self.outputs) // n_in
        keys = int_input(self, main)
        shard = shards(keys.reshape(-1), parts)
        order = np.argsort(shard, kind="stable")
        counts = np.bincount(shard, minlength=parts)
        for i in range(main + 1, n_in):
            x = self.input(i)
            if x.ndim < keys.ndim or x.shape[: keys.ndim] != keys.shape:
                raise ShapeError(
                    f"{self.describe()}: input {i} ('{self.input_names[i]}') must start with KEYS' shape "
                    f"{list(keys.shape)}, got {list(x.shape)}"
                )
        bounds = np.r_[0, np.cumsum(counts)]
        pieces = []
        for i in range(main, n_in):
            x = self.input(i)
            flat = x.reshape((keys.size, *x.shape[keys.ndim :]))
            for j in range(parts):
                sel = order[bounds[j] : bounds[j + 1]]
                v = flat[sel]
                if i == main and self.args.pack_first_input:
                    v = ((v.astype(np.int64) - j) // parts).astype(x.dtype)
                pieces.append((j * n_in + i, v))
        return shard, parts, pieces


PARTITION_ARGS = [Arg("pack_first_input", INT, 0, "1: store (key - shard) / partitions instead of the key")]


@register_op(
    "Partition",
    inputs=(1, float("inf")),
    outputs=(1, float("inf")),
    args=PARTITION_ARGS,
    input_docs=[("KEYS", "int32/int64 keys"), ("X", "more inputs whose leading dims are KEYS' shape")],
    output_docs=[("partitions", "shard-major: KEYS_0, X_0, ..., KEYS_1, X_1, ...")],
    infer=_unknown,
    category="sparse",
)
class Partition(_PartitionBase):
    """Shard keys (and the rows of the other inputs) by ``key mod partitions``."""

    def run(self) -> None:
        _, _, pieces = self.partition(0)
        for k, v in pieces:
            self.output(k, v.shape, v.dtype)[...] = v


@register_op(
    "LengthsPartition",
    inputs=(2, float("inf")),
    outputs=(2, float("inf")),
    args=PARTITION_ARGS,
    input_docs=[("LENGTHS", "keys per segment"), ("KEYS", "1-D keys"), ("X", "rows per key")],
    output_docs=[("partitions", "shard-major: LENGTHS_0, KEYS_0, X_0, ..., LENGTHS_1, ...")],
    infer=_unknown,
    category="sparse",
)
class LengthsPartition(_PartitionBase):
    """Partition keyed segments: each shard keeps its keys and how many fell in each segment."""

    def run(self) -> None:
        lengths, keys = lengths_of(self, 0), int_input(self, 1, 1)
        if int(lengths.sum()) != keys.size:
            raise ShapeError(f"{self.describe()}: LENGTHS sum to {int(lengths.sum())}, there are {keys.size} keys")
        shard, parts, pieces = self.partition(1)
        seg = np.repeat(np.arange(len(lengths)), lengths)
        n_in = len(self.inputs)
        for j in range(parts):
            per = np.bincount(seg[shard == j], minlength=len(lengths)) if len(lengths) else np.zeros(0, np.int64)
            self.output(j * n_in, lengths.shape, I32)[...] = per
        for k, v in pieces:
            self.output(k, v.shape, v.dtype)[...] = v


@register_op(
    "GatherByKey",
    inputs=(2, float("inf")),
    input_docs=[("KEYS", "1-D keys, in the wanted order"), ("PARTS", "one input per shard, rows in key order")],
    output_docs=[("OUTPUT", "the rows of every key in KEYS order")],
    infer=_unknown,
    category="sparse",
)
class GatherByKey(Operator):
    """Undo Partition: put each shard's rows back at its keys' positions."""

    def run(self) -> None:
        keys = int_input(self, 0, 1)
        parts = len(self.inputs) - 1
        pieces = [self.input(i) for i in range(1, len(self.inputs))]
        if any(p.ndim < 1 or p.dtype != pieces[0].dtype or p.shape[1:] != pieces[0].shape[1:] for p in pieces):
            raise ShapeError(f"{self.describe()}: the shards must share dtype and trailing shape")
        shard = shards(keys, parts)
        counts = np.bincount(shard, minlength=parts)
        if sum(p.shape[0] for p in pieces) != keys.size or any(c != p.shape[0] for c, p in zip(counts, pieces)):
            raise ShapeError(
                f"{self.describe()}: the shards hold {[p.shape[0] for p in pieces]} rows, the keys "
                f"need {counts.tolist()}"
            )
        out = self.output(0, (keys.size, *pieces[0].shape[1:]), pieces[0].dtype)
        for j, p in enumerate(pieces):
            out[shard == j] = p


@register_op(
    "KeySplit",
    outputs=(1, float("inf")),
    args=[Arg("categorical_limit", INT, 0, "number of keys (= outputs), > 0")],
    input_docs=[("KEYS", "integer keys in [0, categorical_limit)")],
    output_docs=[("positions", "output k: int32 positions of key k")],
    infer=lambda args, ins: [TensorSpec((None,), I32)] * args.num_outputs,
    category="sparse",
)
class KeySplit(Operator):
    """Positions of each key value, one output per value."""

    def setup(self) -> None:
        if self.args.categorical_limit <= 0 or self.args.categorical_limit != len(self.outputs):
            raise self.arg_error(
                f"categorical_limit ({self.args.categorical_limit}) must be > 0 and equal "
                f"the outputs ({len(self.outputs)})"
            )

    def run(self) -> None:
        keys = int_input(self, 0).reshape(-1)
        in_range(self, 0, keys, self.args.categorical_limit, "keys (categorical_limit)")
        for k in range(self.args.categorical_limit):
            pos = np.flatnonzero(keys == k)
            self.output(k, pos.shape, I32)[...] = pos


@register_op(
    "RemoveDataBlocks",
    inputs=2,
    input_docs=[("DATA", "tensor of at least 1 dimension"), ("INDICES", "1-D rows to remove")],
    output_docs=[("OUTPUT", "DATA without those rows")],
    infer=lambda args, ins: [TensorSpec((None, *ins[0].shape[1:]) if ins[0].shape else None, ins[0].dtype)],
    category="sparse",
)
class RemoveDataBlocks(Operator):
    """Drop rows of DATA (repeated indices count once). Empty INDICES of any type (e.g. float64, numpy's
    default for an empty list) copy DATA, as Caffe2 checks the length before the type."""

    def run(self) -> None:
        raw = self.input(1)
        if raw.ndim >= 1 and raw.shape[0] == 0:
            data = self.input(0)
            np.copyto(self.output(0, data.shape, data.dtype), data)
            return
        data, idx = self.input(0), int_input(self, 1, 1)
        if data.ndim < 1:
            raise ShapeError(f"{self.describe()}: DATA should be at least 1-D")
        in_range(self, 1, idx, data.shape[0], "rows of DATA")
        keep = np.ones(data.shape[0], bool)
        keep[idx] = False
        out = self.output(0, (int(keep.sum()), *data.shape[1:]), data.dtype)
        out[...] = data[keep]


@register_op(
    "SparseDropoutWithReplacement",
    inputs=2,
    outputs=2,
    args=[
        Arg("ratio", FLOAT, 0.0, "probability a segment is replaced"),
        Arg("replacement_value", INT, 0, "the value a dropped segment becomes"),
    ],
    input_docs=[("X", "1-D int64 ids"), ("Lengths", "int32 ids per segment")],
    output_docs=[("Y", "int64 ids after dropout"), ("OutputLengths", "int32: kept lengths, 1 where replaced")],
    infer=lambda args, ins: [TensorSpec((None,), I64), TensorSpec(ins[1].shape, I32)],
    category="sparse",
)
class SparseDropoutWithReplacement(Operator):
    """Replace whole segments of ids, with probability ``ratio``, by one ``replacement_value``."""

    def setup(self) -> None:
        if not 0.0 <= self.args.ratio <= 1.0:
            raise self.arg_error(f"ratio must be in [0, 1], got {self.args.ratio}")

    def run(self) -> None:
        x, lengths = self.input(0), lengths_of(self, 1)
        if x.ndim != 1 or x.dtype != I64 or int(lengths.sum()) != x.size:
            raise ShapeError(f"{self.describe()}: X must be 1-D int64 with sum(Lengths) = {int(lengths.sum())} ids")
        dropped = self.rng.random(len(lengths)) < self.args.ratio
        out_lengths = np.where(dropped, 1, lengths).astype(I32)
        seg = np.repeat(np.arange(len(lengths)), lengths)
        pieces = np.full(int(out_lengths.sum()), self.args.replacement_value, I64)
        starts = np.cumsum(out_lengths) - out_lengths
        keep = ~dropped[seg] if seg.size else np.zeros(0, bool)
        within = np.arange(x.size) - np.repeat(np.cumsum(lengths) - lengths, lengths)
        pieces[(starts[seg] + within)[keep]] = x[keep]
        self.output(0, pieces.shape, I64)[...] = pieces
        self.output(1, lengths.shape, I32)[...] = out_lengths


no_gradient(
    "Partition", "LengthsPartition", "GatherByKey", "KeySplit", "RemoveDataBlocks", "SparseDropoutWithReplacement"
)
