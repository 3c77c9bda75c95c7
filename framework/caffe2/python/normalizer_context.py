"""Named normalizers in scope (Caffe2's ``caffe2.python.normalizer_context``).

>>> # with UseNormalizer({"n1": BatchNormalizer(0.9)}):
>>> #     norm = NormalizerContext.current().get_normalizer("n1")
"""

from __future__ import annotations

from typing import Any

from framework.caffe2.python._named_scopes import DEFAULT_MODIFIER, NamedScopeContext, UseNamedScope

__all__ = ["DEFAULT_MODIFIER", "NormalizerContext", "UseNormalizer"]


class NormalizerContext(NamedScopeContext):
    kind = "normalizer"

    def has_normalizer(self, name: str) -> bool:
        return self._has_modifier(name)

    def get_normalizer(self, name: str) -> Any:
        return self._get_modifier(name)


class UseNormalizer(UseNamedScope):
    context_class = NormalizerContext
