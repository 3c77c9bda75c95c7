"""Conversions between Caffe2's ways of describing segments (``utility_ops.h``, ``lengths_tile_op.h``...).

LENGTHS ``[2, 0, 3]`` <-> SEGMENT_IDS ``[0, 0, 2, 2, 2]`` <-> RANGES ``[[0, 2], [2, 0], [2, 3]]``
(offset, length). None of them has a gradient, except LengthsTile (its gradient sums the tiles back).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from framework.errors import ShapeError, TypeMismatchError
from framework.ops.gradient import gradient, no_gradient
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import FLOAT, INT, REQUIRED, UNKNOWN, Arg, TensorSpec

I32 = np.dtype(np.int32)


def lengths_of(op: Operator, i: int) -> np.ndarray:
    """Input ``i`` as a checked 1-D non-negative integer LENGTHS vector."""
    v = op.input(i)
    if v.ndim != 1 or v.dtype.kind not in "iu":
        raise TypeMismatchError(f"{op.describe()}: '{op.input_names[i]}' must be a 1-D integer tensor of lengths")
    if v.size and v.min() < 0:
        raise ShapeError(f"{op.describe()}: '{op.input_names[i]}' has negative lengths")
    return v


def _vec(dtype: Any = I32):
    return lambda args, ins: [TensorSpec((None,), dtype)]


@register_op(
    "LengthsToSegmentIds",
    input_docs=[("lengths", "1-D lengths")],
    output_docs=[("segment_ids", "int32: i repeated lengths[i] times")],
    infer=_vec(),
    category="sparse",
)
class LengthsToSegmentIds(Operator):
    """Segment ids from lengths: ``[1, 3, 0, 2] -> [0, 1, 1, 1, 3, 3]``."""

    def run(self) -> None:
        lengths = lengths_of(self, 0)
        out = self.output(0, (int(lengths.sum()),), I32)
        out[:] = np.repeat(np.arange(len(lengths), dtype=I32), lengths)


@register_op(
    "LengthsToRanges",
    input_docs=[("lengths", "1-D lengths")],
    output_docs=[("ranges", "int32 [len(lengths), 2]: (offset, length) of each segment")],
    infer=lambda args, ins: [TensorSpec((ins[0].shape[0] if ins[0].shape else None, 2), I32)],
    category="sparse",
)
class LengthsToRanges(Operator):
    """(offset, length) pairs from lengths: ``[1, 3, 0, 2] -> [[0, 1], [1, 3], [4, 0], [4, 2]]``."""

    def run(self) -> None:
        lengths = lengths_of(self, 0)
        out = self.output(0, (len(lengths), 2), I32)
        out[:, 1] = lengths
        out[:, 0] = np.cumsum(lengths) - lengths


@register_op(
    "LengthsToShape",
    input_docs=[("lengths", "1-D lengths, all equal")],
    output_docs=[("shape", "int32 [2]: (len(lengths), the common length)")],
    infer=lambda args, ins: [TensorSpec((2,), I32)],
    category="sparse",
)
class LengthsToShape(Operator):
    """The 2-D shape a lengths vector of equal entries describes: ``[3, 3] -> [2, 3]``."""

    def run(self) -> None:
        lengths = lengths_of(self, 0)
        if lengths.size and (lengths != lengths[0]).any():
            raise ShapeError(f"{self.describe()}: all lengths must be equal, got {lengths.tolist()}")
        common = int(lengths[0]) if lengths.size else 0
        if common > np.iinfo(I32).max:
            raise ShapeError(f"{self.describe()}: length {common} does not fit the int32 shape")
        out = self.output(0, (2,), I32)
        out[:] = (len(lengths), common)


@register_op(
    "LengthsToWeights",
    args=[Arg("power", FLOAT, 0.5, "weight = 1 / length ** power")],
    input_docs=[("lengths", "1-D lengths")],
    output_docs=[("weights", "float: each row of segment i weighted 1 / lengths[i] ** power")],
    infer=_vec(np.dtype(np.float32)),
    category="sparse",
)
class LengthsToWeights(Operator):
    """Per-row weights ``1 / len ** power`` of each row's segment (``[2, 1] -> [1/sqrt2, 1/sqrt2, 1]``)."""

    def run(self) -> None:
        lengths = lengths_of(self, 0)
        w = np.power(np.maximum(lengths, 1).astype(np.float64), -self.args.power).astype(np.float32)
        out = self.output(0, (int(lengths.sum()),), np.float32)
        out[:] = np.repeat(w, lengths)


class _FromSegmentIds(Operator):
    def segment_lengths(self) -> np.ndarray:
        ids = self.input(0)
        if ids.ndim != 1 or ids.dtype.kind not in "iu":
            raise TypeMismatchError(f"{self.describe()}: '{self.input_names[0]}' must be 1-D integer segment ids")
        if ids.size and ((ids.min() < 0) or (np.diff(ids) < 0).any()):
            raise ShapeError(f"{self.describe()}: segment ids must be sorted and non-negative")
        k = int(ids[-1]) + 1 if ids.size else 0
        if len(self.inputs) > 1:  # Caffe2's optional DATA input: only its first dimension counts
            k = max(k, self.input(1).shape[0]) if self.input(1).ndim else k
        return np.bincount(ids, minlength=k) if ids.size else np.zeros(k, np.int64)


