"""Named regularizers in scope (Caffe2's ``caffe2.python.regularizer_context``).

>>> # with UseRegularizer({"reg1": L1Norm(0.1)}):
>>> #     reg = RegularizerContext.current().get_regularizer("reg1")
"""

from __future__ import annotations

from typing import Any

from framework.caffe2.python._named_scopes import DEFAULT_MODIFIER, NamedScopeContext, UseNamedScope

__all__ = ["DEFAULT_MODIFIER", "RegularizerContext", "UseRegularizer"]


class RegularizerContext(NamedScopeContext):
    kind = "regularizer"

    def has_regularizer(self, name: str) -> bool:
        return self._has_modifier(name)

    def get_regularizer(self, name: str) -> Any:
        return self._get_modifier(name)


class UseRegularizer(UseNamedScope):
    context_class = RegularizerContext
