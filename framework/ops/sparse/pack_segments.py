"""PackSegments / UnpackSegments (Caffe2's ``pack_segments.cc``): between a flat list of rows with LENGTHS
and a padded batch ``len(LENGTHS) x max_length x ...``.

``PackSegments(LENGTHS, DATA)``: row block i holds segment i, padded with 0 (with ``pad_minf``, float
outputs pad with -inf); ``max_length`` (if not -1) fixes the padded length and truncates longer
segments; ``return_presence_mask`` adds a bool ``len(LENGTHS) x max_length`` mask of the real entries.
``UnpackSegments(LENGTHS, PACKED)`` is the inverse. Each is the other's gradient (Caffe2's makers:
``UnpackSegments(LENGTHS, dPACKED) -> dDATA`` and back; ``max_length`` is passed on so truncated
segments keep their shape, where Caffe2's maker drops it).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from framework.errors import ShapeError
from framework.ops.gradient import gradient
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import BOOL, INT, Arg, TensorSpec
from framework.ops.sparse.lengths import lengths_of

MAX_LENGTH = Arg("max_length", INT, -1, "the padded length; -1: the longest segment (longer ones are cut)")


def _slots(lengths: np.ndarray, width: int) -> tuple[np.ndarray, np.ndarray]:
    """For each kept row: (its row in the flat list, its flat slot in the padded batch)."""
    kept = np.minimum(lengths.astype(np.int64), width)
    starts = np.cumsum(lengths) - lengths
    seg = np.repeat(np.arange(len(lengths)), kept)
    within = np.arange(int(kept.sum())) - np.repeat(np.cumsum(kept) - kept, kept)
    return np.repeat(starts, kept) + within, seg * width + within


def _pack_infer(args: Any, ins: list[TensorSpec]) -> list[TensorSpec]:
    lengths, data = ins
    n = lengths.shape[0] if lengths.shape else None
    width = args.max_length if args.max_length != -1 else None
    out = [TensorSpec((n, width, *data.shape[1:]) if data.shape else None, data.dtype)]
    if args.num_outputs > 1:
        out.append(TensorSpec((n, width), np.dtype(np.bool_)))
    return out


@register_op(
    "PackSegments",
    inputs=2,
    outputs=(1, 2),
    args=[
        MAX_LENGTH,
        Arg("pad_minf", BOOL, False, "pad float outputs with -inf instead of 0"),
        Arg("return_presence_mask", BOOL, False, "also output the bool mask of real entries"),
    ],
    input_docs=[("LENGTHS", "1-D rows per segment"), ("DATA", "rows, summing to LENGTHS")],
    output_docs=[("PACKED", "len(LENGTHS) x max_length x DATA.shape[1:]"), ("PRESENCE_MASK", "bool, optional")],
    infer=_pack_infer,
    category="sparse",
)
class PackSegments(Operator):
    """Pad each segment of DATA to a common length: a flat list of rows -> a padded batch."""

    def run(self) -> None:
        lengths, data = lengths_of(self, 0), self.input(1)
        if data.ndim < 1 or data.shape[0] != int(lengths.sum()):
            raise ShapeError(
                f"{self.describe()}: LENGTHS sum to {int(lengths.sum())}, DATA '{self.input_names[1]}' has "
                f"{data.shape[0] if data.ndim else 0} rows"
            )
        width = self.args.max_length if self.args.max_length != -1 else (int(lengths.max()) if lengths.size else 0)
        if width < 0:
            raise self.arg_error(f"max_length must be -1 or non-negative, got {width}")
        n = len(lengths)
        if self.args.return_presence_mask and len(self.outputs) < 2:
            raise self.arg_error("return_presence_mask needs a second output")
        out = self.output(0, (n, width, *data.shape[1:]), data.dtype)
        pad = -np.inf if self.args.pad_minf and data.dtype.kind == "f" else 0
        out.fill(pad)
        src, dst = _slots(lengths, width)
        out.reshape((n * width, *data.shape[1:]))[dst] = data[src]
        if len(self.outputs) > 1:
            mask = self.output(1, (n, width), np.bool_)
            mask.fill(False)
            mask.reshape(-1)[dst] = True


@register_op(
    "UnpackSegments",
    inputs=2,
    args=[MAX_LENGTH],
    input_docs=[("LENGTHS", "1-D rows per segment"), ("PACKED", "len(LENGTHS) x max_length x ...")],
    output_docs=[("DATA", "the segments' rows, concatenated")],
    infer=lambda args, ins: [TensorSpec((None, *ins[1].shape[2:]) if ins[1].shape else None, ins[1].dtype)],
    category="sparse",
)
class UnpackSegments(Operator):
    """The inverse of PackSegments: the first LENGTHS[i] rows of block i, concatenated."""

    def run(self) -> None:
        lengths, packed = lengths_of(self, 0), self.input(1)
        if packed.ndim < 2 or packed.shape[0] != len(lengths):
            raise ShapeError(
                f"{self.describe()}: PACKED '{self.input_names[1]}' must be at least 2-D with {len(lengths)} "
                f"blocks, got {list(packed.shape)}"
            )
        width = packed.shape[1]
        if self.args.max_length != -1 and self.args.max_length != width:
            raise ShapeError(f"{self.describe()}: max_length {self.args.max_length} != PACKED's width {width}")
        if self.args.max_length == -1 and lengths.size and int(lengths.max()) > width:
            raise ShapeError(f"{self.describe()}: a length {int(lengths.max())} exceeds PACKED's width {width}")
        src, dst = _slots(lengths, width)
        total = int(np.minimum(lengths, width).sum())
        out = self.output(0, (total, *packed.shape[2:]), packed.dtype)
        out[...] = packed.reshape((-1, *packed.shape[2:]))[dst]


@gradient("PackSegments", copy_arguments=False)
def _pack_grad(g):
    kw = {"max_length": g.arg("max_length")} if g.arg("max_length", -1) != -1 else {}
    if kw:  # truncated segments: the gradient keeps DATA's rows (zeros for the cut ones) via a full repack
        return [g.op("PackSegmentsGradientUnpack", [g.I(0), g.GO(0)], [g.GI(1)], **kw)]
    return [g.op("UnpackSegments", [g.I(0), g.GO(0)], [g.GI(1)])]


@register_op(
    "PackSegmentsGradientUnpack",
    inputs=2,
    args=[MAX_LENGTH],
    input_docs=[("LENGTHS", "forward LENGTHS"), ("dPACKED", "gradient of PACKED")],
    output_docs=[("dDATA", "gradient of DATA: sum(LENGTHS) rows, zero for rows max_length cut")],
    infer=lambda args, ins: [TensorSpec((None, *ins[1].shape[2:]) if ins[1].shape else None, ins[1].dtype)],
    category="sparse",
    private=True,
)
class PackSegmentsGradientUnpack(Operator):
    """Gradient of PackSegments with ``max_length``: like UnpackSegments, but with zero rows for the cut
    entries so the shape matches DATA (our addition; Caffe2's maker emits UnpackSegments without it)."""

    def run(self) -> None:
        lengths, packed = lengths_of(self, 0), self.input(1)
        if packed.ndim < 2 or packed.shape[0] != len(lengths):
            raise ShapeError(f"{self.describe()}: dPACKED must be at least 2-D with {len(lengths)} blocks")
        src, dst = _slots(lengths, packed.shape[1])
        out = self.output(0, (int(lengths.sum()), *packed.shape[2:]), packed.dtype)
        out.fill(0)
        out[src] = packed.reshape((-1, *packed.shape[2:]))[dst]


@gradient("UnpackSegments", copy_arguments=False)
def _unpack_grad(g):
    kw = {"max_length": g.arg("max_length")} if g.arg("max_length", -1) != -1 else {}
    return [g.op("PackSegments", [g.I(0), g.GO(0)], [g.GI(1)], **kw)]
