"""Boolean masks over rows (Caffe2's ``boolean_mask_ops.cc``, ``boolean_unmask_ops.cc``).

- ``BooleanMask(DATA, MASK) -> (MASKED_DATA[, MASKED_INDICES])``: the rows of DATA where the 1-D bool
  MASK (one per row) is true, and their int64 positions. Gradient ``BooleanMaskGradient(MASK, dY) -> dDATA``
  (zeros at the dropped rows).
- ``BooleanMaskLengths(LENGTHS, MASK)``: the kept rows per segment (int32).
- ``BooleanUnmask(MASK_1, VALUES_1, MASK_2, VALUES_2, ...)``: rebuild a 1-D tensor: position p takes the
  next value of the first mask true at p; every position needs a true mask, and each VALUES_k must be
  used up exactly.
"""

from __future__ import annotations

import numpy as np

from framework.errors import ShapeError, TypeMismatchError
from framework.ops.gradient import gradient, no_gradient
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import BOOL, FLOAT, INT, STRING, Arg, TensorSpec
from framework.ops.sparse.lengths import lengths_of

I64, I32 = np.dtype(np.int64), np.dtype(np.int32)


def bool_mask(op: Operator, i: int, n: int | None = None) -> np.ndarray:
    m = op.input(i)
    if m.dtype != np.bool_ or m.ndim != 1:
        raise TypeMismatchError(
            f"{op.describe()}: MASK '{op.input_names[i]}' must be a 1-D bool tensor, got {m.dtype} {list(m.shape)}"
        )
    if n is not None and m.size != n:
        raise ShapeError(f"{op.describe()}: MASK '{op.input_names[i]}' has {m.size} entries, expected {n}")
    return m


@register_op(
    "BooleanMask",
    inputs=2,
    outputs=(1, 2),
    input_docs=[("DATA", "tensor"), ("MASK", "1-D bool, one per row of DATA")],
    output_docs=[("MASKED_DATA", "the rows where MASK is true"), ("MASKED_INDICES", "int64 positions of those rows")],
    infer=lambda args, ins: [
        TensorSpec((None, *ins[0].shape[1:]) if ins[0].shape else None, ins[0].dtype),
        TensorSpec((None,), I64),
    ][: args.num_outputs],
    category="sparse",
)
class BooleanMask(Operator):
    """The rows of DATA where MASK is true (and, optionally, their positions)."""

    def run(self) -> None:
        data = self.input(0)
        if data.ndim < 1:
            raise ShapeError(f"{self.describe()}: DATA '{self.input_names[0]}' must have at least one dimension")
        mask = bool_mask(self, 1, data.shape[0])
        pos = np.flatnonzero(mask)
        out = self.output(0, (pos.size, *data.shape[1:]), data.dtype)
        np.take(data, pos, axis=0, out=out)
        if len(self.outputs) > 1:
            self.output(1, (pos.size,), I64)[:] = pos


@register_op(
    "BooleanMaskGradient",
    inputs=2,
    input_docs=[("MASK", "forward MASK"), ("dMASKED_DATA", "gradient of MASKED_DATA")],
    output_docs=[("dDATA", "dY at the kept rows, 0 elsewhere")],
    infer=lambda args, ins: [
        TensorSpec(
            (ins[0].shape[0] if ins[0].shape else None, *ins[1].shape[1:]) if ins[1].shape else None, ins[1].dtype
        )
    ],
    category="sparse",
    private=True,
)
class BooleanMaskGradient(Operator):
    """Scatter dY back to the rows MASK kept."""

    def run(self) -> None:
        dy = self.input(1)
        mask = bool_mask(self, 0)
        pos = np.flatnonzero(mask)
        if dy.ndim < 1 or dy.shape[0] != pos.size:
            raise ShapeError(f"{self.describe()}: dY has {dy.shape[0] if dy.ndim else 0} rows, MASK keeps {pos.size}")
        d = self.output(0, (mask.size, *dy.shape[1:]), dy.dtype)
        d.fill(0)
        d[pos] = dy


