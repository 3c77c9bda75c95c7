"""Per-parameter optimizers chosen by context (Caffe2's ``caffe2.python.optimizer_context``).

``with UseOptimizer(opt):`` or ``with UseOptimizer({'WEIGHT': w_opt, 'BIAS': b_opt, 'DEFAULT': opt}):``
around layer helpers: each parameter ``ModelHelper.create_param`` makes gets the optimizer of one of its
tags (or ``DEFAULT``) as ``ParameterInfo.optimizer``, and ``optimizer.build_*`` then update that
parameter with its own optimizer instead of the one being built. Inner blocks override outer ones,
key by key; leaving a block restores the outer choice.

Departure: Caffe2 builds this on its generic ``context``/``modifier_context`` modules; the stack here is
self-contained (one per thread), with the same methods.

>>> with UseOptimizer({"WEIGHT": "w_opt"}):
...     OptimizerContext.current().get_optimizer("WEIGHT")
'w_opt'
>>> OptimizerContext.current().has_optimizer("WEIGHT")
False
"""

from __future__ import annotations

import threading
from typing import Any

from framework.errors import FrameworkError

__all__ = ["DEFAULT_OPTIM", "OptimizerContext", "UseOptimizer"]

DEFAULT_OPTIM = "DEFAULT"

_local = threading.local()


class OptimizerContext:
    """The optimizers in force, by tag; ``OptimizerContext.current()`` is this thread's instance."""

    def __init__(self) -> None:
        self._modifiers: dict[str, Any] = {}
        self._modifiers_list: list[dict[str, Any]] = []

    @classmethod
    def current(cls) -> OptimizerContext:
        ctx = getattr(_local, "context", None)
        if ctx is None:
            ctx = _local.context = cls()
        return ctx

    def push_modifiers(self, modifiers: dict[str, Any]) -> None:
        self._modifiers_list.append(dict(modifiers))
        self._modifiers.update(modifiers)

    def pop_modifiers(self) -> None:
        if not self._modifiers_list:
            raise FrameworkError("OptimizerContext: no optimizers to pop")
        self._modifiers_list.pop()
        self._modifiers = {}
        for mods in self._modifiers_list:
            self._modifiers.update(mods)

    def has_optimizer(self, name: str) -> bool:
        return name in self._modifiers

    def get_optimizer(self, name: str) -> Any:
        if name not in self._modifiers:
            raise FrameworkError(f"OptimizerContext: no optimizer is given for '{name}'")
        return self._modifiers[name]


class UseOptimizer:
    """``with UseOptimizer(opt_or_dict):`` makes the optimizer(s) current; a single optimizer is ``DEFAULT``."""

    def __init__(self, optim_or_dict: Any) -> None:
        self._modifiers = dict(optim_or_dict) if isinstance(optim_or_dict, dict) else {DEFAULT_OPTIM: optim_or_dict}

    def __enter__(self) -> UseOptimizer:
        OptimizerContext.current().push_modifiers(self._modifiers)
        return self

    def __exit__(self, *exc: Any) -> None:
        OptimizerContext.current().pop_modifiers()
