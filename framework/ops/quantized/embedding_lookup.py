"""Pooled lookups in row-wise quantized embedding tables (Caffe2's ``lengths_reducer_fused_8bit_rowwise_ops``,
``lengths_reducer_fused_nbit_rowwise_ops``, ``lengths_reducer_rowwise_8bit_ops``, ``gather_fused_8bit_rowwise_op``):
one table of op kinds, one class.

``SparseLengths{Sum,WeightedSum,Mean}<Kind>(DATA, [WEIGHTS], INDICES, LENGTHS, ...)``: the rows ``DATA[INDICES]``
dequantized (``q * scale + bias``, scaled by WEIGHTS), summed per segment of LENGTHS (Mean divides by the
length; an empty segment gives 0). Kinds:

- ``Fused8BitRowwise``, ``Fused4BitRowwise``, ``Fused2BitRowwise``: the fused layouts of
  ``embedding_quantization`` (scale and bias inside each row);
- ``8BitsRowwise``: uint8 DATA with a separate SCALE_BIAS [rows, 2] as the last input (also
  ``SparseLengthsWeightedMean8BitsRowwise``);
- ``{8,4,2}BitRowwiseSparse``: pruned tables: a last input COMPRESSED_INDICES_MAPPING (int32) maps each
  original id to its row in DATA, -1 for a pruned id (skipped; Mean still divides by the full length); a
  mapping of exactly ``[0]`` means "not pruned" (ids index DATA directly).

Also ``SparseLengthsSumSparseLookup(INDICES, LENGTHS, MAPPING[, WEIGHTS])`` (the pruning step alone: remapped
ids, lengths without the pruned ones, their weights) and ``GatherFused8BitRowwise(DATA, INDICES)`` (the
fused rows dequantized to float32). None of these has a gradient (Caffe2's NO_GRADIENT).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from framework.errors import ShapeError, TypeMismatchError
from framework.ops.gradient import no_gradient
from framework.ops.operator import Operator
from framework.ops.quantized.embedding_quantization import dequantize_8bit, dequantize_nbit
from framework.ops.registry import register_op
from framework.ops.schema import TensorSpec

F32, U8, I32 = np.dtype(np.float32), np.dtype(np.uint8), np.dtype(np.int32)

# kind -> (bits, extra bytes per row, separate SCALE_BIAS input, pruned-table mapping input)
KINDS = {
    "Fused8BitRowwise": (8, 8, False, False),
    "Fused4BitRowwise": (4, 4, False, False),
    "Fused2BitRowwise": (2, 4, False, False),
    "8BitsRowwise": (8, 0, True, False),
    "8BitRowwiseSparse": (8, 8, False, True),
    "4BitRowwiseSparse": (4, 4, False, True),
    "2BitRowwiseSparse": (2, 4, False, True),
}


# The sparse family's input checks and segment sums, imported on first use: registering these ops loads no
# sparse family (nor the training family it imports).
def in_range(*args: Any) -> Any:
    from framework.ops.sparse.gather import in_range as check

    return check(*args)


def int_input(*args: Any) -> Any:
    from framework.ops.sparse.gather import int_input as read

    return read(*args)


def lengths_of(*args: Any) -> Any:
    from framework.ops.sparse.lengths import lengths_of as read

    return read(*args)


def segment_sums(*args: Any) -> Any:
    from framework.ops.sparse.segment_reductions import segment_sums as sums

    return sums(*args)


class QuantizedLookup(Operator):
    """Forward of every ``SparseLengths<Reducer><Kind>`` (module doc); class attributes say which."""

    kind = reducer = ""

    def run(self) -> None:
        bits, extra, separate, pruned = KINDS[self.kind]
        weighted = "Weighted" in self.reducer
        at = 1 + weighted
        data = self.input(0)
        if data.dtype != U8 or data.ndim != 2 or data.shape[1] <= extra:
            raise TypeMismatchError(
                f"{self.describe()}: DATA '{self.input_names[0]}' must be a 2-D uint8 table with more than {extra} "
                f"columns, got {data.dtype} {list(data.shape)}"
            )
        idx, lengths = int_input(self, at, 1), lengths_of(self, at + 1)
        if int(lengths.sum()) != idx.size:
            raise ShapeError(f"{self.describe()}: LENGTHS sum to {int(lengths.sum())}, INDICES has {idx.size} ids")
        rows, keep = idx, None
        if pruned:
            mapping = int_input(self, at + 2, 1, "COMPRESSED_INDICES_MAPPING")
            if not (mapping.size == 1 and mapping[0] == 0):
                in_range(self, at, idx, mapping.size, "entries of COMPRESSED_INDICES_MAPPING")
                rows = mapping[idx].astype(np.int64)
                keep = rows >= 0
                in_range(self, at + 2, rows[keep], data.shape[0], "rows of DATA")
                rows = np.where(keep, rows, 0)
        if keep is None:
            in_range(self, at, idx, data.shape[0], "rows of DATA")
        w = None
        if weighted:
            w = self.input(1)
            if w.shape != (idx.size,):
                raise ShapeError(f"{self.describe()}: WEIGHTS must have one entry per index ({idx.size})")
        if separate:
            sb = self.input(at + 2)
            if sb.shape != (data.shape[0], 2):
                raise ShapeError(f"{self.describe()}: SCALE_BIAS must be [{data.shape[0]}, 2], got {list(sb.shape)}")
            picked = data[rows].astype(F32) * sb[rows, :1].astype(F32) + sb[rows, 1:].astype(F32)
        elif bits == 8:
            picked = dequantize_8bit(data[rows], False)
        else:
            picked = dequantize_nbit(data[rows], bits)
        if keep is not None:
            picked[~keep] = 0
        if w is not None:
            picked *= w.astype(F32)[:, None]
        k = len(lengths)
        out = self.output(0, (k, picked.shape[1]), F32)
        segment_sums(picked, np.repeat(np.arange(k), lengths), k, out)
        if "Mean" in self.reducer:
            out /= np.maximum(lengths, 1).astype(F32)[:, None]


def _cols(kind: str, width: int | None) -> int | None:
    bits, extra, separate, _ = KINDS[kind]
    if width is None:
        return None
    return width if separate else (width - extra) * (8 // bits)


def _infer(kind: str, weighted: bool):
    def infer(args, ins):
        data, lengths = ins[0], ins[2 + weighted]
        k = lengths.shape[0] if lengths.shape else None
        width = data.shape[1] if data.shape is not None and len(data.shape) == 2 else None
        return [TensorSpec((k, _cols(kind, width)), F32)]

    return infer


def _register(kind: str, reducer: str) -> None:
    name = f"SparseLengths{reducer}{kind}"
    weighted = "Weighted" in reducer
    bits, _, separate, pruned = KINDS[kind]
    docs = [("DATA", "uint8 quantized table")]
    if weighted:
        docs.append(("WEIGHTS", "float, one per index"))
    docs += [("INDICES", "rows to look up"), ("LENGTHS", "ids per segment")]
    if separate:
        docs.append(("SCALE_BIAS", "float [rows, 2]"))
    if pruned:
        docs.append(("COMPRESSED_INDICES_MAPPING", "int32: id -> row of DATA, -1 for pruned ids ([0]: no pruning)"))
    what = {"Sum": "Sum", "WeightedSum": "Weighted sum", "Mean": "Mean", "WeightedMean": "Weighted mean"}[reducer]
    doc = (
        f"{what} per segment of the rows DATA[INDICES] of a {bits}-bit row-wise quantized table "
        f"({kind}), dequantized as q * scale + bias (see the module doc)."
    )
    register_op(
        name,
        inputs=len(docs),
        input_docs=docs,
        output_docs=[("OUTPUT", "float [len(LENGTHS), columns]")],
        infer=_infer(kind, weighted),
        category="quantized",
    )(type(name, (QuantizedLookup,), {"kind": kind, "reducer": reducer, "__doc__": doc}))
    no_gradient(name)


for _kind in KINDS:
    for _reducer in ("Sum", "WeightedSum", "Mean"):
        _register(_kind, _reducer)
_register("8BitsRowwise", "WeightedMean")


@register_op(
    "SparseLengthsSumSparseLookup",
    inputs=(3, 4),
    outputs=(2, 3),
    input_docs=[
        ("INDICES", "original ids"),
        ("LENGTHS", "ids per segment"),
        ("COMPRESSED_INDICES_MAPPING", "int32: id -> compressed row, -1 for pruned"),
        ("WEIGHTS", "optional float weights"),
    ],
    output_docs=[
        ("OUT_INDICES", "the compressed rows kept"),
        ("OUT_LENGTHS", "int32"),
        ("OUT_WEIGHTS", "kept weights"),
    ],
    infer=lambda args, ins: [
        TensorSpec((None,), ins[0].dtype),
        TensorSpec(ins[1].shape, I32),
        TensorSpec((None,), F32),
    ][: args.num_outputs],
    category="quantized",
)
class SparseLengthsSumSparseLookup(Operator):
    """Drop the pruned ids of each segment and map the others to their compressed rows."""

    def run(self) -> None:
        idx, lengths = int_input(self, 0, 1), lengths_of(self, 1)
        mapping = int_input(self, 2, 1, "COMPRESSED_INDICES_MAPPING")
        if int(lengths.sum()) != idx.size:
            raise ShapeError(f"{self.describe()}: LENGTHS sum to {int(lengths.sum())}, INDICES has {idx.size} ids")
        in_range(self, 0, idx, mapping.size, "entries of COMPRESSED_INDICES_MAPPING")
        w = None
        if len(self.inputs) == 4:
            w = self.input(3)
            if w.shape != idx.shape:
                raise ShapeError(f"{self.describe()}: WEIGHTS must have one entry per index ({idx.size})")
        if w is not None and len(self.outputs) < 3:
            raise ShapeError(f"{self.describe()}: with WEIGHTS the op has 3 outputs")
        rows = mapping[idx]
        keep = rows != -1
        seg = np.repeat(np.arange(len(lengths)), lengths)
        self.output(0, (int(keep.sum()),), idx.dtype)[:] = rows[keep]
        kept = np.bincount(seg[keep], minlength=len(lengths)) if len(lengths) else np.zeros(0, np.int64)
        self.output(1, lengths.shape, I32)[:] = kept
        if len(self.outputs) > 2:
            src = w if w is not None else np.zeros(idx.size, F32)
            self.output(2, (int(keep.sum()),), F32)[:] = src[keep]


def _gather_fused_infer(args, ins):
    data, idx = ins
    if data.shape is None or idx.shape is None or len(data.shape) != 2 or data.shape[1] is None:
        return [TensorSpec(None, F32)]
    return [TensorSpec((*idx.shape, data.shape[1] - 8), F32)]


@register_op(
    "GatherFused8BitRowwise",
    inputs=2,
    input_docs=[("DATA", "fused 8-bit rows (uint8, rank 2)"), ("INDICES", "rows to gather (rank 1)")],
    output_docs=[("OUTPUT", "float32 [len(INDICES), cols - 8]: the gathered rows dequantized")],
    ranks={0: 2, 1: 1},
    infer=_gather_fused_infer,
    category="quantized",
)
class GatherFused8BitRowwise(Operator):
    """Gather fused 8-bit rows and dequantize them: ``code * scale + bias`` per row, as float32.

    DATA is a table made by ``FloatToFused8BitRowwiseQuantized`` (each row: codes, then float32 scale and
    bias in its last 8 bytes), so it must have more than 8 columns. Caffe2's shape function announces a
    uint8 ``[N, cols]`` output while its kernel writes float32 ``[N, cols - 8]``; inference here gives what
    the kernel writes.
    """

    def run(self) -> None:
        data, idx = self.input(0), int_input(self, 1)
        if data.dtype != U8:
            raise TypeMismatchError(f"{self.describe()}: DATA must be a 2-D uint8 fused table, got {data.dtype}")
        if data.shape[1] <= 8:
            raise ShapeError(f"{self.describe()}: DATA must have more than 8 columns, got {data.shape[1]}")
        in_range(self, 1, idx, data.shape[0], "rows of DATA")
        out = self.output(0, (idx.shape[0], data.shape[1] - 8), F32)
        out[...] = dequantize_8bit(data[idx], False)


no_gradient("SparseLengthsSumSparseLookup", "GatherFused8BitRowwise")
