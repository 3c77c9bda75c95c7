"""``caffe2.proto.caffe2_legacy_pb2``: Caffe2's legacy padding enum (``LegacyPadding``: NOTSET, VALID, SAME,
CAFFE_LEGACY_POOLING), the values Conv and pooling ops take as ``legacy_pad``. It is declared in this
framework's proto (framework/proto), so ``caffe2_pb2`` holds it too."""

from framework.proto.framework_pb2 import CAFFE_LEGACY_POOLING, NOTSET, SAME, VALID, LegacyPadding  # noqa: F401
