"""TypeMeta: one descriptor object per element type.

A TypeMeta names a type, gives its item size, its numpy dtype and its
TensorProto DataType value, and for non-plain types (strings, arbitrary Python
objects) says how elements are constructed. There is exactly one TypeMeta per
type, so metas compare with ``is``.

>>> TypeMeta.of(np.float32).name
'float'
>>> TypeMeta.from_proto(TensorProto.INT64) is TypeMeta.of("int64")
True
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from framework.errors import TypeMismatchError
from framework.proto.framework_pb2 import TensorProto

DT = TensorProto


class TypeMeta:
    """Runtime descriptor of an element or blob type."""

    __slots__ = ("name", "itemsize", "dtype", "proto_type", "is_pod", "py_type", "ctor")

    def __init__(
        self,
        name: str,
        dtype: np.dtype | None,
        proto_type: TensorProto.DataType,
        *,
        is_pod: bool = True,
        py_type: type | None = None,
        ctor: Callable[[], Any] | None = None,
    ) -> None:
        self.name = name
        self.dtype = dtype
        self.itemsize = dtype.itemsize if dtype is not None else 0
        self.proto_type = proto_type
        self.is_pod = is_pod
        self.py_type = py_type
        # For non-POD element types: the value a fresh element holds.
        self.ctor = ctor

    def __repr__(self) -> str:
        return f"TypeMeta({self.name})"

    # -- look-ups ---------------------------------------------------------
    @staticmethod
    def of(spec: Any) -> TypeMeta:
        """The TypeMeta for a numpy dtype, dtype-like, type name or Python type."""
        if isinstance(spec, TypeMeta):
            return spec
        if isinstance(spec, str):
            meta = _BY_NAME.get(spec)
            if meta is not None:
                return meta
        # ``object`` means numpy's object dtype (string tensors), like np.dtype(object).
        if isinstance(spec, type) and spec is not object and not _is_dtype_like(spec):
            return TypeMeta.for_python_type(spec)
        try:
            dtype = np.dtype(spec)
        except TypeError as e:
            raise TypeMismatchError(f"{spec!r} is not a known element type; known: {known_names()}") from e
        meta = _BY_DTYPE.get(dtype)
        if meta is None:
            if dtype.kind in "SUO":
                return STRING
            meta = _extended(dtype)
            if meta is not None:
                return meta
            raise TypeMismatchError(f"numpy dtype {dtype} has no TypeMeta; tensors hold one of: {known_names()}")
        return meta

    @staticmethod
    def from_proto(data_type: int) -> TypeMeta:
        """The TypeMeta for a TensorProto.DataType value (BYTE reads as uint8)."""
        meta = _BY_PROTO.get(data_type)
        if meta is None:
            raise TypeMismatchError(
                f"TensorProto data_type {data_type} ({_proto_name(data_type)}) has no element type here"
            )
        return meta

    @staticmethod
    def for_python_type(cls: type) -> TypeMeta:
        """A TypeMeta for blobs holding arbitrary Python objects of class ``cls``."""
        meta = _BY_PYTYPE.get(cls)
        if meta is None:
            meta = TypeMeta(cls.__qualname__, None, DT.UNDEFINED, is_pod=False, py_type=cls)
            _BY_PYTYPE[cls] = meta
        return meta


def _is_dtype_like(t: type) -> bool:
    return issubclass(t, (np.generic, bool, int, float, str, bytes))


def _proto_name(value: int) -> str:
    try:
        return DT.DataType.Name(value)
    except ValueError:
        return "unknown"


FLOAT16 = TypeMeta("float16", np.dtype(np.float16), DT.FLOAT16)
FLOAT = TypeMeta("float", np.dtype(np.float32), DT.FLOAT)
DOUBLE = TypeMeta("double", np.dtype(np.float64), DT.DOUBLE)
INT8 = TypeMeta("int8", np.dtype(np.int8), DT.INT8)
INT16 = TypeMeta("int16", np.dtype(np.int16), DT.INT16)
INT32 = TypeMeta("int", np.dtype(np.int32), DT.INT32)
INT64 = TypeMeta("int64", np.dtype(np.int64), DT.INT64)
UINT8 = TypeMeta("uint8", np.dtype(np.uint8), DT.UINT8)
UINT16 = TypeMeta("uint16", np.dtype(np.uint16), DT.UINT16)
BOOL = TypeMeta("bool", np.dtype(np.bool_), DT.BOOL)
# Strings are stored as numpy object arrays of bytes (Caffe2's std::string).
STRING = TypeMeta("std::string", np.dtype(object), DT.STRING, is_pod=False, py_type=bytes, ctor=bytes)

ALL_TENSOR_TYPES = (FLOAT16, FLOAT, DOUBLE, INT8, INT16, INT32, INT64, UINT8, UINT16, BOOL, STRING)

_BY_DTYPE: dict[np.dtype, TypeMeta] = {m.dtype: m for m in ALL_TENSOR_TYPES if m.dtype is not None}
_BY_PROTO: dict[int, TypeMeta] = {m.proto_type: m for m in ALL_TENSOR_TYPES}
_BY_PROTO[DT.BYTE] = UINT8  # BYTE is read-only: restored as uint8, never written
_BY_NAME: dict[str, TypeMeta] = {m.name: m for m in ALL_TENSOR_TYPES}
# numpy spellings too ("float32", "int32", "string"...).
_BY_NAME.update({str(m.dtype): m for m in ALL_TENSOR_TYPES if m is not STRING})
_BY_NAME.update({"string": STRING, "str": STRING, "bytes": STRING})
_BY_PYTYPE: dict[type, TypeMeta] = {}


def known_names() -> str:
    return ", ".join(m.name for m in ALL_TENSOR_TYPES) + ", and (no TensorProto type) " + ", ".join(_EXTENDED_NAMES)


# Element types beyond Caffe2's (ONNX's uint32/uint64, and ml_dtypes' bfloat16, float8, float4,
# int4/int2... when a tensor is fed one): tensors hold them, TensorProto cannot (UNDEFINED), and
# only ops that say so accept them (the ONNX family). Created on first use, one meta per dtype.
_EXTENDED_NAMES = ("uint32", "uint64", "ml_dtypes types (bfloat16, float8_*, float4_e2m1fn, int4, uint4, int2, uint2)")


def _extended(dtype: np.dtype) -> TypeMeta | None:
    if not (dtype.kind == "u" and dtype.itemsize in (4, 8)) and not dtype.type.__module__.startswith("ml_dtypes"):
        return None
    meta = TypeMeta(dtype.name, dtype, DT.UNDEFINED)
    _BY_DTYPE[dtype] = meta
    _BY_NAME.setdefault(dtype.name, meta)
    return meta
