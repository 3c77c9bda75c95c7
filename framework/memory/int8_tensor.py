"""Int8TensorCPU: Caffe2's quantized tensor blob type (``caffe2/core/tensor_int8.h``).

A linear-quantized tensor: ``real = (q - zero_point) * scale``. It holds

- ``t``: a Tensor of uint8 codes (int32 for biases made by Int8GivenIntTensorFill),
- ``scale``: a float (Caffe2 keeps a C++ ``float``: the value is rounded to float32),
- ``zero_point``: an int32.

The int8 ops (``framework.ops.quantized.int8_*``) read and write blobs holding one. Python side, as Caffe2:

- fetching such a blob gives the tuple ``(data, scale, zero_point)`` (Caffe2's Int8TensorFetcher; data is a
  numpy copy); ``framework.workspace.FetchInt8Blob`` wraps it in the ``Int8Tensor`` namedtuple;
- feeding: Caffe2 has no feeder for this type; here ``FeedBlob(name, Int8TensorCPU(...))`` or
  ``FeedBlob(name, workspace.Int8Tensor(data, scale, zero_point))`` stores a copy (an extension, so tests
  and users can make one without running a fill op);
- serialization is Caffe2's (``caffe2/core/int8_serialization.cc``): ``BlobProto{type="Int8TensorCPU",
  qtensor=QTensorProto{dims, precision=8, scale, bias=zero_point, is_signed=false, data_type=UINT8|INT32,
  data}}``, so checkpoints holding int8 blobs load both ways.

>>> q = Int8TensorCPU.from_numpy(np.array([[1, 2]], np.uint8), 0.5, 3)
>>> q.scale, q.zero_point, q.numpy().tolist()
(0.5, 3, [[1, 2]])
"""

from __future__ import annotations

import zlib
from collections import namedtuple
from typing import Any

import numpy as np

from framework.errors import SerializationError, TypeMismatchError
from framework.memory.allocator import check_elements
from framework.memory.serialize import register_blob_serializer
from framework.memory.tensor import Tensor
from framework.proto.framework_pb2 import BlobProto, TensorProto

__all__ = ["INT8_TENSOR_TYPE", "Int8Tensor", "Int8TensorCPU", "as_int8_tensor"]

INT8_TENSOR_TYPE = "Int8TensorCPU"
DATA_DTYPES = (np.dtype(np.uint8), np.dtype(np.int32))
_INT32 = np.iinfo(np.int32)

# Caffe2's python/workspace.py: what FetchInt8Blob / Workspace.fetch_int8_blob return (and FeedBlob takes here).
Int8Tensor = namedtuple("Int8Tensor", ["data", "scale", "zero_point"])


def _scale(value: Any, what: str) -> float:
    try:
        return float(np.float32(value))
    except (TypeError, ValueError) as e:
        raise TypeMismatchError(f"{what}: scale must be a number, got {value!r}") from e


def _zero_point(value: Any, what: str) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeMismatchError(f"{what}: zero_point must be an integer, got {value!r}")
    if not _INT32.min <= int(value) <= _INT32.max:
        raise TypeMismatchError(f"{what}: zero_point {value} is outside the int32 range")
    return int(value)


class Int8TensorCPU:
    """A quantized tensor: ``t`` (uint8 or int32 codes), ``scale`` (float32), ``zero_point`` (int32)."""

    __slots__ = ("scale", "zero_point", "t")

    def __init__(self, scale: float = 1.0, zero_point: int = 0, t: Tensor | None = None) -> None:
        self.scale = _scale(scale, INT8_TENSOR_TYPE)
        self.zero_point = _zero_point(zero_point, INT8_TENSOR_TYPE)
        self.t = t if t is not None else Tensor()

    @classmethod
    def from_numpy(cls, data: Any, scale: float = 1.0, zero_point: int = 0) -> Int8TensorCPU:
        """A new Int8TensorCPU holding a copy of ``data`` (uint8 codes, or int32 for biases)."""
        arr = np.asarray(data)
        if arr.dtype not in DATA_DTYPES:
            raise TypeMismatchError(f"{INT8_TENSOR_TYPE} holds uint8 (or int32 bias) data, got {arr.dtype}")
        t = Tensor()
        t.resize(arr.shape)
        t.mutable_data(arr.dtype)[...] = arr
        return cls(scale, zero_point, t)

    @property
    def dtype(self) -> np.dtype | None:
        arr = self.t._array
        return arr.dtype if arr is not None else None

    @property
    def shape(self) -> tuple:
        return tuple(self.t.dims) if self.t.is_initialized else ()

    def numpy(self) -> np.ndarray:
        """A numpy copy of the codes."""
        return self.t.numpy()

    def dequantize(self) -> np.ndarray:
        """The real values ``(q - zero_point) * scale`` as float32 (Caffe2's Int8Dequantize)."""
        q = self.t.data().astype(np.int64) - self.zero_point
        return (q.astype(np.float32) * np.float32(self.scale)).astype(np.float32)

    def copy(self) -> Int8TensorCPU:
        return Int8TensorCPU.from_numpy(self.numpy(), self.scale, self.zero_point)

    def __repr__(self) -> str:
        if self.t._array is None:
            return f"Int8TensorCPU(scale={self.scale}, zero_point={self.zero_point}, no data)"
        arr = self.t._array
        crc = zlib.crc32(np.ascontiguousarray(arr).view(np.uint8).reshape(-1).data)
        return (
            f"Int8TensorCPU(scale={self.scale}, zero_point={self.zero_point}, {arr.dtype} {list(arr.shape)}, "
            f"crc32={crc:08x})"
        )


