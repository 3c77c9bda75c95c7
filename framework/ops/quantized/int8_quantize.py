"""Into and out of Caffe2's int8 world: Int8Quantize (float Tensor -> Int8TensorCPU), Int8Dequantize (back),
Int8GivenTensorFill (uint8 codes from a byte string) and Int8GivenIntTensorFill (int32 codes, e.g. biases).

Caffe2: ``caffe2/operators/quantized/int8_quantize_op.h``, ``int8_dequantize_op.h``,
``int8_given_tensor_fill_op.h``; the rounding is ``int8_utils.h``'s QuantizeUint8. None has a gradient.
"""

from __future__ import annotations

import numpy as np

from framework.errors import TypeMismatchError
from framework.memory.allocator import check_elements
from framework.ops.gradient import no_gradient
from framework.ops.operator import Operator
from framework.ops.quantized.int8_common import I32, U8, Y_ARGS, check_y_scale, int8_input, int8_output, quantize_uint8
from framework.ops.registry import register_op
from framework.ops.schema import FLOAT, INT, INTS, STRING, Arg, TensorSpec

F32 = np.dtype(np.float32)


@register_op(
    "Int8Quantize",
    args=list(Y_ARGS),
    input_docs=[("X", "FP32 Tensor X")],
    output_docs=[("Y", "Int8TensorCPU qX representing X with linear quantization")],
    infer=lambda args, ins: [TensorSpec(ins[0].shape, U8)],
    category="quantized",
)
class Int8Quantize(Operator):
    """Quantize a float32 tensor: ``Y = clamp(Y_zero_point + nearbyint(X / Y_scale), 0, 255)`` (uint8 codes,
    ties to even), with ``Y.scale = Y_scale`` and ``Y.zero_point = Y_zero_point``.

    Departures from Caffe2: ``Y_scale`` must be positive and finite, ``Y_zero_point`` in [0, 255] (Caffe2
    does not check either); NaN quantizes to 0 and values beyond the int32 range saturate (Caffe2's cast is
    undefined there; x86 gives 0 for all of them). Caffe2's schema lists two more optional inputs (qparams
    made by the dnnlowp server's Int8GenQuantParams) that its ``int8_quantize_op.h`` never reads: one input
    only here. No gradient."""

    def setup(self) -> None:
        self.scale = check_y_scale(self)

    def run(self) -> None:
        x = self.input(0)
        if x.dtype != F32:
            raise TypeMismatchError(f"{self.describe()}: X ('{self.input_names[0]}') must be float32, got {x.dtype}")
        y = int8_output(self, 0, x.shape, self.scale, self.args.Y_zero_point)
        quantize_uint8(x, self.scale, self.args.Y_zero_point, y)


@register_op(
    "Int8Dequantize",
    input_docs=[("qX", "Int8TensorCPU qX (uint8 codes)")],
    output_docs=[("Y", "FP32 Tensor that represents mapped real value of qX")],
    infer=lambda args, ins: [TensorSpec(ins[0].shape, F32)],
    category="quantized",
)
class Int8Dequantize(Operator):
    """The real values of an Int8TensorCPU: ``Y = (qX - qX.zero_point) * qX.scale`` (float32; the product of
    an int32 and a float, as Caffe2 computes it). No gradient."""

    def run(self) -> None:
        q = int8_input(self, 0)
        codes = q.t.array
        y = self.output(0, codes.shape, F32)
        if abs(q.zero_point) < 2**24:  # codes - zero_point is exact in float32
            np.subtract(codes, np.float32(q.zero_point), out=y, dtype=F32)
        else:
            y[...] = codes.astype(np.int64) - q.zero_point
        y *= np.float32(q.scale)


def _shape(op: Operator) -> tuple:
    shape = tuple(op.args.shape)
    if any(d < 0 for d in shape):
        raise op.arg_error(f"shape {list(shape)} has a negative dimension")
    return shape


