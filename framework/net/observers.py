"""Net observers (Caffe2's ``TimeObserver`` and ``RunCountObserver``): objects attached to an instantiated
net that see each of its runs start and stop.

- ``TimeObserver``: ``average_time()`` is the mean wall time of the observed runs, in milliseconds;
- ``RunCountObserver``: counts the operators run: the net's top-level ops once per run, plus the step-net
  ops a RecurrentNetwork (or its gradient) ran, once per timestep (an op's ``nested_ops_run``), as Caffe2
  counts them through its RNN executor; ``debug_info()`` is ``"This operator runs <n> times."``.

``make_observer(type_name)`` builds one; ``NetBase.run`` notifies ``net.observers``.
"""

from __future__ import annotations

import time
from typing import Any

from framework.errors import FrameworkError

__all__ = ["NetObserver", "RunCountObserver", "TimeObserver", "make_observer"]


class NetObserver:
    """Base: ``start(net)`` before a run, ``stop(net)`` after it (also after a failed run)."""

    def start(self, net: Any) -> None:
        pass

    def stop(self, net: Any) -> None:
        pass

    def debug_info(self) -> str:
        return type(self).__name__


class TimeObserver(NetObserver):
    def __init__(self) -> None:
        self._runs = 0
        self._total = 0.0
        self._t0 = 0.0

    def start(self, net: Any) -> None:
        self._t0 = time.perf_counter()

    def stop(self, net: Any) -> None:
        self._total += (time.perf_counter() - self._t0) * 1000.0
        self._runs += 1

    def average_time(self) -> float:
        """Mean milliseconds per observed run (0.0 before the first)."""
        return self._total / self._runs if self._runs else 0.0

    def debug_info(self) -> str:
        return f"Average time: {self.average_time():.4f} ms over {self._runs} runs."


class RunCountObserver(NetObserver):
    def __init__(self) -> None:
        self.count = 0

    def stop(self, net: Any) -> None:
        self.count += sum(1 + getattr(op, "nested_ops_run", 0) for op in net.ops)

    def debug_info(self) -> str:
        return f"This operator runs {self.count} times."


_TYPES = {"TimeObserver": TimeObserver, "RunCountObserver": RunCountObserver}


def make_observer(type_name: str) -> NetObserver:
    cls = _TYPES.get(str(type_name))
    if cls is None:
        raise FrameworkError(f"unknown observer type '{type_name}' (known: {', '.join(sorted(_TYPES))})")
    return cls()
