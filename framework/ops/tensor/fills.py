"""Fills: the FillerOp base every fill shares, ConstantFill, RangeFill, DiagonalFill and the
GivenTensor*Fill family (the random fills are in ``random_fills``).

Every fill takes its output shape from one of three places, as Caffe2's
FillerOp does:

- no input: the ``shape`` argument (``extra_shape`` and ``input_as_shape`` are
  errors);
- one input, ``input_as_shape=0``: the input's shape, with ``extra_shape``
  appended (``shape`` is an error);
- one input, ``input_as_shape=1``: the input is a 1-D integer tensor holding
  the shape (``extra_shape`` appended).

Random fills draw from the op's generator (``Operator.rng``), seeded from
``DeviceOption.random_seed``: the same seed gives the same values. No fill
has a gradient.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from framework.errors import ShapeError, TypeMismatchError
from framework.ops.filler import (
    _OUTPUT_DOC,
    _SHAPE_ARGS,
    INPUT_DOC,
    FillerOp,
    _dtype_of,
    _value_dtype,
    filler_infer,
)
from framework.ops.gradient import no_gradient
from framework.ops.registry import register_op
from framework.ops.schema import FLOATS, INT, INTS, STRINGS, TENSOR, Arg
from framework.proto.framework_pb2 import TensorProto


class FixedTypeFill(FillerOp):
    """A fill of one element type; a ``dtype`` argument must name that type."""

    fixed: int = TensorProto.FLOAT

    def prepare(self) -> None:
        if self.args.has("dtype") and self.args.dtype != self.fixed:
            raise self.arg_error(f"produces {TensorProto.DataType.Name(self.fixed)} only, got dtype={self.args.dtype}")
        self.out_dtype = _dtype_of(self.fixed)
        self.prepare_fill()

    def prepare_fill(self) -> None:
        pass


def _fixed_args(kind: int, extra: list[Arg]) -> list[Arg]:
    name = TensorProto.DataType.Name(kind)
    return [*_SHAPE_ARGS, Arg("dtype", INT, kind, f"must be {name} ({kind}) if given", dtype_name=True), *extra]


def _fill_op(name: str, args: list[Arg], infer: Any, inputs: Any = (0, 1), input_docs: list = INPUT_DOC) -> Any:
    """register_op for a fill: the optional shape input, one output, in-place allowed."""
    return register_op(
        name,
        inputs=inputs,
        args=args,
        input_docs=input_docs,
        output_docs=_OUTPUT_DOC,
        allow_inplace={(0, 0)},
        infer=infer,
        category="fill",
    )


def fixed_fill(name: str, kind: int = TensorProto.FLOAT, extra: list[Arg] = (), **kw: Any) -> Any:
    """register_op for a fill of the one element type ``kind``."""
    return _fill_op(name, _fixed_args(kind, list(extra)), filler_infer(kind), **kw)


def _value_args(doc: str) -> list[Arg]:
    """Arguments of the fills whose element type follows ``value`` (ConstantFill, DiagonalFill)."""
    return [
        *_SHAPE_ARGS,
        Arg("value", TENSOR, 0.0, doc),
        Arg(
            "dtype",
            INT,
            TensorProto.FLOAT,
            "TensorProto DataType; default: the type of 'value' (float/int64)",
            dtype_name=True,
        ),
    ]


@_fill_op(
    "ConstantFill",
    _value_args("the fill value: a float, an int or a string"),
    filler_infer(value_typed=True),
    inputs=(0, 2),
    input_docs=[*INPUT_DOC, ("value", "optional: a one-element tensor of the output's type, used instead of 'value'")],
)
class ConstantFill(FillerOp):
    """Fill the output with the constant ``value``.

    The element type is ``dtype`` (a TensorProto DataType); without it, the
    type of ``value``: float for a float, int64 for an int, as Caffe2 does.
    A second input (Caffe2 2020) holds the value instead: one element of the
    output's element type (not for strings).
    """

    def run(self) -> None:
        if len(self.inputs) == 2:
            v = self.input(1)
            if v.size != 1:
                raise ShapeError(f"{self.describe()}: value input '{self.input_names[1]}' must have 1 element, "
                                 f"got shape {v.shape}")  # fmt: skip
            if self.out_dtype.kind == "O" or v.dtype != self.out_dtype:
                raise TypeMismatchError(
                    f"{self.describe()}: value input '{self.input_names[1]}' is {v.dtype}; the output is "
                    f"{self.out_dtype} (a string fill takes no value input)"
                )
            self._value = v.reshape(-1)[0]
        super().run()

    def prepare(self) -> None:
        try:
            dt = _value_dtype(self.args, TensorProto.FLOAT)
        except TypeMismatchError as e:
            raise self.arg_error(str(e)) from None
        if dt == TensorProto.UNDEFINED:
            raise self.arg_error("cannot have an undefined 'dtype' argument")
        self._set_dtype(dt)
        v = self.args.value
        if self.out_dtype.kind == "O":
            self._value = v if isinstance(v, bytes) else str(v).encode()
        else:
            if isinstance(v, (bytes, str)):
                raise self.arg_error(f"'value' {v!r} is a string but dtype is {self.out_dtype}")
            self._value = np.array(v).astype(self.out_dtype)

    def fill(self, out: np.ndarray) -> None:
        out.fill(self._value)


@fixed_fill("RangeFill")
class RangeFill(FixedTypeFill):
    """Fill with 0, 1, 2, ... in row-major order (float), handy to check reshapes."""

    def fill(self, out: np.ndarray) -> None:
        np.copyto(out.reshape(-1), np.arange(out.size, dtype=out.dtype))


@_fill_op("DiagonalFill", _value_args("the diagonal value: a float or an int"), filler_infer(value_typed=True))
class DiagonalFill(ConstantFill):
    """Zeros with ``value`` on the diagonal. The output needs >= 2 dims; beyond 2 all dims
    must be equal. A tall matrix's diagonal wraps around every (cols + 1) elements, as Caffe2's."""

    def prepare(self) -> None:
        super().prepare()
        if self.out_dtype.kind == "O":
            raise self.arg_error("does not fill strings")

    def fill(self, out: np.ndarray) -> None:
        if out.ndim < 2:
            raise ShapeError(f"{self.describe()}: output shape must be >= 2-D, got {out.shape}")
        if out.ndim == 2:
            step = out.shape[1] + 1
        else:
            if len(set(out.shape)) != 1:
                raise ShapeError(f"{self.describe()}: all dimensions must be of equal length, got {out.shape}")
            d = out.shape[0]
            step = sum(d**k for k in range(out.ndim))
        out.fill(0)
        out.reshape(-1)[::step] = self._value


class _GivenTensorFill(FillerOp):
    """Base of GivenTensor*Fill: copies the ``values`` argument into the output.

    The values become one array of the output type at creation, in one conversion from the
    proto's repeated field (float32 ``floats`` are cast once; nothing runs per value). As Caffe2's
    ``GetRepeatedArgument``, integer values must fit the integer output type (int32, int16): a
    value outside it is an ArgumentError, not a wrap-around.
    """

    data_type: int = TensorProto.FLOAT

    def prepare(self) -> None:
        dt = self.data_type
        if self.type == "GivenTensorFill" and self.args.has("dtype"):
            dt = self.args.dtype
        self._set_dtype(dt)
        vals = self.args.values
        if self.out_dtype.kind == "O":
            items = vals.tolist() if isinstance(vals, np.ndarray) else vals
            self._values = np.empty(len(items), dtype=object)
            self._values[:] = [v.encode("utf-8") if isinstance(v, str) else v for v in items]
        else:
            if vals.dtype.kind in "iu" and self.out_dtype.kind in "iu" and vals.size:
                info = np.iinfo(self.out_dtype)
                low, high = int(vals.min()), int(vals.max())
                if low < info.min or high > info.max:
                    bad = low if low < info.min else high
                    raise self.arg_error(f"'values' holds {bad}, outside {self.out_dtype} [{info.min}, {info.max}]")
            if vals.dtype.kind == self.out_dtype.kind == "f":
                with np.errstate(invalid="ignore"):  # a signaling NaN stays a NaN, quietly
                    self._values = vals.astype(self.out_dtype, copy=False)
            else:
                self._values = vals.astype(self.out_dtype, copy=False)
        if not self._has_input and math.prod(self._shape) != self._values.size:
            raise self.arg_error(
                f"shape {list(self._shape)} holds {math.prod(self._shape)} elements but "
                f"{self._values.size} values are given"
            )

    def fill(self, out: np.ndarray) -> None:
        if out.size != self._values.size:
            raise ShapeError(
                f"{self.describe()}: output size {out.size} {out.shape} does not match the "
                f"{self._values.size} given values"
            )
        np.copyto(out, self._values.reshape(out.shape))


def _given_fill(name: str, data_type: int, values_kind: str, doc: str, typed: bool = False) -> None:
    dt_name = TensorProto.DataType.Name(data_type)
    if typed:
        dtype_arg = Arg(
            "dtype", INT, data_type, "TensorProto DataType of the output (FLOAT by default)", dtype_name=True
        )
        infer = filler_infer()
    else:
        dtype_arg = Arg("dtype", INT, data_type, f"ignored: the output is {dt_name}", dtype_name=True)
        infer = filler_infer(data_type)
    cls = type(name, (_GivenTensorFill,), {"__doc__": doc, "data_type": data_type})
    # String values are bytes (maybe not UTF-8): raw_bytes keeps them undecoded, at run time and in inference.
    text = values_kind == STRINGS
    values = Arg("values", values_kind, [], "the values, row-major", raw_bytes=text, array=not text)
    _fill_op(name, [*_SHAPE_ARGS, values, dtype_arg], infer)(cls)
    globals()[name] = cls


_given_fill(
    "GivenTensorFill",
    TensorProto.FLOAT,
    FLOATS,
    "Fill with the given float ``values`` (``dtype`` may choose another numeric type); init nets embed weights so.",
    typed=True,
)
_given_fill("GivenTensorDoubleFill", TensorProto.DOUBLE, FLOATS, "Fill with the given ``values`` as float64.")
_given_fill("GivenTensorIntFill", TensorProto.INT32, INTS, "Fill with the given ``values`` as int32.")
_given_fill("GivenTensorInt16Fill", TensorProto.INT16, INTS, "Fill with the given ``values`` as int16.")
_given_fill("GivenTensorInt64Fill", TensorProto.INT64, INTS, "Fill with the given ``values`` as int64.")
_given_fill("GivenTensorBoolFill", TensorProto.BOOL, INTS, "Fill with the given ``values`` as bool.")
_given_fill("GivenTensorStringFill", TensorProto.STRING, STRINGS, "Fill with the given byte-string ``values``.")

no_gradient(
    "ConstantFill",
    "RangeFill",
    "DiagonalFill",
    "GivenTensorFill",
    "GivenTensorDoubleFill",
    "GivenTensorIntFill",
    "GivenTensorInt16Fill",
    "GivenTensorInt64Fill",
    "GivenTensorBoolFill",
    "GivenTensorStringFill",
)
