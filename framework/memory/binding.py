"""The one invalidation rule for everything cached on the run path.

Two kinds of cache live on the run path, and each is checked here and nowhere else:

- A **binding**: something bound to the arrays a blob holds now (a compiled op callable, a recorded
  kernel call). It holds while the blob holds the same Tensor, over the same Storage, with the same view
  of it. For a blob the memory planner owns (``Blob.planned``), ops of different shapes take views of
  one buffer in turn, so only the Tensor and its Storage are part of the binding.
- A **stamp**: data derived from a tensor's values (a packed or transformed weight). It is valid while
  the tensor is the same object (held weakly: a stamp never keeps a tensor alive), over the same
  Storage, at the same ``version`` (every write through ``mutable_data`` bumps it).

Nothing here compares ``id()`` of an object that may die: bindings hold the objects they name, stamps
hold a weak reference.

>>> from framework.memory.blob import Blob
>>> b = Blob("x"); t = b.get_mutable(); t.resize(2); _ = t.mutable_data("float32")
>>> binding = bind(b)
>>> all_hold((binding,))
True
>>> _ = t.mutable_data("float64")  # a new view: the binding no longer holds
>>> all_hold((binding,))
False
"""

from __future__ import annotations

import weakref
from typing import Any, Iterable

from framework.memory.tensor import Tensor

Binding = tuple  # (blob, held object, storage or None, array or None); built by bind()


def held(blob: Any) -> Any:
    """What a binding to ``blob`` relies on, as one comparable-by-identity object: the Tensor's view
    (its Storage for a planner-owned blob), or the object itself when the blob holds no Tensor."""
    obj = blob._obj
    if type(obj) is not Tensor:
        return obj
    return obj._storage if blob.planned else obj._array


def bind(blob: Any) -> Binding:
    """A binding to what ``blob`` holds now (see the module doc)."""
    obj = blob._obj
    if type(obj) is not Tensor:
        return (blob, obj, None, None)
    return (blob, obj, obj._storage, None if blob.planned else obj._array)


def all_hold(bindings: Iterable[Binding]) -> bool:
    """Whether every binding still holds: the rule, in the one loop the run path calls."""
    for blob, obj, storage, arr in bindings:
        if blob._obj is not obj:
            return False
        if storage is not None and (obj._storage is not storage or (arr is not None and obj._array is not arr)):
            return False
    return True


def same_held(a: tuple, b: tuple) -> bool:
    """Whether two tuples of ``held()`` objects name the same objects, position by position."""
    return len(a) == len(b) and all(x is y for x, y in zip(a, b))


class Stamp:
    """The identity of a tensor's values at one moment: tensor (weakly), storage and version."""

    __slots__ = ("_ref", "_storage", "_version")

    def __init__(self, t: Tensor) -> None:
        self._ref = weakref.ref(t)
        self._storage = t._storage
        self._version = t.version

    def matches(self, t: Tensor | None) -> bool:
        """Whether ``t`` is the stamped tensor and its values cannot have changed since."""
        return t is not None and self._ref() is t and t.version == self._version and t._storage is self._storage


def stamp(t: Tensor) -> Stamp:
    """A stamp of ``t``'s values now."""
    return Stamp(t)


def matches(s: Stamp | None, t: Tensor | None) -> bool:
    """Whether stamp ``s`` (None: no stamp yet) is of ``t``'s current values."""
    return s is not None and s.matches(t)