def _fill_infer(dtype: np.dtype):
    def infer(args, ins):
        shape = tuple(args.shape)
        return [TensorSpec(shape if all(d >= 0 for d in shape) else None, dtype)]

    return infer


@register_op(
    "Int8GivenTensorFill",
    inputs=0,
    args=[
        Arg(
            "values",
            STRING,
            b"",
            "the uint8 codes, one byte each (Caffe2: a string argument of char data)",
            raw_bytes=True,
        ),
        Arg("shape", INTS, [], "output tensor shape; its element count must equal len(values)"),
        *Y_ARGS,
    ],
    output_docs=[("Tensor", "an Int8TensorCPU of uint8 codes with scale and zero point info")],
    infer=_fill_infer(U8),
    category="quantized",
)
class Int8GivenTensorFill(Operator):
    """Creates a quantized tensor of uint8 codes (the bytes of ``values``) of ``shape``, with ``Y_scale``
    and ``Y_zero_point``. Departures from Caffe2: a ``shape`` whose element count differs from
    ``len(values)`` is an error (Caffe2 checks it in debug builds only and reads past the buffer
    otherwise); ``Y_scale`` must be positive and finite. No gradient."""

    def setup(self) -> None:
        self.scale = check_y_scale(self)
        self.shape = _shape(self)
        n = int(np.prod(self.shape, dtype=object)) if self.shape else 1
        if n != len(self.args.values):
            raise self.arg_error(f"shape {list(self.shape)} holds {n} elements, values has {len(self.args.values)}")
        self.values = np.frombuffer(self.args.values, dtype=np.uint8).reshape(self.shape)

    def run(self) -> None:
        check_elements(self.shape, 1, f"output 0 of {self.describe()}")
        int8_output(self, 0, self.shape, self.scale, self.args.Y_zero_point)[...] = self.values


@register_op(
    "Int8GivenIntTensorFill",
    inputs=0,
    args=[
        Arg("values", INTS, [], "the int32 codes", array=True),
        Arg("shape", INTS, [], "output tensor shape; its element count must equal len(values)"),
        Arg("Y_scale", FLOAT, 1.0, "output tensor quantization scale (a positive float)"),
        Arg("Y_zero_point", INT, 0, "output tensor quantization offset (int32)", low=-(2**31), high=2**31 - 1),
    ],
    output_docs=[("Tensor", "an Int8TensorCPU of int32 codes with scale and zero point info")],
    infer=_fill_infer(I32),
    category="quantized",
)
class Int8GivenIntTensorFill(Operator):
    """Creates a quantized tensor of int32 codes (``values``) of ``shape``, with ``Y_scale`` and
    ``Y_zero_point``: how Caffe2's int8 nets store biases (scale = input scale * weight scale, zero point 0).
    Departures from Caffe2: a ``shape``/``values`` size mismatch and values outside int32 are errors
    (Caffe2: a debug-only check, and a silent wrap); ``Y_scale`` must be positive and finite. No gradient."""

    def setup(self) -> None:
        self.scale = check_y_scale(self)
        self.shape = _shape(self)
        values = self.args.values
        n = int(np.prod(self.shape, dtype=object)) if self.shape else 1
        if n != values.size:
            raise self.arg_error(f"shape {list(self.shape)} holds {n} elements, values has {values.size}")
        if values.size and not (-(2**31) <= int(values.min()) and int(values.max()) < 2**31):
            raise self.arg_error("values must fit in int32")
        self.values = values.astype(I32).reshape(self.shape)

    def run(self) -> None:
        check_elements(self.shape, 4, f"output 0 of {self.describe()}")
        int8_output(self, 0, self.shape, self.scale, self.args.Y_zero_point, I32)[...] = self.values


no_gradient("Int8Quantize", "Int8Dequantize", "Int8GivenTensorFill", "Int8GivenIntTensorFill")
