"""Builders of execution steps and plans: ``ExecutionStep``, ``execution_step``, ``Plan``.

A step runs nets by name (or substeps) some number of times; a plan holds its
steps and the NetDefs they run (``framework.net.plan`` executes it).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Iterable

from framework.builder.net_builder import Net
from framework.errors import NetError
from framework.proto.framework_pb2 import ExecutionStep as ExecutionStepProto
from framework.proto.framework_pb2 import NetDef, PlanDef

__all__ = ["ExecutionStep", "Plan", "execution_step"]


class ExecutionStep:
    """Builder of an ExecutionStep proto (nets by name, or substeps)."""

    def __init__(self, name: str, nets: Any = None, num_iter: int | None = None) -> None:
        self._step = ExecutionStepProto(name=name)
        self._net_dict: OrderedDict[str, Net] = OrderedDict()
        self._substeps: list[ExecutionStep] = []
        if nets is not None:
            for net in nets if isinstance(nets, (list, tuple)) else [nets]:
                self.AddNet(net)
        if num_iter is not None:
            self._step.num_iter = num_iter

    def Name(self) -> str:  # noqa: N802
        return self._step.name

    def __str__(self) -> str:
        return self._step.name

    def Proto(self) -> ExecutionStepProto:  # noqa: N802
        return self._step

    def HasNets(self) -> bool:  # noqa: N802
        return bool(self._net_dict)

    def HasSubsteps(self) -> bool:  # noqa: N802
        return bool(self._substeps)

    def Nets(self) -> list[Net]:  # noqa: N802
        return list(self._net_dict.values())

    def Substeps(self) -> list[ExecutionStep]:  # noqa: N802
        return list(self._substeps)

    def get_net(self, name: str) -> Net:
        return self._net_dict[name]

    def SetIter(self, num_iter: int) -> None:  # noqa: N802
        self._step.num_iter = num_iter

    def SetCreateWorkspace(self, create_workspace: bool) -> None:  # noqa: N802
        self._step.create_workspace = create_workspace

    def SetNumConcurrentInstances(self, num: int) -> None:  # noqa: N802
        self._step.num_concurrent_instances = num

    def SetOnlyOnce(self, only_once: bool) -> None:  # noqa: N802
        self._step.only_once = only_once

    def SetShouldStopBlob(self, should_stop_blob: Any) -> None:  # noqa: N802
        self._step.should_stop_blob = str(should_stop_blob)

    def RunEveryMillis(self, interval: int) -> None:  # noqa: N802
        self._step.run_every_ms = interval

    def SetReportNet(self, report_net: Any, report_interval: int) -> None:  # noqa: N802
        name = report_net.Name() if hasattr(report_net, "Name") else str(report_net)
        if hasattr(report_net, "Proto"):
            self._net_dict[name] = report_net
        self._step.report_net = name
        self._step.report_interval = report_interval

    def SetConcurrentSubsteps(self, concurrent: bool) -> None:  # noqa: N802
        self._step.concurrent_substeps = concurrent

    def AddSubstep(self, substep: Any) -> ExecutionStep:  # noqa: N802
        if self._step.network:
            raise NetError(f"step '{self.Name()}' has nets; a step holds either nets or substeps")
        if isinstance(substep, ExecutionStep):
            self._substeps.append(substep)
            self._step.substep.add().CopyFrom(substep.Proto())
        else:
            self._step.substep.add().CopyFrom(substep)
        return self

    def AddNet(self, net: Any) -> ExecutionStep:  # noqa: N802
        if self._step.substep:
            raise NetError(f"step '{self.Name()}' has substeps; a step holds either nets or substeps")
        if isinstance(net, NetDef):
            net = Net(net)
        name = net.Name() if hasattr(net, "Name") else str(net)
        self._step.network.append(name)
        if isinstance(net, Net):
            self._net_dict[name] = net
        return self

    def get_all_attributes(self, name: str) -> list[Any]:
        return [getattr(n.Proto(), name) for n in self.Nets()]


def _all_nets(step: ExecutionStep) -> list[Net]:
    nets = step.Nets()
    for sub in step.Substeps():
        nets += _all_nets(sub)
    return nets


def execution_step(
    default_name: str,
    steps_or_nets: Any,
    num_iter: int | None = None,
    report_net: Any = None,
    report_interval: int | None = None,
    concurrent_substeps: bool | None = None,
    should_stop_blob: Any = None,
    only_once: bool | None = None,
    num_concurrent_instances: int | None = None,
    create_workspace: bool = False,
    run_every_ms: int | None = None,
) -> ExecutionStep:
    """An ExecutionStep from a net, a step, or a list of either (Caffe2's helper)."""
    step = ExecutionStep(default_name)
    items = steps_or_nets if isinstance(steps_or_nets, (list, tuple)) else [steps_or_nets]
    if items and all(isinstance(x, (ExecutionStep, ExecutionStepProto)) for x in items):
        for s in items:
            step.AddSubstep(s)
    else:
        for n in items:
            step.AddNet(n)
    if num_iter is not None:
        step.SetIter(num_iter)
    if report_net is not None:
        step.SetReportNet(report_net, report_interval or 1)
    if concurrent_substeps is not None:
        step.SetConcurrentSubsteps(concurrent_substeps)
    if should_stop_blob is not None:
        step.SetShouldStopBlob(should_stop_blob)
    if only_once is not None:
        step.SetOnlyOnce(only_once)
    if num_concurrent_instances is not None:
        step.SetNumConcurrentInstances(num_concurrent_instances)
    if create_workspace:
        step.SetCreateWorkspace(True)
    if run_every_ms is not None:
        step.RunEveryMillis(run_every_ms)
    return step


class Plan:
    """Builder of a PlanDef: execution steps plus the NetDefs they run."""

    def __init__(self, name_or_step: Any) -> None:
        self._plan = PlanDef()
        self._net_dict: OrderedDict[str, Net] = OrderedDict()
        if isinstance(name_or_step, ExecutionStep):
            self._plan.name = name_or_step.Name()
            self.AddStep(name_or_step)
        else:
            self._plan.name = str(name_or_step)

    def Name(self) -> str:  # noqa: N802
        return self._plan.name

    def __str__(self) -> str:
        return self._plan.name

    def Proto(self) -> PlanDef:  # noqa: N802
        return self._plan

    def AddNets(self, nets: Iterable[Any]) -> None:  # noqa: N802
        for net in nets:
            net = net if isinstance(net, Net) else Net(net)
            if net.Name() not in self._net_dict:
                self._net_dict[net.Name()] = net
                self._plan.network.add().CopyFrom(net.Proto())

    def Nets(self) -> list[Net]:  # noqa: N802
        return list(self._net_dict.values())

    def AddStep(self, step: Any) -> None:  # noqa: N802
        if isinstance(step, ExecutionStep):
            self._plan.execution_step.add().CopyFrom(step.Proto())
            self.AddNets(_all_nets(step))
        else:
            self._plan.execution_step.add().CopyFrom(step)

    def get_all_attributes(self, name: str) -> list[Any]:
        return [getattr(n.Proto(), name) for n in self.Nets()]
