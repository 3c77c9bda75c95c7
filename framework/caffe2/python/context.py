"""``caffe2.python.context``: classes whose instances act as a per-thread "current" context.

``@define_context(arg_name=None, allow_default=False)`` on a class ``C`` makes

- ``with C(...) as c:`` push ``c`` on this thread's stack of ``C`` contexts (popped on exit; the class's own
  ``__enter__``/``__exit__``, if any, still run: entered first, exited last);
- ``@C(...)`` on a function run the function inside that context;
- ``C.current(value=None, required=True)`` return ``value`` itself when given (which must be a ``C``), else
  the innermost active ``C`` of this thread; with none active, ``None`` when not ``required``, else (with
  ``allow_default``) a ``C()`` made and pushed for the rest of the thread, else an AssertionError.

Each thread has its own stacks (Caffe2's semantics: a context entered in one thread is invisible in another).
A class may define a context once; a subclass shares its parent's. Caffe2's registry functions are kept:
``context_manager()`` / ``_context_registry()`` and ``get_active_context`` / ``_get_active_context``.
"""

from __future__ import annotations

import functools
import threading
from typing import Any, Callable

__all__ = ["ContextInfo", "ContextManager", "context_manager", "define_context", "get_active_context"]


class ContextInfo:
    """One context class's per-thread stack of active instances."""

    def __init__(self, cls: type, allow_default: bool, arg_name: str | None) -> None:
        self.cls = cls
        self.allow_default = allow_default
        self.arg_name = arg_name
        self._local = threading.local()

    @property
    def _stack(self) -> list[Any]:
        stack = getattr(self._local, "stack", None)
        if stack is None:
            stack = self._local.stack = []
        return stack

    def enter(self, value: Any) -> None:
        self._stack.append(value)

    def exit(self, value: Any) -> None:
        assert self._stack, f"Context {self.cls} is empty."
        top = self._stack.pop()
        assert top is value or top == value, f"Context {self.cls}: exiting {value!r}, but {top!r} is innermost"

    def get_active(self, required: bool = True) -> Any:
        if not self._stack:
            if not required:
                return None
            assert self.allow_default, f"Context {self.cls} is required but none is active."
            self.enter(self.cls())
        return self._stack[-1]


class ContextManager:
    """The registry: context class -> its ContextInfo."""

    def __init__(self) -> None:
        self._ctxs: dict[type, ContextInfo] = {}
        self._lock = threading.Lock()

    def register(self, ctx_info: ContextInfo) -> None:
        assert isinstance(ctx_info, ContextInfo)
        with self._lock:
            assert ctx_info.cls not in self._ctxs, f"Context {ctx_info.cls} already registered"
            self._ctxs[ctx_info.cls] = ctx_info

    def get(self, cls: type) -> ContextInfo:
        assert cls in self._ctxs, f"Context {cls} not registered."
        return self._ctxs[cls]


_REGISTRY = ContextManager()
_ContextInfo, _ContextRegistry = ContextInfo, ContextManager  # Caffe2 2020's names


def context_manager() -> ContextManager:
    return _REGISTRY


_context_registry = context_manager


def get_active_context(cls: type, val: Any = None, required: bool = True) -> Any:
    """``val`` (checked to be a ``cls``) if given, else ``cls``'s innermost active context (see module doc)."""
    info = _REGISTRY.get(cls)
    if val is not None:
        assert isinstance(val, cls), f"Wrong context type. Expected: {cls}, got {type(val)}."
        return val
    return info.get_active(required=required)


_get_active_context = get_active_context


def _enter(self: Any) -> Any:
    if self._prev_enter is not None:
        self._prev_enter()
    _REGISTRY.get(self._ctx_class).enter(self)
    return self


def _exit(self: Any, *args: Any) -> None:
    _REGISTRY.get(self._ctx_class).exit(self)
    if self._prev_exit is not None:
        self._prev_exit(*args)


def _decorate(self: Any, func: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with self:
            return func(*args, **kwargs)

    return wrapper


class define_context:  # noqa: N801 - Caffe2's name
    """Class decorator: make the class's instances contexts (see module doc)."""

    def __init__(self, arg_name: str | None = None, allow_default: bool = False) -> None:
        self.arg_name = arg_name
        self.allow_default = allow_default

    def __call__(self, cls: type) -> type:
        assert not hasattr(cls, "_ctx_class"), f"{cls} parent class ({cls._ctx_class}) already defines context."
        cls._ctx_class = cls
        _REGISTRY.register(ContextInfo(cls, self.allow_default, self.arg_name))
        cls._prev_enter = getattr(cls, "__enter__", None)
        cls._prev_exit = getattr(cls, "__exit__", None)
        cls.__enter__ = _enter
        cls.__exit__ = _exit
        cls.__call__ = _decorate
        cls.current = classmethod(
            lambda c, value=None, required=True: get_active_context(c._ctx_class, value, required)
        )
        return cls
