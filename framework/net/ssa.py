"""Blob versions of a forward pass (a light SSA form), as Caffe2's ``core.IR`` keeps them.

Every blob write has a version number: the first write of a blob is version 0,
each later write adds one; a read sees the current version (a blob read before
any op writes it is version 0 there, and its first write makes version 1). The
numbers come from the net's dataflow view (``framework.net.dataflow``). The
backward pass (``framework.net.backward``) checks gradient ops against these
versions, so an in-place op that destroyed a value a gradient needs is an
error, and sums the gradients of a version read by several ops.

>>> from framework.core import CreateOperator
>>> v = ForwardVersions([CreateOperator("Relu", ["X"], ["X"]), CreateOperator("Relu", ["X"], ["Y"])])
>>> v.ssa[0].in_versions, v.ssa[0].out_versions, v.frontier
({'X': 0}, {'X': 1}, {'X': 1, 'Y': 0})
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Iterable

from framework.errors import OrphanStopGradientError
from framework.net.dataflow import IO, DataFlow, Versions
from framework.ops.operator import describe_op
from framework.proto.framework_pb2 import OperatorDef

__all__ = ["ForwardVersions", "OpVersions", "has_no_gradient"]


@dataclass
class OpVersions:
    """One forward op with the versions of the blobs it reads and writes."""

    op: OperatorDef
    in_versions: dict[str, int]
    out_versions: dict[str, int]


class ForwardVersions:
    """The versions of every blob read and write of ``operators``, in order.

    - ``ssa[i]``: op ``i`` with its input and output versions;
    - ``frontier[blob]``: the version the net leaves;
    - ``input_usages[blob][version]``: indices of the ops reading that version;
    - ``out_history`` / ``in_history``: (index, op, version) of every write / read, for messages;
    - ``stopped``: (blob, version) pairs written by ops that have no gradient;
    - ``stop_gradient``: the subset of them written by ``StopGradient`` itself.

    Raises GradientError for a StopGradient whose output no later op reads.
    """

    def __init__(self, operators: Iterable[OperatorDef]) -> None:
        self.ssa: list[OpVersions] = []
        self.frontier: dict[str, int] = {}
        self.input_usages: dict[str, dict[int, list[int]]] = defaultdict(lambda: defaultdict(list))
        self.out_history: dict[str, list[tuple[int, OperatorDef, int]]] = defaultdict(list)
        self.in_history: dict[str, list[tuple[int, OperatorDef, int]]] = defaultdict(list)
        self.stopped: set[tuple[str, int]] = set()  # blob versions written by no-gradient ops
        self.stop_gradient: set[tuple[str, int]] = set()  # ... and by StopGradient
        self.flow = DataFlow(list(operators))
        for idx, (op, io, versions) in enumerate(zip(self.flow.ops, self.flow.ios(), self.flow.versions())):
            self._record(idx, op, io, versions)
        self._check_stop_gradients()

    def _record(self, idx: int, op: OperatorDef, io: IO, versions: Versions) -> None:
        """Op ``idx``'s reads and writes (``io``: its inputs and outputs) at their versions."""
        ins: dict[str, int] = {}
        for s, v in zip(io[0], versions[0]):
            self.frontier.setdefault(s, v)
            ins[s] = v
            self.input_usages[s][v].append(idx)
            self.in_history[s].append((idx, op, v))
        outs: dict[str, int] = {}
        for s, v in zip(io[1], versions[1]):
            outs[s] = v
            self.frontier[s] = v
            self.out_history[s].append((idx, op, v))
        if has_no_gradient(op.type):
            self.stopped.update(outs.items())
        if op.type == "StopGradient":
            self.stop_gradient.update(outs.items())
        self.ssa.append(OpVersions(op, ins, outs))

    def _check_stop_gradients(self) -> None:
        for k, s in enumerate(self.ssa):
            if s.op.type == "StopGradient" and s.op.output[0] not in self.input_usages:
                raise OrphanStopGradientError(
                    f"{describe_op(s.op, k)}: StopGradient's output '{s.op.output[0]}' is orphan: "
                    "no later op reads it, so it stops nothing. You typically want the same blob "
                    "as input and output (StopGradient(X) -> X)"
                )

    def history(self, name: str, which: str) -> str:
        """The writes (``which="out"``) or reads of blob ``name``, one line each, for error messages."""
        hist = self.out_history[name] if which == "out" else self.in_history[name]
        lines = [f"version history of blob '{name}' ({'written' if which == 'out' else 'read'} by):"]
        for idx, op, v in hist:
            lines.append(f"  version {v} {'<-' if which == 'out' else '->'} {describe_op(op, idx)}")
        return "\n".join(lines)

    def consumers(self, usage: list[int]) -> str:
        """The ops at indices ``usage``, described (an index past the last op is the gradient seed)."""
        names = [describe_op(self.ssa[i].op, i) if i < len(self.ssa) else "the seed" for i in usage]
        return ", ".join(names)


def has_no_gradient(op_type: str) -> bool:
    """True if ``op_type`` is registered as not differentiable (its outputs stop gradients)."""
    from framework.ops.gradient import NO_GRADIENT
    from framework.ops.registry import get_schema, has_op

    return has_op(op_type) and get_schema(op_type).gradient is NO_GRADIENT
