"""Scoped dictionaries of named objects, one per thread and per context class: the machinery
behind ``regularizer_context`` and ``normalizer_context`` (Caffe2's ``modifier_context``).
Scopes nest; an inner scope may override a name; a single object (not a dict) is registered
under ``DEFAULT_MODIFIER``."""

from __future__ import annotations

import threading
from typing import Any

__all__ = ["DEFAULT_MODIFIER", "NamedScopeContext", "UseNamedScope"]

DEFAULT_MODIFIER = "DEFAULT"


class NamedScopeContext:
    """A stack of name -> object dicts; ``current()`` is this class's context of this thread."""

    kind = "modifier"

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._local = threading.local()

    def __init__(self) -> None:
        self._stack: list[dict[str, Any]] = []

    @classmethod
    def current(cls) -> Any:
        ctx = getattr(cls._local, "ctx", None)
        if ctx is None:
            ctx = cls._local.ctx = cls()
        return ctx

    def push_modifiers(self, modifiers: dict[str, Any]) -> None:
        self._stack.append(dict(modifiers))

    def pop_modifiers(self) -> None:
        if not self._stack:
            raise ValueError(f"{type(self).__name__}: no {self.kind}s to pop")
        self._stack.pop()

    def _has_modifier(self, name: str) -> bool:
        return any(name in level for level in self._stack)

    def _get_modifier(self, name: str) -> Any:
        for level in reversed(self._stack):
            if name in level:
                return level[name]
        raise KeyError(f"{name} {self.kind} is not provided")


NamedScopeContext._local = threading.local()


class UseNamedScope:
    """Context manager putting a dict of named objects (or one, as ``DEFAULT``) in ``context_class``'s scope."""

    context_class: type[NamedScopeContext] = NamedScopeContext

    def __init__(self, modifier_or_dict: Any) -> None:
        if isinstance(modifier_or_dict, dict):
            self._modifiers = modifier_or_dict
        else:
            self._modifiers = {DEFAULT_MODIFIER: modifier_or_dict}

    def __enter__(self) -> UseNamedScope:
        self.context_class.current().push_modifiers(self._modifiers)
        return self

    def __exit__(self, *exc: Any) -> None:
        self.context_class.current().pop_modifiers()