@gradient("BooleanMask")
def _boolean_mask_grad(g):
    return [g.op("BooleanMaskGradient", [g.I(1), g.GO(0)], [g.GI(0)])]


@register_op(
    "BooleanMaskLengths",
    inputs=2,
    input_docs=[("LENGTHS", "rows per segment"), ("MASK", "1-D bool, one per row")],
    output_docs=[("MASKED_LENGTHS", "int32: kept rows per segment")],
    infer=lambda args, ins: [TensorSpec(ins[0].shape, I32)],
    category="sparse",
)
class BooleanMaskLengths(Operator):
    """How many rows of each segment the mask keeps: LENGTHS ``[2, 1]``, MASK ``[1, 0, 1]`` -> ``[1, 1]``."""

    def run(self) -> None:
        lengths = lengths_of(self, 0)
        mask = bool_mask(self, 1, int(lengths.sum()))
        out = self.output(0, lengths.shape, I32)
        if lengths.size:
            seg = np.repeat(np.arange(len(lengths)), lengths)
            out[:] = np.bincount(seg, weights=mask, minlength=len(lengths)).astype(np.int32)


@register_op(
    "BooleanUnmask",
    inputs=lambda n: n > 0 and n % 2 == 0,
    input_docs=[("MASK_k", "1-D bool masks of one size"), ("VALUES_k", "1-D values, one per true entry of MASK_k")],
    output_docs=[("UNMASKED_DATA", "1-D, mask size")],
    infer=lambda args, ins: [TensorSpec(ins[0].shape, ins[1].dtype)],
    category="sparse",
)
class BooleanUnmask(Operator):
    """Merge (mask, values) pairs back into one vector; the first mask true at a position wins."""

    def run(self) -> None:
        n = self.input(0).size
        pairs = len(self.inputs) // 2
        masks = [bool_mask(self, 2 * k, n) for k in range(pairs)]
        values = [self.input(2 * k + 1) for k in range(pairs)]
        dtype = values[0].dtype
        owner = np.full(n, -1, np.int64)
        for k in reversed(range(pairs)):
            if values[k].ndim != 1:
                raise ShapeError(f"{self.describe()}: VALUES '{self.input_names[2 * k + 1]}' must be 1-D")
            if values[k].dtype != dtype:
                raise TypeMismatchError(f"{self.describe()}: all VALUES must share one dtype ({dtype})")
            owner[masks[k]] = k
        if (owner < 0).any():
            raise ShapeError(f"{self.describe()}: all masks are false at position {int(np.argmax(owner < 0))}")
        for k in range(pairs):
            used = int((owner == k).sum())
            if used != values[k].size:
                raise ShapeError(
                    f"{self.describe()}: mask {k} ('{self.input_names[2 * k]}') is first true at {used} positions, "
                    f"but VALUES '{self.input_names[2 * k + 1]}' has {values[k].size} entries"
                )
        out = self.output(0, (n,), dtype)
        for k in range(pairs):
            out[owner == k] = values[k]


no_gradient("BooleanMaskLengths", "BooleanUnmask")


SEQUENCE_MASK_MODES = ("sequence", "window", "upper", "lower", "upperdiag", "lowerdiag")


