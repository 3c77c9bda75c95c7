"""Scatters and a positional reduction (Caffe2's ``utility_ops``, ``lengths_reducer_ops``).

- ``ScatterAssign(DATA, INDICES, SLICES) -> DATA`` (in place): ``DATA[INDICES[i]] = SLICES[i]``; with
  repeated indices the last slice wins (Caffe2: "arbitrary"). No gradient.
- ``Scatter(DATA, INDICES, UPDATES) -> OUTPUT`` (``axis``, default 1): ONNX ScatterElements: OUTPUT is DATA
  with ``OUTPUT[..., INDICES[i, j], ...] = UPDATES[i, j]`` along ``axis`` (INDICES and UPDATES share a
  shape). No gradient.
- ``SparseLengthsPositionalWeightedSum(DATA, WEIGHT, INDICES, LENGTHS)``: like SparseLengthsWeightedSum,
  but the j-th id of every segment is weighted by ``WEIGHT[j]`` (its position). Caffe2 registers no
  gradient for it (asking for one is an error here too).
"""

from __future__ import annotations

import numpy as np

from framework.errors import ShapeError
from framework.ops.gradient import no_gradient, should_not_do_gradient
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import INT, UNKNOWN, Arg, TensorSpec, same_as_input
from framework.ops.sparse.gather import in_range, int_input
from framework.ops.sparse.lengths import lengths_of
from framework.ops.sparse.segment_reductions import segment_sums


@register_op(
    "ScatterAssign",
    inputs=3,
    input_docs=[("DATA", "tensor to update"), ("INDICES", "rows of DATA"), ("SLICES", "one row per index")],
    output_docs=[("DATA", "the same tensor, rows replaced")],
    enforce_inplace={(0, 0)},
    infer=same_as_input(0),
    category="sparse",
)
class ScatterAssign(Operator):
    """Overwrite rows of DATA in place: ``DATA[INDICES] = SLICES`` (the last of repeated indices wins)."""

    def run(self) -> None:
        data, idx, slices = self.input(0), int_input(self, 1), self.input(2)
        if data.ndim < 1:
            raise ShapeError(f"{self.describe()}: DATA must have at least one dimension")
        flat = idx.reshape(-1)
        if slices.size != flat.size * int(np.prod(data.shape[1:], dtype=np.int64)):
            raise ShapeError(
                f"{self.describe()}: SLICES has {slices.size} elements, expected {flat.size} rows of "
                f"{list(data.shape[1:])}"
            )
        if slices.dtype != data.dtype:
            raise ShapeError(f"{self.describe()}: SLICES is {slices.dtype}, DATA is {data.dtype}")
        in_range(self, 1, flat, data.shape[0], "rows of DATA")
        out = self.output(0, data.shape, data.dtype)
        out[flat] = slices.reshape((flat.size, *data.shape[1:]))


@register_op(
    "Scatter",
    inputs=3,
    args=[Arg("axis", INT, 1, "the axis INDICES index into")],
    input_docs=[("DATA", "tensor"), ("INDICES", "int indices, UPDATES' shape"), ("UPDATES", "new values")],
    output_docs=[("OUTPUT", "DATA with the updates written along axis")],
    infer=same_as_input(0),
    category="sparse",
)
class Scatter(Operator):
    """ONNX ScatterElements: write UPDATES into a copy of DATA at INDICES along ``axis``."""

    def run(self) -> None:
        data, idx, upd = self.input(0), int_input(self, 1), self.input(2)
        axis = self.args.axis + data.ndim if self.args.axis < 0 else self.args.axis
        if not 0 <= axis < data.ndim or idx.shape != upd.shape or idx.ndim != data.ndim:
            raise ShapeError(
                f"{self.describe()}: INDICES {list(idx.shape)} and UPDATES {list(upd.shape)} must share a shape of "
                f"DATA's rank {data.ndim}, axis {self.args.axis} within it"
            )
        if any(i > d for k, (i, d) in enumerate(zip(idx.shape, data.shape)) if k != axis):
            raise ShapeError(f"{self.describe()}: INDICES {list(idx.shape)} exceed DATA {list(data.shape)}")
        fixed = np.where(idx < 0, idx + data.shape[axis], idx)
        in_range(self, 1, fixed, data.shape[axis], f"entries of DATA's axis {axis}")
        out = self.output(0, data.shape, data.dtype)
        if out is not data:
            np.copyto(out, data)
        coords = list(np.indices(idx.shape, sparse=True))
        coords[axis] = fixed
        out[tuple(coords)] = upd


@register_op(
    "SparseLengthsPositionalWeightedSum",
    inputs=4,
    input_docs=[
        ("DATA", "embedding table"),
        ("WEIGHT", "one weight per position within a segment (>= the longest segment)"),
        ("INDICES", "rows of DATA"),
        ("LENGTHS", "ids per segment"),
    ],
    output_docs=[("OUTPUT", "len(LENGTHS) x DATA.shape[1:]")],
    infer=lambda args, ins: [
        TensorSpec((ins[3].shape[0] if ins[3].shape else None, *ins[0].shape[1:]), ins[0].dtype)
        if ins[0].shape
        else UNKNOWN
    ],
    category="sparse",
    input_types=["numeric", "float", "int", "int"],
    ranks={0: (1, None), 1: 1},
)
class SparseLengthsPositionalWeightedSum(Operator):
    """Sum of ``WEIGHT[j] * DATA[INDICES[i]]`` per segment, j the position of i in its segment."""

    def run(self) -> None:
        data, w, idx, lengths = self.input(0), self.input(1), int_input(self, 2, 1), lengths_of(self, 3)
        if int(lengths.sum()) != idx.size:
            raise ShapeError(f"{self.describe()}: LENGTHS sum to {int(lengths.sum())}, INDICES has {idx.size} ids")
        longest = int(lengths.max()) if lengths.size else 0
        if longest > w.size:
            raise ShapeError(
                f"{self.describe()}: WEIGHT '{self.input_names[1]}' has {w.size} positions, a segment has {longest}"
            )
        in_range(self, 2, idx, data.shape[0], "rows of DATA")
        seg = np.repeat(np.arange(len(lengths)), lengths)
        pos = np.arange(idx.size) - np.repeat(np.cumsum(lengths) - lengths, lengths)
        rows = data[idx] * w[pos].astype(data.dtype).reshape((-1,) + (1,) * (data.ndim - 1))
        out = self.output(0, (len(lengths), *data.shape[1:]), data.dtype)
        segment_sums(rows, seg, len(lengths), out)


no_gradient("ScatterAssign", "Scatter")
should_not_do_gradient("SparseLengthsPositionalWeightedSum")
