"""The wire schema (generated from proto/framework.proto) and helpers over it."""

from framework.proto import framework_pb2
from framework.proto.args import make_argument

__all__ = ["framework_pb2", "make_argument"]
