"""``caffe2.proto.metanet_pb2``: the predictor export container (MetaNetDef and its maps)."""

from framework.proto.framework_pb2 import (  # noqa: F401
    BlobsMap,
    MetaNetDef,
    ModelInfo,
    NetsMap,
    PlansMap,
    StringMap,
)
