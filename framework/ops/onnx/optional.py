"""ONNX optional ops on OptionalValue blobs (framework/ops/onnx/values.py): Optional,
OptionalHasElement, OptionalGetElement."""

from __future__ import annotations

import numpy as np

from framework.errors import ShapeError
from framework.ops.gradient import no_gradient
from framework.ops.onnx.values import OptionalValue, blob_value, set_value
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import UNKNOWN, TensorSpec


@register_op(
    "ONNXOptional",
    inputs=(0, 1),
    input_docs=[("input", "a tensor or a sequence (absent: an empty optional)")],
    output_docs=[("output", "an optional holding the input, or empty")],
    infer=lambda args, ins: [UNKNOWN],
    category="onnx",
)
class ONNXOptional(Operator):
    """An optional holding the input (a tensor is copied), or an empty optional without input.
    ONNX's ``type`` attribute of the empty case only declares the type and is not needed here."""

    def run(self) -> None:
        if not self.inputs:
            set_value(self, 0, OptionalValue())
            return
        v = blob_value(self, 0)
        if isinstance(v, OptionalValue):
            raise ShapeError(f"{self.describe()}: input '{self.input_names[0]}' is already an optional")
        set_value(self, 0, OptionalValue(np.array(v, copy=True) if isinstance(v, np.ndarray) else v))


@register_op(
    "ONNXOptionalHasElement",
    inputs=(0, 1),
    input_docs=[("input", "an optional, a tensor or a sequence (absent: empty)")],
    output_docs=[("output", "bool scalar: whether the input holds a value")],
    infer=lambda args, ins: [TensorSpec((), np.dtype(bool))],
    category="onnx",
)
class ONNXOptionalHasElement(Operator):
    """True when the input is a non-empty optional, a tensor or a sequence; false for an empty
    optional or no input."""

    def run(self) -> None:
        has = bool(self.inputs) and not (isinstance(v := blob_value(self, 0), OptionalValue) and v.value is None)
        self.output(0, (), np.bool_)[...] = has


@register_op(
    "ONNXOptionalGetElement",
    input_docs=[("input", "an optional (or a tensor or a sequence, returned as is)")],
    output_docs=[("output", "the value it holds")],
    infer=lambda args, ins: [ins[0] if ins and ins[0] is not None else UNKNOWN],
    category="onnx",
)
class ONNXOptionalGetElement(Operator):
    """The value an optional holds (an error when it is empty); a tensor or a sequence is
    returned as is."""

    def run(self) -> None:
        v = blob_value(self, 0)
        if isinstance(v, OptionalValue):
            if v.value is None:
                raise ShapeError(f"{self.describe()}: the optional '{self.input_names[0]}' is empty")
            v = v.value
        set_value(self, 0, v)


for _t in ("Optional", "OptionalHasElement", "OptionalGetElement"):
    no_gradient(f"ONNX{_t}")
