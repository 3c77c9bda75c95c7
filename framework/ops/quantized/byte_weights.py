"""Weights stored as bytes: ByteWeightDequant (Caffe2's ``byte_weight_dequant_op``: 8-bit codes on a
uniform grid of [min, max] back to float32) and GivenTensorByteStringToUInt8Fill (Caffe2's
``given_tensor_byte_string_to_uint8_fill_op``: a uint8 tensor from one byte string, which protobuf
stores without the varint cost of an ``ints`` list). Neither has a gradient.
"""

from __future__ import annotations

import math

import numpy as np

from framework.errors import ShapeError, TypeMismatchError
from framework.ops.filler import _SHAPE_ARGS, INPUT_DOC, FillerOp, filler_infer
from framework.ops.gradient import no_gradient, should_not_do_gradient
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import FLOAT, INT, INTS, REQUIRED, STRINGS, Arg, TensorSpec
from framework.proto.framework_pb2 import TensorProto

F32, U8 = np.dtype(np.float32), np.dtype(np.uint8)


@register_op(
    "ByteWeightDequant",
    args=[
        Arg("min", FLOAT, -3.0, "the value of code 0"),
        Arg("max", FLOAT, 3.0, "the value of code 255"),
        Arg("shape", INTS, [], "output shape (its element count must equal the number of bytes)"),
    ],
    input_docs=[("WI", "uint8 codes, or a string tensor whose first element holds the codes as bytes")],
    output_docs=[("Y", "float32 of `shape`: min + code * (max - min) / 255")],
    infer=lambda args, ins: [TensorSpec(tuple(args.shape), F32)],
    category="quantized",
)
class ByteWeightDequant(Operator):
    """Dequantize byte-coded weights: ``Y = code * ((max - min) / 255) + min`` in float32 (the step
    rounded to float32 first, as Caffe2), shaped by ``shape`` (default ``[]``: a scalar). The codes
    are a uint8 tensor, or the bytes of the first element of a string tensor.

    Departure: Caffe2 checks the size with ``CAFFE_ENFORCE(total, nbytes)``, which only rejects a
    ``shape`` of zero elements and reads past a too-short input; here the input must hold exactly as
    many bytes as ``shape`` has elements (zero included: an empty input gives an empty output), and
    ``min``/``max`` must be finite."""

    def setup(self) -> None:
        shape = tuple(self.args.shape)
        if any(d < 0 for d in shape):
            raise self.arg_error(f"'shape' {list(shape)} has a negative dimension")
        lo, hi = np.float32(self.args.min), np.float32(self.args.max)
        if not (np.isfinite(lo) and np.isfinite(hi)):
            raise self.arg_error(f"'min' ({self.args.min}) and 'max' ({self.args.max}) must be finite float32 values")
        self._shape = shape
        self._min = lo
        with np.errstate(over="ignore"):
            self._step = np.float32(float(np.float32(hi - lo)) / 255.0)

    def _codes(self) -> np.ndarray:
        x = self.input(0)
        if x.dtype == U8:
            return x.reshape(-1)
        if x.dtype.kind == "O":
            if x.size == 0 or not isinstance(x.reshape(-1)[0], bytes):
                raise TypeMismatchError(
                    f"{self.describe()}: the string tensor '{self.input_names[0]}' must hold a byte string in its "
                    f"first element, got shape {list(x.shape)}"
                )
            return np.frombuffer(x.reshape(-1)[0], U8)
        raise TypeMismatchError(
            f"{self.describe()}: input 0 ('{self.input_names[0]}') must hold uint8 codes or a byte string, "
            f"got {x.dtype}"
        )

    def run(self) -> None:
        codes = self._codes()
        total = math.prod(self._shape)
        if codes.size != total:
            raise ShapeError(
                f"{self.describe()}: '{self.input_names[0]}' holds {codes.size} bytes but 'shape' "
                f"{list(self._shape)} has {total} elements"
            )
        y = self.output(0, self._shape, F32).reshape(-1)
        np.multiply(codes, self._step, out=y, dtype=F32)
        y += self._min


class GivenTensorByteStringToUInt8Fill(FillerOp):
    """Fill a uint8 tensor with the bytes of the one string in ``values`` (e.g. ``val.tobytes()``),
    shaped as every fill: ``shape`` without an input; with one, its shape (+ ``extra_shape``), or
    with ``input_as_shape`` its values. ``dtype``, if given, must be STRING. The byte count must
    equal the output's element count (Caffe2 only DCHECKs it and reads past the string in release
    builds). Caffe2's shape inference reports the output as STRING; here it is uint8, the real type."""

    def prepare(self) -> None:
        if self.args.has("dtype"):
            dt = self.args.dtype
            if dt == TensorProto.UNDEFINED:
                raise self.arg_error("cannot have an undefined 'dtype' argument")
            if dt != TensorProto.STRING:
                raise self.arg_error(f"unexpected 'dtype' argument value {dt} (only STRING, {TensorProto.STRING})")
        if len(self.args.values) != 1:
            raise self.arg_error(f"'values' must hold exactly one byte string, got {len(self.args.values)}")
        self._values = np.frombuffer(self.args.values[0], U8)
        self.out_dtype = U8
        if not self._has_input and math.prod(self._shape) != self._values.size:
            raise self.arg_error(
                f"shape {list(self._shape)} holds {math.prod(self._shape)} elements but the byte string has "
                f"{self._values.size} bytes"
            )

    def fill(self, out: np.ndarray) -> None:
        if out.size != self._values.size:
            raise ShapeError(
                f"{self.describe()}: output '{self.output_names[0]}' {list(out.shape)} has {out.size} elements but "
                f"the byte string has {self._values.size} bytes"
            )
        np.copyto(out.reshape(-1), self._values)


register_op(
    "GivenTensorByteStringToUInt8Fill",
    inputs=(0, 1),
    args=[
        *_SHAPE_ARGS,
        Arg("values", STRINGS, REQUIRED, "one byte string: the output's bytes in row-major order", raw_bytes=True),
        Arg("dtype", INT, TensorProto.STRING, "must be STRING if given", dtype_name=True),
    ],
    input_docs=INPUT_DOC,
    output_docs=[("output", "uint8 tensor of the bytes")],
    allow_inplace={(0, 0)},
    infer=filler_infer(TensorProto.UINT8),
    category="quantized",
)(GivenTensorByteStringToUInt8Fill)

should_not_do_gradient("ByteWeightDequant")
no_gradient("GivenTensorByteStringToUInt8Fill")