@register_op(
    "SequenceMask",
    inputs=(1, 2),
    args=[
        Arg("mode", STRING, "sequence", "sequence, window, upper, lower, upperdiag or lowerdiag"),
        Arg("axis", INT, 1, "first column axis: the axes before it index rows, from it on columns"),
        Arg("batch", INT, -1, "optional batch axis (< axis): the mask repeats over the axes up to it"),
        Arg("radius", INT, 10, "half-width of the window (mode window)"),
        Arg("repeat_from_axis", INT, -1, "mode sequence: the mask repeats over the axes from this one"),
        Arg("fill_val", FLOAT, float("-inf"), "value of the masked entries"),
        Arg("grad", BOOL, False, "gradient mode: masked entries become 0"),
    ],
    input_docs=[("input", "float tensor"), ("sequence_lengths", "int32 per row (sequence) or window centers (window)")],
    output_docs=[("masked_tensor", "input with the masked entries set to fill_val")],
    infer=lambda args, ins: [ins[0]],
    category="sparse",
)
class SequenceMask(Operator):
    """Attention masks (Caffe2's boolean_mask_ops.cc): with rows i and columns j of the input viewed as a
    matrix (``axis``), mask ``j >= lengths[i]`` (sequence), ``|j - centers[i]| > radius`` (window),
    ``j > i`` (upper), ``j < i`` (lower), ``j >= i`` (upperdiag) or ``j <= i`` (lowerdiag). Its gradient is
    SequenceMask of the gradient with ``grad=1``."""

    def setup(self) -> None:
        if self.args.mode not in SEQUENCE_MASK_MODES:
            raise self.arg_error(f"unsupported mode '{self.args.mode}' (one of {', '.join(SEQUENCE_MASK_MODES)})")
        if self.args.mode in ("sequence", "window") and len(self.inputs) != 2:
            raise self.arg_error(f"mode '{self.args.mode}' needs a second input")

    def run(self) -> None:
        x = self.input(0)
        if x.dtype.kind != "f" or x.ndim < 1:
            raise TypeMismatchError(f"{self.describe()}: input must be a float tensor, got {x.dtype}")
        nd = x.ndim
        axis = self.args.axis + nd if self.args.axis < 0 else self.args.axis
        has_batch = self.args.has("batch")
        batch = (self.args.batch + nd if self.args.batch < 0 else self.args.batch) if has_batch else -1
        if not 0 <= axis <= nd or (has_batch and not 0 <= batch < axis):
            raise ShapeError(f"{self.describe()}: axis {self.args.axis} / batch {self.args.batch} do not fit {nd} axes")
        left = int(np.prod(x.shape[batch + 1 : axis] if has_batch else x.shape[:axis], dtype=np.int64))
        right = int(np.prod(x.shape[axis:], dtype=np.int64))
        repeat = 1
        repeat_axis = self.args.repeat_from_axis
        if self.args.mode == "sequence" and self.args.has("repeat_from_axis"):
            ra = repeat_axis + nd if repeat_axis < 0 else repeat_axis
            if not axis <= ra < nd:  # the repeated axes are the last of the column axes
                raise ShapeError(
                    f"{self.describe()}: repeat_from_axis {repeat_axis} must be an axis from axis {axis} on, of {nd}"
                )
            repeat = int(np.prod(x.shape[ra:], dtype=np.int64))
            right //= max(repeat, 1)
        i = np.arange(left)[:, None]
        j = np.arange(right)[None, :]
        mode = self.args.mode
        if mode in ("sequence", "window"):
            v = self.input(1).reshape(-1)
            if v.dtype.kind not in "iu" or v.size < left:
                raise ShapeError(
                    f"{self.describe()}: '{self.input_names[1]}' needs {left} integer entries, has {v.size}"
                )
            c = v[:left].astype(np.int64)[:, None]
            mask = j >= c if mode == "sequence" else (j > c + self.args.radius) | (j < c - self.args.radius)
        else:
            mask = {"upper": j > i, "lower": j < i, "upperdiag": j >= i, "lowerdiag": j <= i}[mode]
        mask = np.repeat(mask, repeat, axis=1) if repeat > 1 else mask
        fill = x.dtype.type(0.0 if self.args.grad else self.args.fill_val)
        out = self.output(0, x.shape, x.dtype)
        view = x.reshape(-1, left, mask.shape[1]) if x.size else x
        res = np.where(mask[None], fill, view) if x.size else x
        out[...] = res.reshape(x.shape)


@gradient("SequenceMask")
def _sequence_mask_grad(g):
    ins = [g.GO(0)] + ([g.I(1)] if len(g.def_.input) == 2 else [])
    return [g.op("SequenceMask", ins, [g.GI(0)], grad=True)]