def as_int8_tensor(value: Any) -> Int8TensorCPU | None:
    """A new Int8TensorCPU copied from ``value`` if it is one (or an ``Int8Tensor(data, scale, zero_point)``
    namedtuple, as ``framework.workspace.FetchInt8Blob`` returns); None for anything else."""
    if isinstance(value, Int8TensorCPU):
        return value.copy()
    if isinstance(value, tuple) and getattr(value, "_fields", None) == ("data", "scale", "zero_point"):
        data, scale, zero_point = value
        return Int8TensorCPU.from_numpy(data, scale, zero_point)
    return None


# -- serialization (Caffe2's Int8TensorCPUSerializer / Deserializer) ------------------------------------
def _serialize(obj: Int8TensorCPU, name: str) -> BlobProto:
    arr = obj.t._array if obj.t._array is not None else None
    if arr is None:
        raise SerializationError(f"blob '{name}': its {INT8_TENSOR_TYPE} has no data yet")
    proto = BlobProto(name=name, type=INT8_TENSOR_TYPE)
    q = proto.qtensor
    q.name = name
    q.dims.extend(arr.shape)
    q.precision = 8
    q.scale = obj.scale
    q.bias = obj.zero_point
    q.is_signed = False
    q.data_type = TensorProto.UINT8 if arr.dtype == np.uint8 else TensorProto.INT32
    q.data.extend(arr.reshape(-1).astype(np.int32).tolist())
    return proto


def _deserialize(proto: BlobProto, blob: Any) -> None:
    name = proto.name or blob.name
    q = proto.qtensor
    if not proto.HasField("qtensor"):
        raise SerializationError(f"blob '{name}': an {INT8_TENSOR_TYPE} record without a qtensor")
    dims = tuple(int(d) for d in q.dims)
    if any(d < 0 for d in dims):
        raise SerializationError(f"blob '{name}': {INT8_TENSOR_TYPE} dims {list(dims)} has a negative dimension")
    dtype: np.dtype
    if q.data_type == TensorProto.UINT8:
        dtype = np.dtype(np.uint8)
    elif q.data_type == TensorProto.INT32:
        dtype = np.dtype(np.int32)
    else:
        raise SerializationError(
            f"blob '{name}': unsupported data type {q.data_type} in {INT8_TENSOR_TYPE} (UINT8 or INT32)"
        )
    numel = int(np.prod(dims, dtype=object)) if dims else 1
    if numel != len(q.data):
        raise SerializationError(
            f"blob '{name}': {INT8_TENSOR_TYPE} dims {list(dims)} hold {numel} elements, the record has {len(q.data)}"
        )
    check_elements(dims, dtype.itemsize, f"blob '{name}'")
    values = np.asarray(q.data, dtype=np.int64)
    if dtype == np.uint8 and values.size and (values.min() < 0 or values.max() > 255):
        raise SerializationError(f"blob '{name}': {INT8_TENSOR_TYPE} uint8 data holds values outside [0, 255]")
    if not np.isfinite(q.scale) or not _INT32.min <= q.bias <= _INT32.max or q.bias != int(q.bias):
        raise SerializationError(f"blob '{name}': bad quantization parameters scale={q.scale} bias={q.bias}")
    blob.reset(Int8TensorCPU.from_numpy(values.astype(dtype).reshape(dims), q.scale, int(q.bias)))


register_blob_serializer(Int8TensorCPU, INT8_TENSOR_TYPE, _serialize, _deserialize)
