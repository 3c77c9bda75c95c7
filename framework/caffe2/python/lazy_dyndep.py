"""``caffe2.python.lazy_dyndep``: ``dyndep.InitOpsLibrary`` deferred to the first use of operators.

``RegisterOpsLibrary(name)`` remembers an existing path (a missing one prints Caffe2's ``Ignoring <name> as
it is not a valid file.`` and is dropped); the next ``lazy.TriggerLazyImport()`` (``core.RefreshRegisteredOperators``,
``workspace.CreateNet``...) hands each remembered path to ``dyndep.InitOpsLibrary`` once and forgets it. An error
goes to the handler set with ``SetErrorHandler(fn)`` (``fn(exception)``; what it raises propagates) and is
dropped when there is none. As ``dyndep`` never loads native code here, every existing path ends in its
FrameworkError, so a program sees the refusal where Caffe2 would have loaded the library.
"""

from __future__ import annotations

import os
from typing import Any, Callable

from framework.caffe2.python import dyndep, lazy

__all__ = ["GetImportedOpsLibraries", "RegisterOpsLibrary", "SetErrorHandler"]

_LAZY_IMPORTED_DYNDEPS: list[str] = []
_error_handler: list[Callable[[BaseException], Any] | None] = [None]


def RegisterOpsLibrary(name: str) -> None:
    if not os.path.exists(name):
        print(f"Ignoring {name} as it is not a valid file.")
        return
    if name not in _LAZY_IMPORTED_DYNDEPS:
        _LAZY_IMPORTED_DYNDEPS.append(name)


def SetErrorHandler(handler: Callable[[BaseException], Any] | None) -> None:
    _error_handler[0] = handler


def GetImportedOpsLibraries() -> list[str]:
    _import_lazy()
    return dyndep.GetImportedOpsLibraries()


def _import_lazy() -> None:
    while _LAZY_IMPORTED_DYNDEPS:
        name = _LAZY_IMPORTED_DYNDEPS.pop(0)
        try:
            dyndep.InitOpsLibrary(name, trigger_lazy=False)
        except BaseException as e:
            if _error_handler[0] is not None:
                _error_handler[0](e)


lazy.RegisterLazyImport(_import_lazy)
