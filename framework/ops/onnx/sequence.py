"""ONNX sequence ops on TensorSequence blobs (framework/ops/onnx/values.py): SequenceEmpty,
SequenceConstruct, SequenceInsert, SequenceErase, SequenceAt, SequenceLength, SplitToSequence,
ConcatFromSequence. Positions are int32/int64 scalars and may be negative (counted from the
end); every op writes a new sequence (sequences are immutable values)."""

from __future__ import annotations

from typing import Any

import numpy as np

from framework.errors import ShapeError, TypeMismatchError
from framework.ops.gradient import no_gradient
from framework.ops.onnx.values import TensorSequence, sequence_input, set_value
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import INT, UNKNOWN, Arg, TensorSpec
from framework.ops.validation import expect_axis, expect_in_range, expect_kind, expect_size

_SEQ = UNKNOWN  # a sequence output: no tensor spec
_TYPES = {1: np.float32, 2: np.uint8, 3: np.int8, 4: np.uint16, 5: np.int16, 6: np.int32, 7: np.int64,
          9: np.bool_, 10: np.float16, 11: np.float64, 12: np.uint32, 13: np.uint64}  # fmt: skip


def _seq_out(args: Any, ins: list) -> list:
    return [_SEQ]


def _position(op: Operator, i: int, n: int, insert: bool) -> int:
    p = op.input(i)
    expect_kind(op, i, p, "index")
    expect_size(op, i, p, 1, "a position")
    pos = int(p.reshape(-1)[0])
    of = f"a sequence of {n} tensors (input {i} '{op.input_names[i]}')"
    expect_in_range(op.describe(), "position", pos, -n, n if insert else n - 1, inclusive=True, of=of)
    return pos + n if pos < 0 else pos


def _same_type(op: Operator, i: int, x: np.ndarray, dtype: np.dtype) -> None:
    if x.dtype != dtype:
        raise TypeMismatchError(
            f"{op.describe()}: tensor '{op.input_names[i]}' is {x.dtype}, the sequence holds {dtype}"
        )


@register_op(
    "ONNXSequenceEmpty",
    inputs=0,
    output_docs=[("output", "an empty sequence")],
    args=[Arg("dtype", INT, 1, "element type (TensorProto.DataType; default float)", choices=tuple(_TYPES))],
    infer=_seq_out,
    category="onnx",
)
class ONNXSequenceEmpty(Operator):
    """An empty sequence of element type ``dtype``."""

    def run(self) -> None:
        set_value(self, 0, TensorSequence((), _TYPES[self.args.dtype]))


@register_op(
    "ONNXSequenceConstruct",
    inputs=(1, float("inf")),
    input_docs=[("inputs", "tensors of one type")],
    output_docs=[("output_sequence", "the sequence of the inputs, in order")],
    infer=_seq_out,
    category="onnx",
)
class ONNXSequenceConstruct(Operator):
    """A sequence holding copies of the inputs (all of one dtype)."""

    def run(self) -> None:
        xs = [self.input(i) for i in range(len(self.inputs))]
        for i, x in enumerate(xs):
            _same_type(self, i, x, xs[0].dtype)
        set_value(self, 0, TensorSequence(xs, xs[0].dtype))


@register_op(
    "ONNXSequenceInsert",
    inputs=(2, 3),
    input_docs=[
        ("input_sequence", "sequence"),
        ("tensor", "tensor of the sequence's type"),
        ("position", "int scalar in [-n, n] (default: at the end)"),
    ],  # fmt: skip
    output_docs=[("output_sequence", "a new sequence with the tensor inserted")],
    infer=_seq_out,
    category="onnx",
)
class ONNXSequenceInsert(Operator):
    """A new sequence with ``tensor`` inserted before ``position`` (appended by default)."""

    def run(self) -> None:
        seq = sequence_input(self, 0)
        x = self.input(1)
        _same_type(self, 1, x, seq.dtype)
        pos = _position(self, 2, len(seq), True) if len(self.inputs) > 2 else len(seq)
        x = np.array(x, copy=True)
        x.setflags(write=False)
        set_value(self, 0, TensorSequence.of(seq[:pos] + (x,) + seq[pos:], seq.dtype))


@register_op(
    "ONNXSequenceErase",
    inputs=(1, 2),
    input_docs=[("input_sequence", "sequence"), ("position", "int scalar in [-n, n-1] (default: -1, the last)")],
    output_docs=[("output_sequence", "a new sequence without that tensor")],
    infer=_seq_out,
    category="onnx",
)
class ONNXSequenceErase(Operator):
    """A new sequence without the tensor at ``position`` (the last by default)."""

    def run(self) -> None:
        seq = sequence_input(self, 0)
        if len(self.inputs) > 1:
            pos = _position(self, 1, len(seq), False)
        elif not seq:
            raise ShapeError(f"{self.describe()}: cannot erase from the empty sequence '{self.input_names[0]}'")
        else:
            pos = len(seq) - 1
        set_value(self, 0, TensorSequence.of(seq[:pos] + seq[pos + 1 :], seq.dtype))


