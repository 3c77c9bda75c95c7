"""ProfDAGNet: a DAGNet that times every op (hook over ``_run_chain``).

The first run is a warm-up and is not counted. Statistics: per op, the mean
and standard deviation of its time over runs; per op type, of the summed time
of that type's ops in a run. Times are in milliseconds, as Caffe2's
ProfDAGProtos. ``net.stats()`` returns a ``ProfStats`` (data), which converts
to ``ProfDAGProtos`` (``to_proto``) and prints as a table (``str``).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any, Callable

from framework.net.base import register_net_type
from framework.net.executors.dag import DAGNet, _ChainFailure
from framework.proto.framework_pb2 import ProfDAGProtos


@dataclass
class OpStats:
    """Mean and standard deviation (ms) of one op or op type over ``runs`` runs."""

    name: str
    mean: float
    stddev: float
    runs: int


class _Acc:
    __slots__ = ("n", "s", "ss")

    def __init__(self) -> None:
        self.n, self.s, self.ss = 0, 0.0, 0.0

    def add(self, x: float) -> None:
        self.n += 1
        self.s += x
        self.ss += x * x

    def stats(self, name: str) -> OpStats:
        if self.n == 0:
            return OpStats(name, 0.0, 0.0, 0)
        mean = self.s / self.n
        var = max(self.ss / self.n - mean * mean, 0.0)
        return OpStats(name, mean, math.sqrt(var), self.n)


@dataclass
class ProfStats:
    """Per-op and per-op-type timing of a prof_dag net."""

    net: str
    per_op: list[OpStats]
    per_type: list[OpStats]

    def to_proto(self, per_op: bool = True) -> ProfDAGProtos:
        out = ProfDAGProtos()
        for s in self.per_op if per_op else self.per_type:
            p = out.stats.add()
            p.name, p.mean, p.stddev = s.name, s.mean, s.stddev
        return out

    def table(self) -> str:
        lines = [f"prof_dag '{self.net}': {self.per_op[0].runs if self.per_op else 0} timed runs (ms)"]
        width = max([len(s.name) for s in self.per_op + self.per_type] + [10])
        lines.append(f"{'op':<{width}}  {'mean':>10}  {'stddev':>10}")
        lines += [f"{s.name:<{width}}  {s.mean:>10.4f}  {s.stddev:>10.4f}" for s in self.per_op]
        lines.append(f"{'op type':<{width}}  {'mean':>10}  {'stddev':>10}")
        lines += [f"{s.name:<{width}}  {s.mean:>10.4f}  {s.stddev:>10.4f}" for s in self.per_type]
        return "\n".join(lines)

    __str__ = table


@register_net_type("prof_dag")
class ProfDAGNet(DAGNet):
    """DAGNet that records per-op times; see module doc."""

    def setup(self) -> None:
        super().setup()
        self.runs = 0
        self._times = [0.0] * len(self.ops)
        self._per_op = [_Acc() for _ in self.ops]
        self._types = sorted({op.type for op in self.ops})
        self._per_type = {t: _Acc() for t in self._types}

    def _run_chain(self, chain: list[int], fns: list[Callable[[], Any]]) -> None:
        times, clock = self._times, time.perf_counter
        k = -1
        try:
            for k in chain:
                t0 = clock()
                fns[k]()
                times[k] = (clock() - t0) * 1e3
        except Exception as e:
            raise _ChainFailure(k, e) from e

    def _on_run_end(self) -> None:
        self.runs += 1
        if self.runs == 1:  # warm-up run
            return
        by_type = dict.fromkeys(self._types, 0.0)
        for k, t in enumerate(self._times):
            self._per_op[k].add(t)
            by_type[self.ops[k].type] += t
        for name, t in by_type.items():
            self._per_type[name].add(t)

    def op_label(self, k: int) -> str:
        op = self.ops[k]
        return f"#{op.index} {op.type}" + (f' "{op.name}"' if op.name else "")

    def stats(self) -> ProfStats:
        """Timing statistics so far (empty means until the second run)."""
        return ProfStats(
            self.name,
            [acc.stats(self.op_label(k)) for k, acc in enumerate(self._per_op)],
            [self._per_type[t].stats(t) for t in self._types],
        )

    def print_stats(self) -> None:
        print(self.stats().table())
