"""``caffe2.python.lazy``: work deferred until Caffe2 first needs its operators.

``RegisterLazyImport(fn)`` adds ``fn`` to a list; ``TriggerLazyImport()`` calls every registered ``fn`` in
order (each call, every time: the callables themselves forget what they did). ``core.RefreshRegisteredOperators``,
``core.GlobalInit``, ``core.IsOperatorWithEngine`` and ``workspace.CreateNet`` trigger it, as in Caffe2.
"""

from __future__ import annotations

from typing import Callable

__all__ = ["RegisterLazyImport", "TriggerLazyImport"]

_import_lazy_calls: list[Callable[[], None]] = []


def RegisterLazyImport(lazy: Callable[[], None]) -> None:
    _import_lazy_calls.append(lazy)


def TriggerLazyImport() -> None:
    for lazy in list(_import_lazy_calls):
        lazy()
