"""What the lower layers receive from the net layer, handed down instead of imported: ``NET``.

Two lower layers need nets built and run: the memory core's ``Workspace`` (its ``create_net``, ``run_plan``,
``run_operator_once``... are the Workspace's public API, as in Caffe2) and the control-flow ops of the ops
layer (If, While, Do, RecurrentNetwork hold nested NetDefs). Imports point down the layers
(docs/architecture.md), so neither imports ``framework.net``: the net layer, when it loads, hands its
implementations down with ``NET.provide(name=callable, ...)``, and the lower layers call ``NET.get(name)``.

A user may hold a Workspace without having imported the net layer (``from framework.memory.workspace import
Workspace``). Which module provides the services is therefore named once, at the top: the package root
(``framework/__init__.py``, which Python runs before any ``framework.*`` module) registers a loader with
``NET.set_loader``, and the first ``get`` of a service not yet provided calls it.

This module imports nothing heavy (no numpy): the package root imports it.
"""

from __future__ import annotations

import threading
from typing import Any, Callable

from framework.errors import NetError


class Services:
    """Named callables a higher layer provides; see the module doc."""

    def __init__(self, layer: str) -> None:
        self.layer = layer
        self._impl: dict[str, Callable[..., Any]] = {}
        self._loader: Callable[[], None] | None = None
        self._lock = threading.Lock()

    def provide(self, **impls: Callable[..., Any]) -> None:
        """Called by the providing layer when it loads."""
        with self._lock:
            self._impl.update(impls)

    def set_loader(self, loader: Callable[[], None]) -> None:
        """Called by the package root: ``loader()`` loads the providing layer (which then calls provide)."""
        self._loader = loader

    def get(self, name: str) -> Callable[..., Any]:
        """The callable ``name``, loading the providing layer first if it has not loaded yet.

        Raises NetError when no loaded layer provides ``name``."""
        fn = self._impl.get(name)
        if fn is None:
            if self._loader is not None:
                self._loader()
            fn = self._impl.get(name)
            if fn is None:
                raise NetError(
                    f"'{name}' is provided by the {self.layer} layer, which has not provided it "
                    f"(provided: {sorted(self._impl) or 'nothing'})"
                )
        return fn

    def provided(self) -> list[str]:
        return sorted(self._impl)


NET = Services("net")
