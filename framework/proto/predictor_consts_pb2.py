"""``caffe2.proto.predictor_consts_pb2``: well-known keys of predictor exports."""

from framework.proto.framework_pb2 import PredictorConsts  # noqa: F401