@register_op(
    "ONNXSequenceAt",
    inputs=2,
    input_docs=[("input_sequence", "sequence"), ("position", "int scalar in [-n, n-1]")],
    output_docs=[("tensor", "a copy of the tensor at that position")],
    infer=lambda args, ins: [UNKNOWN],
    category="onnx",
)
class ONNXSequenceAt(Operator):
    """The tensor at ``position`` (negative: from the end)."""

    def run(self) -> None:
        seq = sequence_input(self, 0)
        set_value(self, 0, np.asarray(seq[_position(self, 1, len(seq), False)]))


@register_op(
    "ONNXSequenceLength",
    input_docs=[("input_sequence", "sequence")],
    output_docs=[("length", "int64 scalar: the number of tensors")],
    infer=lambda args, ins: [TensorSpec((), np.dtype(np.int64))],
    category="onnx",
)
class ONNXSequenceLength(Operator):
    """The number of tensors in the sequence, as an int64 scalar."""

    def run(self) -> None:
        n = len(sequence_input(self, 0))
        self.output(0, (), np.int64)[...] = n


@register_op(
    "ONNXSplitToSequence",
    inputs=(1, 2),
    input_docs=[("input", "tensor"), ("split", "int scalar (chunk length) or 1-D lengths (optional)")],
    output_docs=[("output_sequence", "the pieces along axis")],
    args=[
        Arg("axis", INT, 0, "axis to split (negative: from the end)"),
        Arg("keepdims", INT, 1, "without split: keep the split axis (size 1) in each piece"),
    ],  # fmt: skip
    infer=_seq_out,
    input_types={1: "index"},
    ranks={0: (1, None)},
    axes={"axis": 0},
    category="onnx",
)
class ONNXSplitToSequence(Operator):
    """Split along ``axis``: without ``split``, into pieces of length 1 (squeezed unless
    keepdims); a scalar ``split`` gives pieces of that length (the last may be shorter); a 1-D
    ``split`` gives the listed lengths, which must sum to the axis length."""

    def run(self) -> None:
        x = self.input(0)
        axis = self.args.axis % x.ndim
        n = x.shape[axis]
        if len(self.inputs) < 2:
            pieces = [np.take(x, i, axis=axis) if not self.args.keepdims else np.take(x, [i], axis=axis)
                      for i in range(n)]  # fmt: skip
            set_value(self, 0, TensorSequence(pieces, x.dtype))
            return
        s = self.input(1)
        if s.ndim == 0:
            step = int(s.reshape(-1)[0])
            if step <= 0:
                raise ShapeError(f"{self.describe()}: split '{self.input_names[1]}' must be positive, got {step}")
            lengths = [min(step, n - i) for i in range(0, n, step)]
        else:
            if s.ndim != 1:
                raise ShapeError(f"{self.describe()}: split '{self.input_names[1]}' must be a scalar or 1-D")
            lengths = [int(v) for v in s]
            if any(v < 0 for v in lengths) or sum(lengths) != n:
                raise ShapeError(
                    f"{self.describe()}: split lengths {lengths} ('{self.input_names[1]}') must be >= 0 "
                    f"and sum to {n}, the length of axis {axis}"
                )
        bounds = np.cumsum([0] + lengths)
        pieces = [np.take(x, np.arange(bounds[k], bounds[k + 1]), axis=axis) for k in range(len(lengths))]
        set_value(self, 0, TensorSequence(pieces, x.dtype))


@register_op(
    "ONNXConcatFromSequence",
    input_docs=[("input_sequence", "sequence of tensors with equal shapes but on axis")],
    output_docs=[("concat_result", "their concatenation (new_axis: their stack)")],
    args=[
        Arg("axis", INT, 0, "axis to join on (negative: from the end)"),
        Arg("new_axis", INT, 0, "1: stack on a new axis (np.stack) instead of concatenating", choices=(0, 1)),
    ],
    infer=lambda args, ins: [UNKNOWN],
    category="onnx",
)
class ONNXConcatFromSequence(Operator):
    """Concatenate the sequence's tensors along ``axis``, or stack them on a new axis at
    ``axis`` with new_axis=1 (axis may then be -rank-1 ... rank)."""

    def run(self) -> None:
        seq = sequence_input(self, 0)
        if not seq:
            raise ShapeError(f"{self.describe()}: the sequence '{self.input_names[0]}' is empty")
        r = seq[0].ndim + self.args.new_axis
        axis = expect_axis(self.describe(), self.args.axis, r, of=f"rank {r} (new_axis={self.args.new_axis})")
        shapes = {a.shape[:axis] + a.shape[axis + 1 :] if not self.args.new_axis else a.shape for a in seq}
        if len(shapes) != 1:
            raise ShapeError(
                f"{self.describe()}: tensors of '{self.input_names[0]}' differ beyond axis {axis}: "
                f"{[list(a.shape) for a in seq]}"
            )
        y = np.stack(seq, axis=axis) if self.args.new_axis else np.concatenate(seq, axis=axis)
        set_value(self, 0, y)


for _t in ("SequenceEmpty", "SequenceConstruct", "SequenceInsert", "SequenceErase", "SequenceAt",
           "SequenceLength", "SplitToSequence", "ConcatFromSequence"):  # fmt: skip
    no_gradient(f"ONNX{_t}")
