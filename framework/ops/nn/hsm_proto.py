"""Caffe2's hierarchical-softmax protobuf messages (caffe2/proto/hsm.proto: NodeProto, TreeProto,
HierarchyProto, PathProto, PathNodeProto), built from a descriptor at import (no code generation,
no ops here). Wire-compatible with Caffe2's serialized trees and hierarchies."""

from __future__ import annotations

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

_T = descriptor_pb2.FieldDescriptorProto
_OPT, _REP = _T.LABEL_OPTIONAL, _T.LABEL_REPEATED
_MESSAGES = {
    "NodeProto": [
        ("children", 1, _T.TYPE_MESSAGE, _REP, ".caffe2.NodeProto"),
        ("word_ids", 2, _T.TYPE_INT32, _REP, None),
        ("offset", 3, _T.TYPE_INT32, _OPT, None),
        ("name", 4, _T.TYPE_STRING, _OPT, None),
        ("scores", 5, _T.TYPE_FLOAT, _REP, None),
    ],
    "TreeProto": [("root_node", 1, _T.TYPE_MESSAGE, _OPT, ".caffe2.NodeProto")],
    "HierarchyProto": [
        ("size", 1, _T.TYPE_INT32, _OPT, None),
        ("paths", 2, _T.TYPE_MESSAGE, _REP, ".caffe2.PathProto"),
    ],
    "PathProto": [
        ("word_id", 1, _T.TYPE_INT32, _OPT, None),
        ("path_nodes", 2, _T.TYPE_MESSAGE, _REP, ".caffe2.PathNodeProto"),
    ],
    "PathNodeProto": [
        ("index", 1, _T.TYPE_INT32, _OPT, None),
        ("length", 2, _T.TYPE_INT32, _OPT, None),
        ("target", 3, _T.TYPE_INT32, _OPT, None),
    ],
}


def _build() -> dict:
    f = descriptor_pb2.FileDescriptorProto(name="framework_caffe2_hsm.proto", package="caffe2", syntax="proto2")
    for name, fields in _MESSAGES.items():
        m = f.message_type.add(name=name)
        for fname, number, kind, label, type_name in fields:
            fd = m.field.add(name=fname, number=number, type=kind, label=label)
            if type_name:
                fd.type_name = type_name
    file_desc = descriptor_pool.DescriptorPool().Add(f)
    return {name: message_factory.GetMessageClass(file_desc.message_types_by_name[name]) for name in _MESSAGES}


_CLASSES = _build()
NodeProto = _CLASSES["NodeProto"]
TreeProto = _CLASSES["TreeProto"]
HierarchyProto = _CLASSES["HierarchyProto"]
PathProto = _CLASSES["PathProto"]
PathNodeProto = _CLASSES["PathNodeProto"]
