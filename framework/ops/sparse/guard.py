"""A last line of defence for the sparse, quantized and sparse-optimizer families: every op's ``run`` turns an
unexpected numpy/Python error from bad input (a 0-d tensor where rows are needed, strings where numbers are,
...) into a ShapeError naming the op and showing its blobs, instead of a raw exception. The ops validate
what they know first; this catches the shapes and types nobody thought of. Validation runs before any
output is written, so a failed op leaves its blobs as they were.
"""

from __future__ import annotations

import functools
from typing import Callable, Iterable

from framework.errors import FrameworkError, ShapeError
from framework.ops.operator import Operator
from framework.ops.registry import all_schemas

RAW = (ValueError, TypeError, IndexError, OverflowError, ZeroDivisionError, KeyError, AttributeError)


def _guarded(run: Callable[[Operator], None]) -> Callable[[Operator], None]:
    if getattr(run, "_guarded", False):
        return run

    @functools.wraps(run)
    def wrapper(self: Operator) -> None:
        try:
            run(self)
        except FrameworkError:
            raise
        except RAW as e:
            raise ShapeError(
                f"{self.describe()}: inputs it cannot handle ({type(e).__name__}: {e})\n{self.context()}"
            ) from e

    wrapper._guarded = True
    return wrapper


def guard_modules(prefixes: Iterable[str]) -> None:
    """Wrap ``run`` of every registered op class defined in a module starting with one of ``prefixes``."""
    prefixes = tuple(prefixes)
    for schema in all_schemas():
        for cls in schema.operator_class.__mro__:
            if cls is Operator or not cls.__module__.startswith(prefixes):
                continue
            if "run" in cls.__dict__:
                cls.run = _guarded(cls.__dict__["run"])
