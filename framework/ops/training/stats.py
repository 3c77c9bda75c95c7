"""Stat registries and timers (Caffe2's stats_ops.cc).

A ``StatRegistry`` maps names to int64 counters. Caffe2 has a process-wide
singleton that ``CAFFE_EVENT`` feeds; here the default registry belongs to
the workspace (the root of a child-workspace chain), so workspaces stay
independent. ``StatRegistryUpdate`` *adds* the values to the counters (as
Caffe2's ``StatValue::update``), ``StatRegistryExport`` lists them (sorted by
key) and resets them by default.

Timers: ``TimerBegin`` starts one (named ``counter_name``, default the
output's name); ``TimerEnd``/``TimerGetAndEnd`` stop it and add the elapsed
nanoseconds to the default registry's ``<name>/time_ns/sum`` and 1 to
``<name>/time_ns/count`` (Caffe2's averaged exported stat). Registries and
timers have no serializer: saving one is a clear SerializationError.
"""

from __future__ import annotations

import threading
import time
import weakref

import numpy as np

from framework.errors import OperatorError, ShapeError, TypeMismatchError
from framework.ops.gradient import should_not_do_gradient
from framework.ops.object_blobs import held, register_create_op, unknown_outputs
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import BOOL, STRING, Arg, TensorSpec

_INT64 = np.dtype(np.int64)


class StatRegistry:
    """Thread-safe named int64 counters."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._stats: dict[str, int] = {}

    def update(self, key: str, value: int) -> None:
        with self._lock:
            self._stats[key] = self._stats.get(key, 0) + int(value)

    def publish(self, reset: bool) -> list[tuple[str, int, int]]:
        """``[(key, value, timestamp ns)]`` sorted by key; counters go to 0 with ``reset``."""
        with self._lock:
            now = time.time_ns()
            out = [(k, v, now) for k, v in sorted(self._stats.items())]
            if reset:
                for k in self._stats:
                    self._stats[k] = 0
            return out

    def __repr__(self) -> str:
        return f"StatRegistry({len(self._stats)} counters)"


_DEFAULT: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_DEFAULT_LOCK = threading.Lock()


def default_registry(ws) -> StatRegistry:
    """The StatRegistry of ``ws``'s root workspace (created on first use)."""
    while getattr(ws, "parent", None) is not None:
        ws = ws.parent
    with _DEFAULT_LOCK:
        reg = _DEFAULT.get(ws)
        if reg is None:
            reg = _DEFAULT[ws] = StatRegistry()
        return reg


class Timer:
    """A wall-clock timer publishing to a registry under ``name``."""

    def __init__(self, name: str, registry: StatRegistry) -> None:
        self.name, self.registry = name, registry
        self.running = False
        self.start = 0

    def begin(self) -> None:
        self.start = time.perf_counter_ns()
        self.running = True

    def get_ns(self) -> int:
        return time.perf_counter_ns() - self.start

    def end(self) -> int:
        ns = self.get_ns()
        self.registry.update(f"{self.name}/time_ns/sum", ns)
        self.registry.update(f"{self.name}/time_ns/count", 1)
        self.running = False
        return ns

    def __repr__(self) -> str:
        return f"Timer({self.name!r}, {'running' if self.running else 'stopped'})"


_unknown = unknown_outputs


register_create_op(
    "StatRegistryCreate",
    lambda op: StatRegistry(),
    "Create a StatRegistry: named int64 counters.",
    ("handle", "a new, empty StatRegistry"),
    "training",
    module=__name__,
)


def _registry(op: Operator, i: int) -> StatRegistry:
    if len(op.inputs) > i:
        return held(op, i, StatRegistry, "StatRegistryCreate")
    return default_registry(op.workspace)


