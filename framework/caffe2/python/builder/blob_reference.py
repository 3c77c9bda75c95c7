"""Blob names that remember their net: ``BlobReference`` and ``ScopedBlobReference``.

``b.Relu()`` on a BlobReference attached to a net adds a ``Relu`` op reading
``b`` to that net (Caffe2's sugar); unknown op types raise
``UnknownOperatorAttributeError`` with "did you mean" suggestions.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from framework.caffe2.python.scope import ScopedName
from framework.errors import NetError, UnknownOperatorError
from framework.ops.registry import has_op, unknown_message

if TYPE_CHECKING:
    from framework.caffe2.python.builder.net_builder import Net

__all__ = ["BlobReference", "ScopedBlobReference", "UnknownOperatorAttributeError", "as_list", "op_method"]


class UnknownOperatorAttributeError(UnknownOperatorError, AttributeError):
    """``net.Foo(...)`` for an unregistered op type (also an AttributeError, so hasattr works)."""


class BlobReference(str):
    """A blob name (a ``str``) that remembers its net; ``b.Relu()`` adds an op to that net.

    >>> b = BlobReference("x")
    >>> b == "x", hash(b) == hash("x"), b + "_grad"
    (True, True, BlobReference('x_grad'))
    """

    def __new__(cls, name: Any, net: Net | None = None) -> BlobReference:
        self = super().__new__(cls, str(name))
        self._from_net = net
        return self

    def Net(self) -> Net | None:
        return self._from_net

    def GetNameScope(self) -> str:
        return self[: self.rfind("/") + 1]

    def GetUnscopedName(self) -> str:
        return self[self.rfind("/") + 1 :]

    def __add__(self, other: Any) -> BlobReference:
        return BlobReference(str.__add__(self, str(other)), self._from_net)

    def __radd__(self, other: Any) -> BlobReference:
        return BlobReference(str(other) + str(self), self._from_net)

    def __repr__(self) -> str:
        return f"BlobReference({str(self)!r})"

    def _CreateAndAddToNet(self, op_type: str, inputs: Any = None, *args: Any, **kwargs: Any) -> Any:
        if self._from_net is None:
            raise NetError(f"blob '{self}' is not attached to a net: use net.{op_type}([...]) instead")
        inputs = [self] if inputs is None else [self, *as_list(inputs)]
        return self._from_net.add_op(op_type, inputs, *args, **kwargs)

    def __getattr__(self, op_type: str) -> Any:
        return op_method(op_type, self._CreateAndAddToNet)


def ScopedBlobReference(name: Any, *args: Any, **kwargs: Any) -> BlobReference:
    """A BlobReference with the current NameScope prefix."""
    return BlobReference(ScopedName(name), *args, **kwargs)


def op_method(op_type: str, add: Callable[..., Any]) -> Callable[..., Any]:
    """``b.Relu`` / ``net.Relu``: a function calling ``add(op_type, ...)``.

    Raises AttributeError for names starting with ``_`` and
    UnknownOperatorAttributeError (with "did you mean") for unregistered types.
    """
    if op_type.startswith("_"):
        raise AttributeError(op_type)
    if not has_op(op_type):
        raise UnknownOperatorAttributeError(unknown_message(op_type))
    return lambda *args, **kwargs: add(op_type, *args, **kwargs)


def as_list(x: Any) -> list:
    """``x`` as a list of blob names: None -> [], one name -> [name], a list/tuple -> a copy."""
    if x is None:
        return []
    if isinstance(x, (str, bytes)) or not isinstance(x, (list, tuple)):
        return [x]
    return list(x)
