"""Thread-local name and device scopes (``caffe2.python.scope``).

``NameScope("a")`` prefixes names given as plain strings to CreateOperator
and Net builders with ``a/``; BlobReferences are full names and are not
prefixed. ``DeviceScope(opt)`` is the default DeviceOption of ops created
inside it. Both are per thread.

>>> with NameScope("enc"):
...     ScopedName("w")
'enc/w'
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Any, Iterator

SEPARATOR = "/"
_NAMESCOPE_SEPARATOR = SEPARATOR  # Caffe2's name for it
_local = threading.local()


def CurrentNameScope() -> str:
    return getattr(_local, "namescope", "")


def CurrentDeviceScope() -> Any:
    return getattr(_local, "devicescope", None)


def ScopedName(name: str) -> str:
    """``name`` with the current NameScope prefix."""
    return CurrentNameScope() + str(name)


@contextmanager
def NameScope(prefix: Any, reset: bool = False) -> Iterator[None]:
    """Add ``prefix/`` to the name scope (replace it if ``reset``) inside the block."""
    prefix = str(prefix) if prefix is not None else ""
    if prefix and not prefix.endswith(SEPARATOR):
        prefix += SEPARATOR
    old = CurrentNameScope()
    _local.namescope = prefix if reset else old + prefix
    try:
        yield
    finally:
        _local.namescope = old


@contextmanager
def EmptyNameScope() -> Iterator[None]:
    with NameScope("", reset=True):
        yield


@contextmanager
def DeviceScope(scope: Any, node_name: str | None = None) -> Iterator[None]:
    """Make ``scope`` (a DeviceOption) the default for ops created in the block.

    ``node_name`` is set if given, else inherited from the enclosing scope; ``extra_info`` is merged with the
    enclosing scope's and sorted (as Caffe2 2020). A falsy ``scope`` (None, 0) gives a default DeviceOption
    carrying only ``node_name`` (or clears the scope without one).
    """
    from framework.proto.framework_pb2 import DeviceOption

    if not isinstance(scope, DeviceOption):
        if scope:
            raise TypeError(f"DeviceScope(scope) argument must be a DeviceOption, got {type(scope).__name__}")
        scope = None  # Caffe2 tests ``if scope:``: 0 or None with a node_name sets only the node
    old = CurrentDeviceScope()
    new = DeviceOption()
    if scope is not None:
        new.CopyFrom(scope)
    if node_name:
        new.node_name = node_name
    elif old is not None and old.node_name and not new.node_name:
        new.node_name = old.node_name
    if old is not None:
        new.extra_info.extend(old.extra_info)
    new.extra_info.sort()
    _local.devicescope = new if scope is not None or node_name else None
    try:
        yield
    finally:
        _local.devicescope = old


@contextmanager
def EmptyDeviceScope() -> Iterator[None]:
    old = CurrentDeviceScope()
    _local.devicescope = None
    try:
        yield
    finally:
        _local.devicescope = old
