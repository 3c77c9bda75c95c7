"""Builders of execution steps and plans: ``ExecutionStep``, ``execution_step``, ``Plan``.

A step runs nets by name (or substeps) some number of times; a plan holds its
steps and the NetDefs they run (``framework.net.plan`` executes it).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Iterable

from framework.caffe2.python.builder.net_builder import Net
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

    def Name(self) -> str:
        return self._step.name

    def __str__(self) -> str:
        return self._step.name

    def Proto(self) -> ExecutionStepProto:
        return self._step

    def HasNets(self) -> bool:
        return bool(self._net_dict)

    def HasSubsteps(self) -> bool:
        return bool(self._substeps)

    def Nets(self) -> list[Net]:
        return list(self._net_dict.values())

    def Substeps(self) -> list[ExecutionStep]:
        return list(self._substeps)

    def get_net(self, name: str) -> Net:
        return self._net_dict[name]

    def SetIter(self, num_iter: int) -> None:
        self._step.num_iter = num_iter

    def SetCreateWorkspace(self, create_workspace: bool) -> None:
        self._step.create_workspace = create_workspace

    def SetNumConcurrentInstances(self, num: int) -> None:
        self._step.num_concurrent_instances = num

    def SetOnlyOnce(self, only_once: bool) -> None:
        self._step.only_once = only_once

    def SetShouldStopBlob(self, should_stop_blob: Any) -> None:
        self._step.should_stop_blob = str(should_stop_blob)

    def RunEveryMillis(self, interval: int) -> None:
        self._step.run_every_ms = interval

    def SetReportNet(self, report_net: Any, report_interval: int) -> None:
        name = report_net.Name() if hasattr(report_net, "Name") else str(report_net)
        if hasattr(report_net, "Proto"):
            self._net_dict[name] = report_net
        self._step.report_net = name
        self._step.report_interval = report_interval

    def SetConcurrentSubsteps(self, concurrent: bool) -> None:
        self._step.concurrent_substeps = concurrent

    def AddSubstep(self, substep: Any) -> ExecutionStep:
        if self._step.network:
            raise NetError(f"step '{self.Name()}' has nets; a step holds either nets or substeps")
        if isinstance(substep, ExecutionStep):
            self._substeps.append(substep)
            self._step.substep.add().CopyFrom(substep.Proto())
        else:
            self._step.substep.add().CopyFrom(substep)
        return self

    def AddNet(self, net: Any) -> ExecutionStep:
        if self._step.substep:
            raise NetError(f"step '{self.Name()}' has substeps; a step holds either nets or substeps")
        if isinstance(net, NetDef):
            net = Net(net)
        name = net.Name() if hasattr(net, "Name") else str(net)
        self._step.network.append(name)
        if isinstance(net, Net):
            self._net_dict[name] = net
        return self

    def as_plan_def(self) -> PlanDef:
        """A PlanDef running this step, with every net it runs: how the engine's plan runner
        (``framework.net.plan.load_plan``) takes a step builder without importing this layer."""
        return Plan(self).Proto()

    def get_all_attributes(self, name: str) -> list[Any]:
        """The attributes under ``name`` (``Net.add_attribute``) of every net this step and its
        substeps run, each net once (Caffe2's)."""
        return _attributes(_all_nets(self), name)


def _all_nets(step: ExecutionStep) -> list[Net]:
    """The nets of ``step`` and its substeps, in order, each name once."""
    out: OrderedDict[str, Net] = OrderedDict()

    def walk(s: ExecutionStep) -> None:
        for name, net in s._net_dict.items():
            out.setdefault(name, net)
        for sub in s.Substeps():
            walk(sub)

    walk(step)
    return list(out.values())


def _attributes(nets: Iterable[Net], name: str) -> list[Any]:
    return [a for n in nets if hasattr(n, "get_attributes") for a in n.get_attributes(name)]


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
    is_step = [isinstance(x, (ExecutionStep, ExecutionStepProto)) for x in items]
    if any(is_step):  # a mixed list: each net becomes a one-net substep (as Caffe2)
        for s, sub in zip(items, is_step):
            step.AddSubstep(s if sub else execution_step(s.Name() if hasattr(s, "Name") else s.name, s))
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
        self._steps: list[ExecutionStep] = []
        if isinstance(name_or_step, ExecutionStep):
            self._plan.name = name_or_step.Name()
            self.AddStep(name_or_step)
        else:
            self._plan.name = str(name_or_step)

    def Name(self) -> str:
        return self._plan.name

    def __str__(self) -> str:
        return self._plan.name

    def Proto(self) -> PlanDef:
        return self._plan

    def AddNets(self, nets: Iterable[Any]) -> None:
        for net in nets:
            net = net if isinstance(net, Net) else Net(net)
            if net.Name() not in self._net_dict:
                self._net_dict[net.Name()] = net
                self._plan.network.add().CopyFrom(net.Proto())

    def Nets(self) -> list[Net]:
        return list(self._net_dict.values())

    def AddStep(self, step: Any) -> None:
        if isinstance(step, ExecutionStep):
            self._plan.execution_step.add().CopyFrom(step.Proto())
            self._steps.append(step)
            self.AddNets(_all_nets(step))
        else:
            self._plan.execution_step.add().CopyFrom(step)

    def Steps(self) -> list[ExecutionStep]:
        """The ExecutionStep builders added (steps added as protos are not listed)."""
        return list(self._steps)

    @classmethod
    def create_from_proto(cls, plan_proto: PlanDef) -> Plan:
        """A Plan builder for an existing PlanDef: a Net per network and an ExecutionStep per step (substeps
        and step nets resolved by name; a step naming a net the plan lacks is an error)."""
        if not isinstance(plan_proto, PlanDef):
            raise TypeError(f"create_from_proto takes a PlanDef, got {type(plan_proto).__name__}")
        nets: dict[str, Net] = {}
        for net_proto in plan_proto.network:
            if net_proto.name in nets:
                raise NetError(f"plan '{plan_proto.name}': two networks are named '{net_proto.name}'")
            nets[net_proto.name] = Net(net_proto)

        def step_from(proto: ExecutionStepProto) -> ExecutionStep:
            step = ExecutionStep(proto.name)
            step._step.CopyFrom(proto)
            del step._step.substep[:], step._step.network[:]
            for name in proto.network:
                if name not in nets:
                    raise NetError(f"plan '{plan_proto.name}': step '{proto.name}' runs unknown net '{name}'")
                # the Net took a name not used yet in this process, as Caffe2's does: the step names it
                net = nets[name]
                step._step.network.append(net.Name())
                step._net_dict.setdefault(net.Name(), net)
            for sub in proto.substep:
                child = step_from(sub)
                step._step.substep.add().CopyFrom(child.Proto())
                step._substeps.append(child)
            return step

        plan = cls(plan_proto.name)
        for step_proto in plan_proto.execution_step:
            plan.AddStep(step_from(step_proto))
        return plan

    def get_all_attributes(self, name: str) -> list[Any]:
        """The attributes under ``name`` of every net of the plan (Caffe2's)."""
        return _attributes(self.Nets(), name)
