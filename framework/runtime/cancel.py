"""Stopping a run from another thread: the token a worker thread runs under (``check``).

Ctrl-C reaches only the main thread. A dag net's workers run its ops on other threads, and an op that
loops by itself (``While``, ``ONNXWhile``) would never return to the executor's check between ops.
The executor installs its run's state as the worker thread's token (``running``); a looping op calls
``check()`` once per iteration, which raises ``RunInterrupted`` when that run (or a run it is nested
in) was told to stop. A token is any object with a ``stop`` flag and a ``parent`` token (or None).
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Any, Iterator

__all__ = ["RunInterrupted", "current", "running", "stopped", "check"]

_local = threading.local()


class RunInterrupted(Exception):
    """The run this thread works for was interrupted (Ctrl-C in the caller): stop looping."""


def current() -> Any:
    """The token of the run this thread works for, or None (the main thread, a plain caller)."""
    return getattr(_local, "token", None)


@contextmanager
def running(token: Any) -> Iterator[None]:
    """Run the block under ``token`` (restoring the previous one after)."""
    previous = getattr(_local, "token", None)
    _local.token = token
    try:
        yield
    finally:
        _local.token = previous


def stopped(token: Any) -> bool:
    """Whether ``token`` or a run it is nested in was told to stop."""
    while token is not None:
        if token.stop:
            return True
        token = token.parent
    return False


def check() -> None:
    """Raise ``RunInterrupted`` when this thread's run was told to stop (cheap when it was not)."""
    token = getattr(_local, "token", None)
    if token is not None and stopped(token):
        raise RunInterrupted("the run was interrupted")
