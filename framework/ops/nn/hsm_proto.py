"""Caffe2's hierarchical-softmax protobuf messages (caffe2/proto/hsm.proto: NodeProto, TreeProto,
HierarchyProto, PathProto, PathNodeProto), as the ops of this family use them; defined in
``proto/framework.proto`` and generated into ``framework.proto.framework_pb2``."""

from framework.proto.framework_pb2 import (  # noqa: F401
    HierarchyProto,
    NodeProto,
    PathNodeProto,
    PathProto,
    TreeProto,
)
