"""What Caffe2's int8 (QNNPACK-era) ops share: reading and writing Int8TensorCPU blobs, the
``Y_scale``/``Y_zero_point`` arguments, and Caffe2's float -> uint8 rounding (``int8_utils.h``).

- ``int8_input(op, i)``: the Int8TensorCPU of input ``i``; a TypeMismatchError naming op and blob when it
  holds a plain Tensor (or anything else), an UninitializedError when it is empty;
- ``int8_output(op, i, shape, scale, zero_point)``: a writable uint8 (or int32) array for output ``i``.
  The blob's Int8TensorCPU is reused (no allocation) when shape, dtype, scale and zero point are unchanged;
  otherwise a new one replaces it, journaled so a failing op leaves the old one in place;
- ``quantize_uint8(x, scale, zero_point, out)``: ``QuantizeUint8``: ``zero_point + nearbyint(x / scale)``
  (float32 division, ties to even) clamped to [0, 255];
- ``Y_ARGS``: the two output-quantization arguments with Caffe2's defaults (1.0, 0).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from framework.errors import ArgumentError, TypeMismatchError, UninitializedError
from framework.memory.allocator import check_elements
from framework.memory.int8_tensor import Int8TensorCPU
from framework.memory.tensor import Tensor
from framework.ops.operator import Operator, _remember
from framework.ops.schema import FLOAT, INT, UNKNOWN, Arg, TensorSpec

__all__ = [
    "I32",
    "U8",
    "Y_ARGS",
    "check_y_scale",
    "int8_input",
    "int8_output",
    "int8_spec",
    "quantize_uint8",
    "same_params",
]

U8 = np.dtype(np.uint8)
I32 = np.dtype(np.int32)
MAKERS = "Int8Quantize, Int8GivenTensorFill or another Int8 op"

Y_ARGS = (
    Arg("Y_scale", FLOAT, 1.0, "output tensor quantization scale (a positive float)"),
    Arg("Y_zero_point", INT, 0, "output tensor quantization offset, in [0, 255]", low=0, high=255),
)


def check_y_scale(op: Operator, name: str = "Y_scale") -> float:
    """The op's ``Y_scale`` as Caffe2 stores it (a float32), refused unless positive and finite."""
    value = getattr(op.args, name)
    scale = np.float32(value)
    if not (np.isfinite(scale) and scale > 0):
        raise op.arg_error(f"{name} must be a positive finite number, got {value}")
    return float(scale)


def _holds(obj: Any) -> str:
    if obj is None:
        return "nothing"
    if isinstance(obj, Tensor):
        return "a Tensor"
    return f"a {type(obj).__qualname__}"


def int8_input(op: Operator, i: int, dtype: np.dtype | None = U8) -> Int8TensorCPU:
    """Input ``i``'s Int8TensorCPU, checked to hold data of ``dtype`` (None: uint8 or int32)."""
    obj = op.inputs[i].held
    name = op.input_names[i]
    if not isinstance(obj, Int8TensorCPU):
        if obj is None:
            raise UninitializedError(
                f"{op.describe()}: input {i} ('{name}') is empty: expected an Int8TensorCPU (made by {MAKERS})"
            )
        raise TypeMismatchError(
            f"{op.describe()}: input {i} ('{name}') holds {_holds(obj)}, expected an Int8TensorCPU "
            f"(made by {MAKERS}; quantize a float Tensor with Int8Quantize)"
        )
    arr = obj.t.array
    if arr is None:
        raise UninitializedError(f"{op.describe()}: input {i} ('{name}') is an Int8TensorCPU without data")
    if dtype is not None and arr.dtype != dtype:
        raise TypeMismatchError(
            f"{op.describe()}: input {i} ('{name}') is an Int8TensorCPU of {arr.dtype} data, expected {dtype}"
        )
    if arr.dtype == U8 and not 0 <= obj.zero_point <= 255:
        raise ArgumentError(
            f"{op.describe()}: input {i} ('{name}') has zero_point {obj.zero_point}, outside the uint8 range [0, 255]"
        )
    if not (np.isfinite(obj.scale) and obj.scale > 0):
        raise ArgumentError(f"{op.describe()}: input {i} ('{name}') has scale {obj.scale}, not a positive number")
    return obj


def same_params(op: Operator, q: Int8TensorCPU, scale: float, zero_point: int) -> None:
    """Caffe2's CHECK_EQ(Y_scale, X.scale) / CHECK_EQ(Y_zero_point, X.zero_point) of the ops that keep the
    input's quantization (Int8Relu, Int8MaxPool...): an ArgumentError naming both instead of an abort."""
    if float(np.float32(scale)) != q.scale or zero_point != q.zero_point:
        raise ArgumentError(
            f"{op.describe()}: Y_scale/Y_zero_point ({np.float32(scale)}, {zero_point}) must equal the input's "
            f"quantization ({q.scale}, {q.zero_point}): {op.type} keeps it"
        )


def int8_output(
    op: Operator, i: int, shape: Sequence[int], scale: float, zero_point: int, dtype: np.dtype = U8
) -> np.ndarray:
    """A writable array for output ``i``, an Int8TensorCPU of ``shape``/``dtype`` with these parameters."""
    blob = op.outputs[i]
    obj = blob.held
    shape = tuple(int(d) for d in shape)
    scale = float(np.float32(scale))
    if isinstance(obj, Int8TensorCPU):
        arr = obj.t.array
        if (
            arr is not None
            and arr.shape == shape
            and arr.dtype == dtype
            and obj.scale == scale
            and obj.zero_point == zero_point
        ):
            obj.t.version += 1
            return arr
    check_elements(shape, np.dtype(dtype).itemsize, f"output {i} ('{op.output_names[i]}') of {op.describe()}")
    if op._journal is not None:
        _remember(op._journal, blob)
    t = Tensor()
    t.resize(shape)
    arr = t.mutable_data(dtype)
    blob.reset(Int8TensorCPU(scale, int(zero_point), t))
    return arr


def quantize_uint8(x: np.ndarray, scale: float, zero_point: int, out: np.ndarray) -> np.ndarray:
    """Caffe2's QuantizeUint8 over an array: ``clamp(zero_point + nearbyint(x / scale), 0, 255)``.

    ``x / scale`` is a float32 division and ``nearbyint`` rounds ties to even, as in Caffe2 (x86). Where
    Caffe2's float -> int32 cast is undefined (NaN, or beyond the int32 range), NaN gives what x86
    gives (INT32_MIN, so 0) and the others saturate (0 or 255).
    """
    with np.errstate(all="ignore"):
        r = np.rint(np.asarray(x, dtype=np.float32) / np.float32(scale))
        r = np.clip(np.where(np.isnan(r), np.float32(-1024), r), -1024, 1024)
        q = r.astype(np.int32) + np.int32(zero_point)
    out[...] = np.clip(q, 0, 255)
    return out


def int8_spec(args: Any, ins: Sequence[TensorSpec], k: int = 0, dtype: np.dtype = U8) -> TensorSpec:
    """The spec of an output shaped as input ``k`` (uint8 codes)."""
    if k >= len(ins) or ins[k].shape is None:
        return TensorSpec(None, dtype)
    return TensorSpec(ins[k].shape, dtype)


def unknown_int8(args: Any, ins: Sequence[TensorSpec]) -> list[TensorSpec]:
    return [UNKNOWN] * args.num_outputs
