"""``caffe2_pb2`` under its Caffe2 name: code doing ``from caffe2.proto import caffe2_pb2``
runs with ``from framework.proto import caffe2_pb2`` (the same messages and enums)."""

from framework.proto.framework_pb2 import *  # noqa: F403
from framework.proto.framework_pb2 import DESCRIPTOR  # noqa: F401
