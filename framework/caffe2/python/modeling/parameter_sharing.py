"""Parameter sharing across NameScopes (Caffe2's ``caffe2.python.modeling.parameter_sharing``).

``ParameterSharing({'model_b': 'model_a'})`` makes parameters created (by ``ModelHelper.create_param``
with a plain-string name) under NameScope ``model_b`` resolve to ``model_a``'s blobs. Keys and values are
relative to the NameScope current when the context is entered. Overrides apply recursively: the longest
matching prefix of the current scope is replaced, then the result is resolved again, until nothing
matches.

>>> from framework.caffe2.python.scope import NameScope
>>> with ParameterSharing({"b": "a"}), NameScope("b"):
...     parameter_sharing_context.get_parameter_name("w")
'a/w'
"""

from __future__ import annotations

import contextlib
import logging
from typing import Iterator

from framework.caffe2.python import scope
from framework.errors import FrameworkError

log = logging.getLogger(__name__)

__all__ = ["ParameterSharing", "ParameterSharingContext", "parameter_sharing_context"]

SEP = scope.SEPARATOR


def _normalize_namescope(namescope: str) -> str:
    return namescope + SEP if namescope and not namescope.endswith(SEP) else namescope


class ParameterSharingContext:
    """The stack of active scope overrides (``{'outer/b/': 'outer/a/'}``, normalized with a trailing ``/``)."""

    def __init__(self) -> None:
        self._scope_overrides: dict[str, str] = {}
        self._contexts: list[dict[str, str]] = []

    def _resolve_scope_overrides(self, candidate_scope: str) -> str:
        parts = candidate_scope.split(SEP)
        best, best_idx, prefix = candidate_scope, 0, ""
        for idx, part in enumerate(parts):
            prefix += part + SEP
            if prefix in self._scope_overrides:  # the longest overridden prefix wins
                best, best_idx = self._scope_overrides[prefix], idx
        if best == candidate_scope:
            return candidate_scope
        return self._resolve_scope_overrides(best) + SEP.join(parts[best_idx + 1 :])

    def get_parameter_name(self, name: str) -> str:
        """``name`` under the current NameScope after the overrides."""
        current = scope.CurrentNameScope()
        resolved = self._resolve_scope_overrides(current)
        if resolved != current:
            log.info("parameter scope %r resolved to %r", current, resolved)
        return resolved + name

    def add_scope_overrides(self, shared_scopes: dict[str, str]) -> None:
        self._contexts.append(shared_scopes)
        self._scope_overrides.update(shared_scopes)

    def pop(self) -> None:
        if not self._contexts:
            raise FrameworkError("ParameterSharing: no override to pop")
        self._contexts.pop()
        self._scope_overrides = {}
        for overrides in self._contexts:
            self._scope_overrides.update(overrides)


parameter_sharing_context = ParameterSharingContext()


@contextlib.contextmanager
def ParameterSharing(shared_scopes: dict[str, str]) -> Iterator[None]:
    """Inside the block, parameters of scope ``k`` are those of scope ``v`` for each ``k: v``
    (both relative to the current NameScope). A value may not start with its key (a scope cannot be
    shared with its own child)."""
    if not isinstance(shared_scopes, dict):
        raise TypeError(f"ParameterSharing takes a dict of scope -> shared scope, got {type(shared_scopes).__name__}")
    current = scope.CurrentNameScope()
    overrides = {}
    for k, v in shared_scopes.items():
        if v.startswith(k):
            raise FrameworkError(f"ParameterSharing: illegal override, '{k}' is a prefix of '{v}'")
        overrides[_normalize_namescope(current + k)] = _normalize_namescope(current + v)
    parameter_sharing_context.add_scope_overrides(overrides)
    try:
        yield
    finally:
        parameter_sharing_context.pop()
