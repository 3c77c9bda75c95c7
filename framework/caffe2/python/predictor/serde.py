"""``caffe2.python.predictor.serde``: protobuf structs to bytes and back."""

from __future__ import annotations

from typing import Any


def serialize_protobuf_struct(protobuf_struct: Any) -> bytes:
    return protobuf_struct.SerializeToString()


def deserialize_protobuf_struct(serialized_protobuf: bytes, struct_type: Any) -> Any:
    deser = struct_type()
    deser.ParseFromString(serialized_protobuf)
    return deser
