"""The base every fill op shares (FillerOp: the output shape from ``shape``, the input's shape, or the input
holding the shape, as Caffe2's FillerOp) and the shape inference of fills. It registers no op: the tensor
family's fills and other families' fills (``quantized/byte_weights``) build on it without importing the
tensor family."""

from __future__ import annotations

from typing import Any

import numpy as np

from framework.errors import ShapeError, TypeMismatchError
from framework.memory.typemeta import TypeMeta
from framework.ops.arg_reader import ArgReader
from framework.ops.operator import Operator
from framework.ops.schema import BOOL, INTS, Arg, TensorSpec
from framework.proto.framework_pb2 import TensorProto

_SHAPE_ARGS = [
    Arg("shape", INTS, [], "output shape; only without an input"),
    Arg("extra_shape", INTS, [], "dimensions appended to the shape taken from the input"),
    Arg("input_as_shape", BOOL, False, "the input is a 1-D tensor holding the output shape"),
    Arg(
        "run_once",
        BOOL,
        False,
        "fill on the first run only (2018 Caffe2 nets may set it; later Caffe2 fills on every run)",
    ),
]
INPUT_DOC = [("input", "optional: the tensor whose shape is copied, or (input_as_shape) the shape itself")]
_OUTPUT_DOC = [("output", "the filled tensor")]
_FLOAT = np.dtype(np.float32)


def _dtype_of(data_type: int) -> np.dtype:
    dtype = TypeMeta.from_proto(int(data_type)).dtype
    assert dtype is not None, "every TensorProto type has a numpy dtype"
    return dtype


def _value_dtype(args: Any, default: int) -> int:
    """The DataType of ConstantFill/DiagonalFill: ``dtype``, else from the type of ``value`` (as Caffe2)."""
    if args.has("dtype"):
        return args.dtype
    if args.has("value"):
        v = args.value
        if isinstance(v, bool) or isinstance(v, int):
            return TensorProto.INT64
        if isinstance(v, float):
            return TensorProto.FLOAT
        raise TypeMismatchError(f"argument 'value' is of unexpected type {type(v).__name__}; give 'dtype'")
    return default


def filler_infer(default_dtype: int | None = None, value_typed: bool = False) -> Any:
    """Inference shared by fills: dtype from ``dtype`` (or the fixed type), shape from the source."""

    def infer(args: Any, ins: list[TensorSpec]) -> list[TensorSpec]:
        if value_typed:
            dt = _dtype_of(_value_dtype(args, TensorProto.FLOAT))
        elif default_dtype is None:
            dt = _dtype_of(args.dtype)
        else:
            dt = _dtype_of(default_dtype)
        if args.num_inputs == 0:
            return [TensorSpec(tuple(args.shape), dt)]
        if args.input_as_shape or ins[0].shape is None:
            return [TensorSpec(None, dt)]
        return [TensorSpec(tuple(ins[0].shape) + tuple(args.extra_shape), dt)]

    infer.__doc__ = "shape from `shape`, the input's shape (+ extra_shape), or unknown with input_as_shape"
    return infer


class FillerOp(Operator):
    """Base of every fill: resolves the output shape, then calls ``fill(out)``."""

    out_dtype: np.dtype = _FLOAT

    def setup(self) -> None:
        a = self.args
        if ArgReader(self.op_def).has_single("shape"):
            raise self.arg_error("'shape' argument was a scalar, list expected")
        if self.args.num_inputs:
            if a.shape:
                raise self.arg_error("cannot set the 'shape' argument and pass in an input at the same time")
        else:
            if a.extra_shape:
                raise self.arg_error("cannot set 'extra_shape' when there is no input")
            if a.input_as_shape:
                raise self.arg_error("an input must be given if 'input_as_shape' is true")
        if any(d < 0 for d in a.shape) or any(d < 0 for d in a.extra_shape):
            raise self.arg_error(f"dimensions must be >= 0, got shape {a.shape} extra_shape {a.extra_shape}")
        self._shape = tuple(a.shape)
        self._extra = tuple(a.extra_shape)
        self._has_input = self.args.num_inputs > 0
        self._input_as_shape = a.input_as_shape
        self.prepare()
        if a.run_once:
            self.run = self._first_run_only(self.run)  # type: ignore[method-assign]

    def _first_run_only(self, run: Any) -> Any:
        done: list[bool] = []

        def run_once() -> None:
            if not done:
                run()
                done.append(True)

        return run_once

    def prepare(self) -> None:
        """Per-op setup after the shape arguments are checked."""

    def _set_dtype(self, data_type: int) -> None:
        try:
            self.out_dtype = _dtype_of(data_type)
        except TypeMismatchError as e:
            raise self.arg_error(f"'dtype' {data_type} is not a tensor element type: {e}") from None

    def out_shape(self) -> tuple:
        if not self._has_input:
            return self._shape
        x = self.input(0)
        if self._input_as_shape:
            if x.ndim != 1 or x.dtype.kind not in "iu":
                raise ShapeError(
                    f"{self.describe()}: with input_as_shape the input '{self.input_names[0]}' must be a 1-D "
                    f"integer tensor, got {x.dtype} {x.shape}"
                )
            shape = tuple(int(d) for d in x)
            if any(d < 0 for d in shape):
                raise ShapeError(f"{self.describe()}: shape input '{self.input_names[0]}' holds {shape}")
            return shape + self._extra
        return x.shape + self._extra

    def run(self) -> None:
        out = self.output(0, self.out_shape(), self.out_dtype)
        if out.size:
            self.fill(out)

    def fill(self, out: np.ndarray) -> None:
        raise NotImplementedError
