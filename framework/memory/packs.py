"""Derived copies of tensors (packed weights) shared by the ops of one workspace tree.

A ``PackCache`` belongs to a root Workspace (``Workspace.packs``; child workspaces, such as an RNN's
per-step ones, use their root's), so it is freed with it. It holds the tensors it packs weakly: an entry
goes when its tensor dies, and an entry is used only while its stamp matches the tensor
(framework.memory.binding: same tensor, storage and version) and its key (the packed layout) is the
caller's.

>>> import numpy as np
>>> from framework.memory.tensor import Tensor
>>> cache, t = PackCache(), Tensor.from_numpy(np.ones((2, 3), np.float32))
>>> packed = np.ascontiguousarray(t.data().T)
>>> cache.put(t, ("T", (3, 2)), packed)
>>> cache.get(t, ("T", (3, 2))) is packed
True
>>> _ = t.mutable_data(np.float32)  # a write: the pack is stale
>>> cache.get(t, ("T", (3, 2))) is None
True
"""

from __future__ import annotations

import weakref
from typing import Any, Hashable

from framework.memory.binding import Stamp
from framework.memory.tensor import Tensor


class PackCache:
    """tensor (weakly) -> (stamp, key, packed array)."""

    __slots__ = ("_entries", "__weakref__")

    def __init__(self) -> None:
        self._entries: weakref.WeakKeyDictionary[Tensor, tuple] = weakref.WeakKeyDictionary()

    def get(self, t: Tensor, key: Hashable) -> Any:
        """The pack of ``t``'s current values made with ``key``, or None."""
        entry = self._entries.get(t)
        if entry is None or entry[1] != key or not entry[0].matches(t):
            return None
        return entry[2]

    def put(self, t: Tensor, key: Hashable, packed: Any) -> None:
        """Remember ``packed`` as ``t``'s current values in layout ``key`` (replacing an older pack)."""
        self._entries[t] = (Stamp(t), key, packed)

    def holds(self, packed: Any) -> bool:
        """Whether ``packed`` is some entry's array (its owner must not overwrite it in place)."""
        return any(e[2] is packed for e in self._entries.values())

    def __len__(self) -> int:
        return len(self._entries)

    def arrays(self) -> list:
        """The packed arrays held now."""
        return [e[2] for e in self._entries.values()]
