"""The wire schema (generated from proto/framework.proto) and helpers over it."""

from framework.proto import framework_pb2
from framework.proto.args import make_argument
from framework.proto.io import parse_bytes, parse_text, read_net, read_plan, read_proto, write_binary, write_text

__all__ = [
    "framework_pb2",
    "make_argument",
    "parse_bytes",
    "parse_text",
    "read_net",
    "read_plan",
    "read_proto",
    "write_binary",
    "write_text",
]
