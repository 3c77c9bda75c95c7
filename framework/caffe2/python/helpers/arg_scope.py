"""``caffe2.python.helpers.arg_scope``: ``arg_scope(helpers, **kwargs)`` (a context in which those brew
helpers get ``kwargs`` by default) and ``get_current_scope()`` (the innermost scope: helper name -> arguments)."""

from typing import Any

from framework.caffe2.python import brew
from framework.caffe2.python.brew import arg_scope

__all__ = ["arg_scope", "get_current_scope"]


def get_current_scope() -> dict[str, dict[str, Any]]:
    """The arguments the enclosing ``arg_scope`` blocks give each helper, by helper name (a copy)."""
    return {name: dict(args) for name, args in brew._SCOPES[-1].items()}
