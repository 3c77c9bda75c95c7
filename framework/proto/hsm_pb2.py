"""``caffe2.proto.hsm_pb2``: the hierarchical-softmax messages (NodeProto, TreeProto, HierarchyProto,
PathProto, PathNodeProto), defined in ``proto/framework.proto``; wire-compatible with Caffe2's hsm.proto."""

from framework.proto.framework_pb2 import (  # noqa: F401
    HierarchyProto,
    NodeProto,
    PathNodeProto,
    PathProto,
    TreeProto,
)