@register_op(
    "SegmentIdsToLengths",
    inputs=(1, 2),
    input_docs=[("segment_ids", "sorted 1-D ids"), ("data", "optional: its first dimension is the segment count")],
    output_docs=[("lengths", "int32: rows per segment")],
    infer=_vec(),
    category="sparse",
)
class SegmentIdsToLengths(_FromSegmentIds):
    """Lengths from sorted segment ids: ``[0, 0, 2] -> [2, 0, 1]`` (missing ids get length 0)."""

    def run(self) -> None:
        lengths = self.segment_lengths()
        self.output(0, (len(lengths),), I32)[:] = lengths


@register_op(
    "SegmentIdsToRanges",
    inputs=(1, 2),
    input_docs=[("segment_ids", "sorted 1-D ids"), ("data", "optional: its first dimension is the segment count")],
    output_docs=[("ranges", "int32 [K, 2]: (offset, length)")],
    infer=lambda args, ins: [TensorSpec((None, 2), I32)],
    category="sparse",
)
class SegmentIdsToRanges(_FromSegmentIds):
    """(offset, length) per segment from sorted segment ids: ``[0, 0, 2] -> [[0, 2], [2, 0], [2, 1]]``."""

    def run(self) -> None:
        lengths = self.segment_lengths()
        out = self.output(0, (len(lengths), 2), I32)
        out[:, 1] = lengths
        out[:, 0] = np.cumsum(lengths) - lengths


@register_op(
    "LengthsTile",
    inputs=2,
    input_docs=[("DATA", "tensor"), ("LENGTHS", "1-D, one entry per row of DATA")],
    output_docs=[("OUTPUT", "row i of DATA repeated LENGTHS[i] times")],
    infer=lambda args, ins: [TensorSpec((None, *ins[0].shape[1:]), ins[0].dtype) if ins[0].shape else UNKNOWN],
    category="sparse",
)
class LengthsTile(Operator):
    """Repeat each row of DATA by its length: DATA ``[a, b, c]``, LENGTHS ``[1, 0, 2] -> [a, c, c]``."""

    def run(self) -> None:
        data, lengths = self.input(0), lengths_of(self, 1)
        if data.ndim < 1 or data.shape[0] != len(lengths):
            raise ShapeError(
                f"{self.describe()}: DATA has {data.shape[0] if data.ndim else 0} rows, LENGTHS {len(lengths)}"
            )
        out = self.output(0, (int(lengths.sum()), *data.shape[1:]), data.dtype)
        out[...] = np.repeat(data, lengths, axis=0)


@gradient("LengthsTile")
def _lengths_tile_grad(g):
    # Caffe2: the gradient of a tile is the sum of its copies, LengthsSum over the same lengths.
    return [g.op("LengthsSum", [g.GO(0), g.I(1)], [g.GI(0)])]


no_gradient(
    "LengthsToSegmentIds",
    "LengthsToRanges",
    "LengthsToShape",
    "LengthsToWeights",
    "SegmentIdsToLengths",
    "SegmentIdsToRanges",
)


@register_op(
    "LengthsPad",
    inputs=2,
    args=[
        Arg("padding_value", FLOAT, -1.0, "value of the padded rows"),
        Arg("target_length", INT, REQUIRED, "rows per segment after padding (>= every length)"),
    ],
    input_docs=[("DATA", "rows, summing to LENGTHS"), ("LENGTHS", "rows per segment")],
    output_docs=[("OUTPUT", "len(LENGTHS) * target_length rows: each segment padded to target_length")],
    infer=lambda args, ins: [
        TensorSpec(((ins[1].shape[0] * args.target_length) if ins[1].shape else None, *ins[0].shape[1:]), ins[0].dtype)
        if ins[0].shape
        else UNKNOWN
    ],
    category="sparse",
)
class LengthsPad(Operator):
    """Pad every segment of DATA to ``target_length`` rows with ``padding_value`` (Caffe2's lengths_pad_op)."""

    def setup(self) -> None:
        if self.args.target_length < 0:
            raise self.arg_error(f"target_length must be >= 0, got {self.args.target_length}")

    def run(self) -> None:
        data, lengths = self.input(0), lengths_of(self, 1)
        t = self.args.target_length
        rows = data.shape[0] if data.ndim else 0
        if data.ndim < 1 or rows != int(lengths.sum()):
            raise ShapeError(f"{self.describe()}: LENGTHS sum to {int(lengths.sum())}, DATA has {rows} rows")
        if lengths.size and int(lengths.max()) > t:
            raise ShapeError(f"{self.describe()}: a length {int(lengths.max())} exceeds target_length {t}")
        pad = self.args.padding_value
        if data.dtype.kind in "iu":  # Caffe2 casts the float to DATA's type: refuse what a cast cannot keep
            info = np.iinfo(data.dtype)
            if not (math.isfinite(pad) and info.min <= pad <= info.max):
                raise self.arg_error(f"padding_value {pad} does not fit DATA's {data.dtype}")
        out = self.output(0, (len(lengths) * t, *data.shape[1:]), data.dtype)
        out.fill(pad)
        starts = np.cumsum(lengths) - lengths
        seg = np.repeat(np.arange(len(lengths)), lengths)
        within = np.arange(data.shape[0]) - np.repeat(starts, lengths)
        out[seg * t + within] = data


no_gradient("LengthsPad")
