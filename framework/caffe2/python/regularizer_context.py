"""Named regularizers in scope (Caffe2's ``caffe2.python.regularizer_context``).

``with UseRegularizer({"reg1": L1Norm(0.1)}): RegularizerContext.current().get_regularizer("reg1")``.
Scopes nest; an inner scope may override a name. A single regularizer (not a dict) is registered
under ``"DEFAULT"``. One context per thread.
"""

from __future__ import annotations

import threading
from typing import Any

__all__ = ["DEFAULT_MODIFIER", "RegularizerContext", "UseRegularizer"]

DEFAULT_MODIFIER = "DEFAULT"


class RegularizerContext:
    """The regularizers in force, by name (see module doc)."""

    _local = threading.local()

    def __init__(self) -> None:
        self._stack: list[dict[str, Any]] = []

    @classmethod
    def current(cls) -> RegularizerContext:
        ctx = getattr(cls._local, "ctx", None)
        if ctx is None:
            ctx = cls._local.ctx = cls()
        return ctx

    def push_modifiers(self, modifiers: dict[str, Any]) -> None:
        self._stack.append(dict(modifiers))

    def pop_modifiers(self) -> None:
        if not self._stack:
            raise ValueError("RegularizerContext: no regularizers to pop")
        self._stack.pop()

    def has_regularizer(self, name: str) -> bool:
        return any(name in level for level in self._stack)

    def get_regularizer(self, name: str) -> Any:
        for level in reversed(self._stack):
            if name in level:
                return level[name]
        raise KeyError(f"{name} regularizer is not provided")


class UseRegularizer:
    """Context manager putting a dict of named regularizers (or one, as ``DEFAULT``) in scope."""

    def __init__(self, modifier_or_dict: Any) -> None:
        if isinstance(modifier_or_dict, dict):
            self._modifiers = modifier_or_dict
        else:
            self._modifiers = {DEFAULT_MODIFIER: modifier_or_dict}

    def __enter__(self) -> UseRegularizer:
        RegularizerContext.current().push_modifiers(self._modifiers)
        return self

    def __exit__(self, *exc: Any) -> None:
        RegularizerContext.current().pop_modifiers()
