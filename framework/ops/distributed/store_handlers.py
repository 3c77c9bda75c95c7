"""Gloo's rendezvous store handlers, accepted so Caffe2 nets written for Gloo run unchanged.

Caffe2's Gloo ``CreateCommonWorld`` met its peers through a key/value store
(a shared folder, or Redis). Here the world comes from MPI, so a store handler
only records where the store was; ``CreateCommonWorld`` accepts it as its
optional input and ignores it.
"""

from __future__ import annotations

from framework.ops.distributed.base import unknown
from framework.ops.gradient import should_not_do_gradient
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import INT, STRING, Arg


class StoreHandler:
    """Where a Gloo rendezvous store was (kind and address); not a live connection."""

    def __init__(self, kind: str, address: str, prefix: str) -> None:
        self.kind, self.address, self.prefix = kind, address, prefix

    def __repr__(self) -> str:
        return f"<StoreHandler {self.kind} {self.address!r} prefix {self.prefix!r} (the world comes from MPI)>"


@register_op(
    "FileStoreHandlerCreate",
    inputs=0,
    outputs=1,
    args=[Arg("path", STRING, "", "the shared folder of the store"), Arg("prefix", STRING, "", "key prefix")],
    output_docs=[("handler", "a StoreHandler (recorded, not used: the world comes from MPI)")],
    infer=unknown,
    category="distributed",
)
class FileStoreHandlerCreate(Operator):
    """Record a file-system rendezvous store (Gloo); the common world here comes from MPI. No file is touched."""

    def run(self) -> None:
        self.outputs[0].reset(StoreHandler("file", self.args.path, self.args.prefix))


@register_op(
    "RedisStoreHandlerCreate",
    inputs=0,
    outputs=1,
    args=[
        Arg("host", STRING, "", "the Redis host"),
        Arg("port", INT, 6379, "the Redis port"),
        Arg("prefix", STRING, "", "key prefix"),
    ],
    output_docs=[("handler", "a StoreHandler (recorded, not used: the world comes from MPI)")],
    infer=unknown,
    category="distributed",
)
class RedisStoreHandlerCreate(Operator):
    """Record a Redis rendezvous store (Gloo); nothing is connected: the common world here comes from MPI."""

    def run(self) -> None:
        a = self.args
        self.outputs[0].reset(StoreHandler("redis", f"{a.host}:{a.port}", a.prefix))


should_not_do_gradient("FileStoreHandlerCreate", "RedisStoreHandlerCreate")
