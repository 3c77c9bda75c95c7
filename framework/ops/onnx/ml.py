"""ai.onnx.ml ops (ONNX<Op>): LabelEncoder (a key -> value map with a default), Binarizer
(1 above a threshold, else 0), ArrayFeatureExtractor (columns of the last axis). Not differentiable.

String tensors hold UTF-8 bytes here; string keys and values are compared and written as UTF-8.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from framework.errors import ArgumentError, TypeMismatchError
from framework.ops.gradient import no_gradient
from framework.ops.onnx.cast import element_type
from framework.ops.onnx.elementwise import NUMBER, element_kind
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import FLOAT, FLOATS, INT, INTS, STRING, STRINGS, Arg, TensorSpec, pointwise_cost

_OBJ = np.dtype(object)


def _text(v: Any) -> str:
    return v.decode("utf-8", "surrogateescape") if isinstance(v, bytes) else str(v)


def _key(v: Any) -> Any:
    """A hashable key under which NaN matches NaN (ONNX LabelEncoder-4)."""
    if isinstance(v, float) and math.isnan(v):
        return "__nan__"
    return v


def _out_type(args: Any) -> np.dtype | None:
    if args.values_dtype:
        return _OBJ if args.values_dtype == "string" else element_type(args.values_dtype)
    if args.values_strings:
        return _OBJ
    return np.dtype(np.float32) if args.values_floats else np.dtype(np.int64)


@register_op(
    "ONNXLabelEncoder",
    args=[
        Arg("keys_floats", FLOATS, [], "float keys"),
        Arg("keys_int64s", INTS, [], "integer keys"),
        Arg("keys_strings", STRINGS, [], "string keys"),
        Arg("values_floats", FLOATS, [], "float values (output float32)"),
        Arg("values_int64s", INTS, [], "integer values (output int64)"),
        Arg("values_strings", STRINGS, [], "string values (output strings)"),
        Arg("default_float", FLOAT, -0.0, "output for a missing key (float values)"),
        Arg("default_int64", INT, -1, "output for a missing key (integer values)"),
        Arg("default_string", STRING, "_Unused", "output for a missing key (string values)"),
        Arg("values_dtype", STRING, "", "output element type when it is not the values' own (e.g. int16)"),
    ],
    input_docs=[("X", "keys to look up: numbers or strings")],
    output_docs=[("Y", "X's shape: the value of each key, the default for missing keys")],
    infer=lambda args, ins: [TensorSpec(ins[0].shape, _out_type(args))],
    cost=pointwise_cost(2),
    category="onnx",
    input_types="any",
)
class ONNXLabelEncoder(Operator):
    """ai.onnx.ml LabelEncoder: Y[i] = values[j] where keys[j] == X[i], else the default for the
    values' type. One of keys_floats/int64s/strings and one of values_floats/int64s/strings are
    given, of one length; float keys match NaN to NaN."""

    def setup(self) -> None:
        a = self.args
        keys = [k for k in (a.keys_floats, a.keys_int64s, a.keys_strings) if k]
        values = [v for v in (a.values_floats, a.values_int64s, a.values_strings) if v]
        if len(keys) != 1 or len(values) != 1 or len(keys[0]) != len(values[0]):
            raise self.arg_error("needs one non-empty keys_* and one values_* list of the same length")
        self._strings_in = bool(a.keys_strings)
        self._type = _out_type(a)
        if self._type is None:
            raise self.arg_error(f"argument 'values_dtype' names no element type: '{a.values_dtype}'")
        conv = _text if self._strings_in else (float if a.keys_floats else int)
        self._map = {_key(conv(k)): v for k, v in zip(keys[0], values[0])}
        if a.values_strings:
            self._map = {k: _text(v).encode("utf-8") for k, v in self._map.items()}
            self._default: Any = a.default_string.encode("utf-8")
        else:
            self._default = a.default_float if a.values_floats else a.default_int64

    def run(self) -> None:
        x = self.input(0)
        if (x.dtype == _OBJ) != self._strings_in or (not self._strings_in and element_kind(x.dtype) not in NUMBER):
            raise TypeMismatchError(
                f"{self.describe()}: input 0 ('{self.input_names[0]}') has dtype {x.dtype}, expected "
                f"{'strings' if self._strings_in else 'numbers'} like the keys"
            )
        conv = _text if self._strings_in else (lambda v: v)
        flat = [self._map.get(_key(conv(v)), self._default) for v in x.reshape(-1).tolist()]
        out = self.output(0, x.shape, self._type)
        if self._type == _OBJ:
            out.reshape(-1)[:] = np.array(flat, dtype=object) if flat else flat
        else:
            out[...] = np.array(flat, dtype=np.float64 if self.args.values_floats else np.int64).reshape(x.shape)


@register_op(
    "ONNXBinarizer",
    args=[Arg("threshold", FLOAT, 0.0, "values above it give 1")],
    input_docs=[("X", "numbers")],
    output_docs=[("Y", "X's shape and type: 1 where X > threshold, else 0")],
    infer=lambda args, ins: [TensorSpec(ins[0].shape, ins[0].dtype)],
    cost=pointwise_cost(1),
    category="onnx",
    input_types="numeric",
)
class ONNXBinarizer(Operator):
    """ai.onnx.ml Binarizer: Y = 1 where X > threshold, else 0, in X's type (NaN gives 0)."""

    def run(self) -> None:
        x = self.input(0)
        out = self.output(0, x.shape, x.dtype)
        out[...] = x > self.args.threshold


@register_op(
    "ONNXArrayFeatureExtractor",
    inputs=2,
    input_docs=[("X", "data, rank >= 1"), ("Y", "int64 column indices into X's last axis")],
    output_docs=[("Z", "X[..., indices]: X's leading dims + [number of indices] ([1, n] for a 1-D X)")],
    infer=lambda args, ins: [TensorSpec(None, ins[0].dtype)],
    cost=pointwise_cost(1),
    category="onnx",
    input_types={0: "any", 1: "index"},
    ranks={0: (1, None)},
)
class ONNXArrayFeatureExtractor(Operator):
    """ai.onnx.ml ArrayFeatureExtractor: the columns ``Y`` (flattened) of X's last axis; a 1-D X
    gives one row [1, n], as onnxruntime. Indices must lie in [0, X.shape[-1])."""

    def run(self) -> None:
        x, idx = self.input(0), self.input(1).reshape(-1)
        if idx.size and (idx.min() < 0 or idx.max() >= x.shape[-1]):
            raise ArgumentError(
                f"{self.describe()}: index input '{self.input_names[1]}' holds values outside [0, {x.shape[-1]}) "
                f"(the last axis of '{self.input_names[0]}')"
            )
        z = x[..., idx]
        shape = (1, idx.size) if x.ndim == 1 else (*x.shape[:-1], idx.size)
        out = self.output(0, shape, x.dtype)
        out[...] = z.reshape(shape)


for _t in ("ONNXLabelEncoder", "ONNXBinarizer", "ONNXArrayFeatureExtractor"):
    no_gradient(_t)