@register_op(
    "StatRegistryUpdate",
    inputs=(2, 3),
    outputs=0,
    input_docs=[
        ("keys", "1-D string tensor of counter names"),
        ("values", "1-D int64 tensor: amounts added to the counters"),
        ("handle", "optional StatRegistry (default: the workspace's)"),
    ],
    infer=_unknown,
    category="training",
)
class StatRegistryUpdate(Operator):
    """Add ``values[i]`` to the counter ``keys[i]`` (created at 0 if missing)."""

    def run(self) -> None:
        reg = _registry(self, 2)
        keys, values = self.input(0), self.input(1)
        if keys.dtype != object:
            raise TypeMismatchError(f"{self.describe()}: keys '{self.input_names[0]}' must be a string tensor")
        if values.dtype != _INT64:
            raise TypeMismatchError(
                f"{self.describe()}: values '{self.input_names[1]}' must be int64, got {values.dtype}"
            )
        if keys.size != values.size:
            raise ShapeError(f"{self.describe()}: {keys.size} keys but {values.size} values")
        for k, v in zip(keys.reshape(-1).tolist(), values.reshape(-1).tolist()):
            reg.update(k.decode("utf-8", "replace") if isinstance(k, bytes) else str(k), v)


@register_op(
    "StatRegistryExport",
    inputs=(0, 1),
    outputs=3,
    args=[Arg("reset", BOOL, True, "reset the counters to 0 after reading them")],
    input_docs=[("handle", "optional StatRegistry (default: the workspace's)")],
    output_docs=[("keys", "1-D string tensor"), ("values", "1-D int64"), ("timestamps", "1-D int64 ns since epoch")],
    infer=lambda args, ins: [
        TensorSpec((None,), np.dtype(object)),
        TensorSpec((None,), _INT64),
        TensorSpec((None,), _INT64),
    ],
    category="training",
)
class StatRegistryExport(Operator):
    """Export every counter (sorted by key) with a timestamp; reset them unless ``reset`` is false."""

    def run(self) -> None:
        data = _registry(self, 0).publish(self.args.reset)
        n = len(data)
        keys = self.output(0, (n,), np.dtype(object))
        keys[:] = [k.encode("utf-8") for k, _, _ in data]
        self.output(1, (n,), _INT64)[:] = [v for _, v, _ in data]
        self.output(2, (n,), _INT64)[:] = [t for _, _, t in data]


@register_op(
    "TimerBegin",
    inputs=0,
    outputs=1,
    args=[Arg("counter_name", STRING, "", "timer name (default: the output blob's name)")],
    output_docs=[("timer", "the running Timer")],
    infer=_unknown,
    category="training",
)
class TimerBegin(Operator):
    """Start a wall-clock timer (the same Timer object on every run of this op)."""

    def setup(self) -> None:
        self._timer = Timer(self.args.counter_name or self.output_names[0], default_registry(self.workspace))

    def run(self) -> None:
        self.outputs[0].reset(self._timer)
        self._timer.begin()


def _timer(op: Operator) -> Timer:
    t = held(op, 0, Timer, "TimerBegin")
    if not t.running:
        raise OperatorError(f"{op.describe()}: timer '{op.input_names[0]}' is stopped (start it with TimerBegin)")
    return t


@register_op("TimerEnd", inputs=1, outputs=0, input_docs=[("timer", "a Timer")], infer=_unknown, category="training")
class TimerEnd(Operator):
    """Stop the timer and publish its time to the workspace's StatRegistry."""

    def run(self) -> None:
        _timer(self).end()


@register_op(
    "TimerGetAndEnd",
    inputs=1,
    outputs=1,
    input_docs=[("timer", "a Timer")],
    output_docs=[("nanos", "int64 [1]: nanoseconds since TimerBegin")],
    infer=lambda args, ins: [TensorSpec((1,), _INT64)],
    category="training",
)
class TimerGetAndEnd(Operator):
    """Output the nanoseconds since the timer began (shape [1]), then stop and publish it."""

    def run(self) -> None:
        t = _timer(self)
        self.output(0, (1,), _INT64)[0] = t.get_ns()
        t.end()


@register_op(
    "TimerGet",
    inputs=1,
    outputs=1,
    input_docs=[("timer", "a running Timer")],
    output_docs=[("nanos", "int64 scalar: nanoseconds since TimerBegin")],
    infer=lambda args, ins: [TensorSpec((), _INT64)],
    category="training",
)
class TimerGet(Operator):
    """Output the nanoseconds since the timer began (a scalar, as Caffe2's Resize())."""

    def run(self) -> None:
        self.output(0, (), _INT64)[...] = _timer(self).get_ns()


should_not_do_gradient(
    "StatRegistryCreate",
    "StatRegistryUpdate",
    "StatRegistryExport",
    "TimerBegin",
    "TimerEnd",
    "TimerGetAndEnd",
    "TimerGet",
)
