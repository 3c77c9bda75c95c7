"""Non-tensor ONNX values in blobs: sequences and optionals (the blob representation the ONNX
backend uses), and ONNXCopyValue, which copies any of them.

- A sequence is a ``TensorSequence``: an immutable tuple of numpy arrays of one dtype (kept in
  ``.dtype`` so an empty sequence still has its element type). Ops never change a sequence in
  place: SequenceInsert & co. write a new one, so a sequence is shared by reference (loop-carried
  values, copies) and the executors carry it like any other blob object.
- An optional is an ``OptionalValue`` whose ``.value`` is None (empty), an array or a TensorSequence.

The backend feeds ONNX sequence inputs (lists of arrays) and optional inputs (None, an array or
a list) as these objects and returns sequences as lists of arrays, optionals as their element
(None when empty).
"""

from __future__ import annotations

from typing import Any, Iterable

import numpy as np

from framework.errors import TypeMismatchError
from framework.ops.gradient import no_gradient
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import UNKNOWN


class TensorSequence(tuple):
    """An ONNX sequence: a tuple of arrays of one dtype (``.dtype``, kept for empty sequences)."""

    dtype: np.dtype

    def __new__(cls, items: Iterable[Any] = (), dtype: Any = None) -> "TensorSequence":
        arrays = []
        for x in items:
            a = np.array(x, copy=True)
            a.setflags(write=False)
            arrays.append(a)
        self = super().__new__(cls, arrays)
        self.dtype = np.dtype(dtype) if dtype is not None else (arrays[0].dtype if arrays else np.dtype(np.float32))
        return self

    @classmethod
    def of(cls, arrays: Iterable[np.ndarray], dtype: Any) -> "TensorSequence":
        """Without copying: ``arrays`` must be read-only arrays owned by nobody else."""
        self = super().__new__(cls, list(arrays))
        self.dtype = np.dtype(dtype)
        return self

    def __repr__(self) -> str:
        return f"TensorSequence(dtype={self.dtype}, shapes={[list(a.shape) for a in self]})"


class OptionalValue:
    """An ONNX optional: ``value`` is None (empty), a numpy array or a TensorSequence."""

    __slots__ = ("value",)

    def __init__(self, value: Any = None) -> None:
        self.value = value

    def __repr__(self) -> str:
        return f"OptionalValue({self.value!r})"


def blob_value(op: Operator, i: int) -> Any:
    """What input ``i`` holds: an array (tensor), a TensorSequence or an OptionalValue."""
    obj = op.inputs[i].held
    if isinstance(obj, (TensorSequence, OptionalValue)):
        return obj
    return op.input(i)


def sequence_input(op: Operator, i: int) -> TensorSequence:
    obj = op.inputs[i].held
    if not isinstance(obj, TensorSequence):
        found = type(obj).__name__ if obj is not None else "nothing"
        raise TypeMismatchError(
            f"{op.describe()}: input {i} ('{op.input_names[i]}') must hold a tensor sequence, found {found}"
        )
    return obj


def set_value(op: Operator, i: int, value: Any) -> None:
    """Write ``value`` (array, TensorSequence or OptionalValue) into output ``i``."""
    if isinstance(value, np.ndarray):
        np.copyto(op.output(i, value.shape, value.dtype), value)
    else:
        op.outputs[i].reset(value)


def to_blob_value(value: Any, kind: str) -> Any:
    """A fed ONNX value as the blob object for an input of ``kind`` (tensor/sequence/optional)."""
    if kind == "sequence":
        return value if isinstance(value, TensorSequence) else TensorSequence(value)
    if kind == "optional":
        if value is None or isinstance(value, OptionalValue):
            return value if value is not None else OptionalValue()
        if isinstance(value, (list, tuple)):
            return OptionalValue(TensorSequence(value))
        return OptionalValue(np.asarray(value))
    return value


def from_blob_value(obj: Any) -> Any:
    """A blob object as ONNX's runner expects it: sequences as lists, optionals as their element."""
    if isinstance(obj, OptionalValue):
        return from_blob_value(obj.value) if obj.value is not None else None
    if isinstance(obj, TensorSequence):
        return [np.array(a) for a in obj]
    return obj


@register_op(
    "ONNXCopyValue",
    input_docs=[("X", "a tensor, a TensorSequence or an OptionalValue")],
    output_docs=[("Y", "the same value (tensors copied; sequences and optionals are immutable: shared)")],
    infer=lambda args, ins: [ins[0] if ins and ins[0] is not None else UNKNOWN],
    category="onnx",
)
class ONNXCopyValue(Operator):
    """Y = X for any ONNX value: a tensor is copied into Y's buffer, a sequence or an optional
    (immutable objects) is shared. Branch and loop bodies of the ONNX backend end with it to give
    their results the names the enclosing If/Loop reads."""

    def run(self) -> None:
        set_value(self, 0, blob_value(self, 0))


no_gradient("ONNXCopyValue")
