"""Key -> value maps held in blobs (Caffe2's ``map_ops``): ``CreateMap``, ``KeyValueToMap``, ``MapToKeyValue``.

Keys and values are int32 or int64 (``key_dtype`` / ``value_dtype`` as TensorProto data types, INT32 by
default). ``KeyValueToMap`` adds pairs with C++ ``emplace`` semantics: a key already present keeps its value
(also within one call: the first pair wins), and pairs are added to a map already in the output blob.
``MapToKeyValue`` lists the pairs (in insertion order; Caffe2's unordered_map has no defined order). Maps
serialize as Caffe2's (type ``(std::unordered_map<int64_t, int32_t>)``..., a TensorProtos of keys and values as
content). No gradients.
"""

from __future__ import annotations

import numpy as np

from framework.errors import SerializationError, ShapeError, TypeMismatchError
from framework.memory.blob import Blob
from framework.memory.serialize import register_blob_serializer
from framework.memory.tensor_proto import tensor_from_proto, tensor_to_proto
from framework.ops.gradient import no_gradient
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import INT, UNKNOWN, Arg
from framework.proto.framework_pb2 import BlobProto, TensorProto, TensorProtos

DTYPES = {TensorProto.INT32: np.dtype(np.int32), TensorProto.INT64: np.dtype(np.int64)}
C_NAMES = {np.dtype(np.int32): "int32_t", np.dtype(np.int64): "int64_t"}


class TypedMap:
    """A dict with fixed key and value dtypes."""

    def __init__(self, key_dtype: np.dtype, value_dtype: np.dtype) -> None:
        self.key_dtype, self.value_dtype = np.dtype(key_dtype), np.dtype(value_dtype)
        self.items: dict[int, int] = {}

    def type_name(self) -> str:
        return f"(std::unordered_map<{C_NAMES[self.key_dtype]}, {C_NAMES[self.value_dtype]}>)"


def _dtype_arg(op: Operator, name: str) -> np.dtype:
    v = getattr(op.args, name)
    if v not in DTYPES:
        raise op.arg_error(f"{name} must be INT32 ({TensorProto.INT32}) or INT64 ({TensorProto.INT64}), got {v}")
    return DTYPES[v]


@register_op(
    "CreateMap",
    inputs=0,
    args=[
        Arg("key_dtype", INT, TensorProto.INT32, "key type: TensorProto INT32 or INT64", dtype_name=True),
        Arg("value_dtype", INT, TensorProto.INT32, "value type: TensorProto INT32 or INT64", dtype_name=True),
    ],
    output_docs=[("map", "an empty map")],
    infer=lambda args, ins: [UNKNOWN],
    category="sparse",
)
class CreateMap(Operator):
    """An empty key -> value map of the given types."""

    def run(self) -> None:
        self.outputs[0].reset(TypedMap(_dtype_arg(self, "key_dtype"), _dtype_arg(self, "value_dtype")))


def _int_vector(op: Operator, i: int) -> np.ndarray:
    x = op.input(i)
    if x.dtype not in C_NAMES:
        raise TypeMismatchError(f"{op.describe()}: '{op.input_names[i]}' must be int32 or int64, got {x.dtype}")
    return x.reshape(-1)


@register_op(
    "KeyValueToMap",
    inputs=2,
    input_docs=[("keys", "int32/int64"), ("values", "int32/int64, as many as keys")],
    output_docs=[("map", "the map (pairs added; existing keys keep their values)")],
    infer=lambda args, ins: [UNKNOWN],
    category="sparse",
)
class KeyValueToMap(Operator):
    """Add (key, value) pairs to a map; a key already present keeps its first value."""

    def run(self) -> None:
        keys, values = _int_vector(self, 0), _int_vector(self, 1)
        if keys.size != values.size:
            raise ShapeError(f"{self.describe()}: {keys.size} keys but {values.size} values")
        current = self.outputs[0].held
        if not (
            isinstance(current, TypedMap) and (current.key_dtype, current.value_dtype) == (keys.dtype, values.dtype)
        ):
            current = TypedMap(keys.dtype, values.dtype)
        for k, v in zip(keys.tolist(), values.tolist()):
            current.items.setdefault(k, v)
        self.outputs[0].reset(current)


@register_op(
    "MapToKeyValue",
    outputs=2,
    input_docs=[("map", "a map")],
    output_docs=[("keys", "1-D keys"), ("values", "1-D values")],
    infer=lambda args, ins: [UNKNOWN, UNKNOWN],
    category="sparse",
)
class MapToKeyValue(Operator):
    """The map's pairs as two vectors."""

    def run(self) -> None:
        m = self.inputs[0].held
        if not isinstance(m, TypedMap):
            what = "nothing" if m is None else type(m).__qualname__
            raise TypeMismatchError(
                f"{self.describe()}: input 0 ('{self.input_names[0]}') holds {what}, expected a map (CreateMap, "
                "KeyValueToMap)"
            )
        n = len(m.items)
        self.output(0, (n,), m.key_dtype)[:] = list(m.items.keys())
        self.output(1, (n,), m.value_dtype)[:] = list(m.items.values())


no_gradient("CreateMap", "KeyValueToMap", "MapToKeyValue")


def _serialize(m: TypedMap, name: str) -> BlobProto:
    protos = TensorProtos()
    protos.protos.add().CopyFrom(tensor_to_proto(np.array(list(m.items.keys()), m.key_dtype), name))
    protos.protos.add().CopyFrom(tensor_to_proto(np.array(list(m.items.values()), m.value_dtype), name))
    return BlobProto(name=name, type=m.type_name(), content=protos.SerializeToString())


def _deserializer(key_dtype: np.dtype, value_dtype: np.dtype):
    def deserialize(proto: BlobProto, blob: Blob) -> None:
        protos = TensorProtos()
        try:
            protos.ParseFromString(proto.content)
        except Exception as e:  # protobuf's DecodeError
            raise SerializationError(f"map blob '{proto.name}': content is not a TensorProtos") from e
        if len(protos.protos) != 2:
            raise SerializationError(f"map blob '{proto.name}': expected keys and values, got {len(protos.protos)}")
        keys = tensor_from_proto(protos.protos[0]).data().reshape(-1)
        values = tensor_from_proto(protos.protos[1]).data().reshape(-1)
        if keys.size != values.size:
            raise SerializationError(f"map blob '{proto.name}': {keys.size} keys but {values.size} values")
        m = TypedMap(key_dtype, value_dtype)
        for k, v in zip(keys.tolist(), values.tolist()):
            m.items.setdefault(int(k), int(v))
        blob.reset(m)

    return deserialize


for _k in C_NAMES:
    for _v in C_NAMES:
        register_blob_serializer(
            TypedMap, TypedMap(_k, _v).type_name(), _serialize, _deserializer(_k, _v)
        )  # the serializer picks the type name from the object; one deserializer per type name
