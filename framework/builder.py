"""The Caffe2-style Python builders behind ``framework.core``: BlobReference,
Net, ExecutionStep, Plan (import them from ``framework.core``).

``net.add_op("FC", [x, w, b], "y", axis=1)`` appends an op through the op
registry; ``net.FC([x, w, b], "y", axis=1)`` is sugar for it (unknown types
raise with "did you mean"). Every op added here records where it was created
(file:line stack) in ``OperatorDef.debug_info``, which run errors show.
"""

from __future__ import annotations

import os
import threading
import traceback
from collections import OrderedDict
from typing import Any, Iterable

from framework.errors import NetError, UnknownOperatorError
from framework.net.graph import format_ops
from framework.ops.gradient import GradientSlice
from framework.ops.registry import has_op, unknown_message
from framework.proto.framework_pb2 import ExecutionStep as ExecutionStepProto
from framework.proto.framework_pb2 import NetDef, PlanDef
from framework.scope import CurrentNameScope, ScopedName

__all__ = [
    "BlobReference",
    "ExecutionStep",
    "GradientSlice",
    "Net",
    "Plan",
    "ScopedBlobReference",
    "UnknownOperatorAttributeError",
    "execution_step",
]

_STACK_DEPTH = 8  # innermost caller frames kept in debug_info


class UnknownOperatorAttributeError(UnknownOperatorError, AttributeError):
    """``net.Foo(...)`` for an unregistered op type (also an AttributeError, so hasattr works)."""


class BlobReference(str):
    """A blob name (a ``str``) that remembers its net; ``b.Relu()`` adds an op to that net.

    >>> b = BlobReference("x")
    >>> b == "x", hash(b) == hash("x"), b + "_grad"
    (True, True, BlobReference('x_grad'))
    """

    def __new__(cls, name: Any, net: Net | None = None) -> BlobReference:
        self = super().__new__(cls, str(name))
        self._from_net = net
        return self

    def Net(self) -> Net | None:  # noqa: N802
        return self._from_net

    def GetNameScope(self) -> str:  # noqa: N802
        return self[: self.rfind("/") + 1]

    def GetUnscopedName(self) -> str:  # noqa: N802
        return self[self.rfind("/") + 1 :]

    def __add__(self, other: Any) -> BlobReference:
        return BlobReference(str.__add__(self, str(other)), self._from_net)

    def __radd__(self, other: Any) -> BlobReference:
        return BlobReference(str(other) + str(self), self._from_net)

    def __repr__(self) -> str:
        return f"BlobReference({str(self)!r})"

    def _CreateAndAddToNet(self, op_type: str, inputs: Any = None, *args: Any, **kwargs: Any) -> Any:  # noqa: N802
        if self._from_net is None:
            raise NetError(f"blob '{self}' is not attached to a net: use net.{op_type}([...]) instead")
        inputs = [self] if inputs is None else [self, *_as_list(inputs)]
        return self._from_net.add_op(op_type, inputs, *args, **kwargs)

    def __getattr__(self, op_type: str) -> Any:
        if op_type.startswith("_"):
            raise AttributeError(op_type)
        if not has_op(op_type):
            raise UnknownOperatorAttributeError(unknown_message(op_type))
        return lambda *args, **kwargs: self._CreateAndAddToNet(op_type, *args, **kwargs)


def ScopedBlobReference(name: Any, *args: Any, **kwargs: Any) -> BlobReference:  # noqa: N802
    """A BlobReference with the current NameScope prefix."""
    return BlobReference(ScopedName(name), *args, **kwargs)


def _as_list(x: Any) -> list:
    if x is None:
        return []
    if isinstance(x, (str, bytes)) or not isinstance(x, (list, tuple)):
        return [x]
    return list(x)


_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def _creation_site() -> str:
    """The innermost caller frames outside the framework package (brew, model_helper, this
    module...), as traceback lines; frames outside this module if all are inside the package."""
    frames = [f for f in traceback.extract_stack()[:-1] if f.filename != __file__]
    user = [f for f in frames if not os.path.abspath(f.filename).startswith(_PACKAGE_DIR)]
    return "".join(traceback.format_list((user or frames)[-_STACK_DEPTH:])).rstrip()


_names_lock = threading.Lock()
_net_names: dict[str, int] = {}


def _unique_net_name(name: str) -> str:
    """``name``, or ``name_<k>`` if a Net of that name was already built in this process (Caffe2)."""
    with _names_lock:
        k = _net_names.get(name)
        if k is None:
            _net_names[name] = 0
            return name
        while True:
            k += 1
            cand = f"{name}_{k}"
            if cand not in _net_names:
                _net_names[name] = k
                _net_names[cand] = 0
                return cand


class Net:
    """A NetDef under construction; see module doc."""

    def __init__(self, name_or_proto: Any, inplace: bool = False) -> None:
        if isinstance(name_or_proto, NetDef):
            proto = name_or_proto
            if inplace:
                self._net = proto
            else:
                self._net = NetDef()
                self._net.CopyFrom(proto)
        elif isinstance(name_or_proto, Net):
            self._net = NetDef()
            self._net.CopyFrom(name_or_proto.Proto())
        else:
            self._net = NetDef(name=_unique_net_name(str(name_or_proto)))
        self._next_name_index = 0
        self._defined: set[str] = set(self._net.external_input)
        self._used: set[str] = set(self._net.external_input)
        for op in self._net.op:
            self._defined.update(op.output)
            self._used.update(op.input)
            self._used.update(op.output)

    # -- identity -------------------------------------------------------------
    def Name(self) -> str:  # noqa: N802
        return self._net.name

    def Proto(self) -> NetDef:  # noqa: N802
        return self._net

    def __str__(self) -> str:
        return format_ops(self._net.op)

    def __repr__(self) -> str:
        return f"<Net '{self.Name()}': {len(self._net.op)} ops>"

    # -- blob names -------------------------------------------------------------
    def BlobIsDefined(self, blob: Any) -> bool:  # noqa: N802
        """True if ``blob`` is an external input or written by an op of this net."""
        return str(blob) in self._defined

    def UsesBlob(self, blob: Any) -> bool:  # noqa: N802
        """True if any op reads or writes ``blob``, or it is an external input."""
        return str(blob) in self._used

    def GetUsedBlobs(self) -> list[str]:  # noqa: N802
        return sorted(self._used)

    def NextName(self, prefix: str | None = None, output_id: int | None = None) -> str:  # noqa: N802
        """A blob name not yet used in this net (``<net>/<prefix>[:k]`` or ``<net>_blob_<i>``)."""
        if prefix:
            base = f"{self._net.name}/{prefix}"
            name, index = base, 2
            suffix = "" if output_id is None else f":{output_id}"
            while self.UsesBlob(ScopedName(name + suffix)):
                name = f"{base}_{index}"
                index += 1
            return name + suffix
        while True:
            name = f"{self._net.name}_blob_{self._next_name_index}"
            self._next_name_index += 1
            if not self.UsesBlob(ScopedName(name)):
                return name

    def NextBlob(self, prefix: str) -> BlobReference:  # noqa: N802
        """A BlobReference named ``prefix`` (scoped), or ``prefix_auto_<i>`` if that is taken."""
        name = ScopedName(prefix)
        k = 0
        out = name
        while self.UsesBlob(out):
            out = f"{name}_auto_{k}"
            k += 1
        return BlobReference(out, self)

    NextScopedBlob = NextBlob

    # -- external inputs and outputs --------------------------------------------
    def AddExternalInput(self, *inputs: Any) -> Any:  # noqa: N802
        """Declare external inputs; returns the BlobReference (or a list of them)."""
        if len(inputs) == 1 and isinstance(inputs[0], (list, tuple)):
            inputs = tuple(inputs[0])
        refs = []
        for x in inputs:
            name = str(x) if isinstance(x, BlobReference) else ScopedName(str(x))
            if name in self._net.external_input:
                raise NetError(f"net '{self.Name()}' already has an external input named '{name}'")
            self._net.external_input.append(name)
            self._defined.add(name)
            self._used.add(name)
            refs.append(BlobReference(name, self))
        return refs[0] if len(refs) == 1 else refs

    def AddExternalInputs(self, *inputs: Any) -> Any:  # noqa: N802
        return self.AddExternalInput(*inputs)

    def AddExternalOutput(self, *outputs: Any) -> Any:  # noqa: N802
        """Declare external outputs; each must be produced by an op or be an external input."""
        if len(outputs) == 1 and isinstance(outputs[0], (list, tuple)):
            outputs = tuple(outputs[0])
        refs = []
        for x in outputs:
            name = str(x)
            if not self.BlobIsDefined(name):
                raise NetError(
                    f"net '{self.Name()}': external output '{name}' is not produced by any op "
                    "and is not an external input"
                )
            if name not in self._net.external_output:
                self._net.external_output.append(name)
            refs.append(BlobReference(name, self))
        return refs[0] if len(refs) == 1 else refs

    def AddExternalOutputs(self, *outputs: Any) -> Any:  # noqa: N802
        return self.AddExternalOutput(*outputs)

    # -- adding ops ------------------------------------------------------------------
    def add_op(self, op_type: str, inputs: Any = None, outputs: Any = None, **kwargs: Any) -> Any:
        """Append a ``op_type`` op; returns its output BlobReference (or a tuple of them).

        ``outputs`` may be None (one fresh name), an int (that many fresh
        names) or names. Inputs the net does not define become external
        inputs. Unknown op types raise UnknownOperatorError with suggestions.
        """
        if not has_op(op_type):
            raise UnknownOperatorAttributeError(unknown_message(op_type))
        ins = [x if isinstance(x, BlobReference) else ScopedBlobReference(x, self) for x in _as_list(inputs)]
        if outputs is None:
            outs = [ScopedBlobReference(self.NextName(prefix=op_type), self)]
        elif isinstance(outputs, int) and not isinstance(outputs, bool):
            outs = [ScopedBlobReference(self.NextName(prefix=op_type, output_id=i), self) for i in range(outputs)]
        else:
            outs = [x if isinstance(x, BlobReference) else ScopedBlobReference(x, self) for x in _as_list(outputs)]
        for x in ins:
            if not self.BlobIsDefined(x):
                self._net.external_input.append(str(x))
                self._defined.add(str(x))
        from framework.core import CreateOperator  # core imports this module

        kwargs.setdefault("debug_info", _creation_site())
        op = CreateOperator(op_type, ins, outs, **kwargs)
        self._net.op.append(op)
        self._used.update(op.input)
        self._used.update(op.output)
        self._defined.update(op.output)
        refs = tuple(BlobReference(o, self) for o in op.output)
        return refs[0] if len(refs) == 1 else refs

    _CreateAndAddToSelf = add_op

    def __getattr__(self, op_type: str) -> Any:
        if op_type.startswith("_"):
            raise AttributeError(op_type)
        if not has_op(op_type):
            raise UnknownOperatorAttributeError(unknown_message(op_type))
        return lambda *args, **kwargs: self.add_op(op_type, *args, **kwargs)

    def AppendNet(self, net: Any) -> Net:  # noqa: N802
        """Append ``net``'s ops, external inputs (not defined here) and external outputs."""
        proto = net.Proto() if hasattr(net, "Proto") else net
        for x in proto.external_input:
            if not self.BlobIsDefined(x):
                self._net.external_input.append(x)
                self._defined.add(x)
                self._used.add(x)
        for op in proto.op:
            self._net.op.add().CopyFrom(op)
            self._used.update(op.input)
            self._used.update(op.output)
            self._defined.update(op.output)
        for x in proto.external_output:
            if x not in self._net.external_output:
                self._net.external_output.append(x)
        return self

    # -- whole-net edits -------------------------------------------------------------------
    def set_rand_seed(self, seed: int = 100, sequence_seed: bool = True, seed_on_op_def: bool = False) -> None:
        """Give every op a random seed (``seed + i`` with ``sequence_seed``, else ``seed``)."""
        for i, op in enumerate(self._net.op):
            s = seed + i if sequence_seed else seed
            op.device_option.random_seed = s
            if seed_on_op_def:
                from framework.proto.args import make_argument

                op.arg.append(make_argument("random_seed", s))

    def RunAllOnGPU(self, gpu_id: int = 0, use_cudnn: bool = False) -> None:  # noqa: N802
        """Tag the net and its ops for CUDA (they run on the CPU implementation here)."""
        self._net.device_option.device_type = 1
        self._net.device_option.device_id = gpu_id
        for op in self._net.op:
            op.device_option.device_type = 1
            op.device_option.device_id = gpu_id
            if use_cudnn:
                op.engine = "CUDNN"

    def Clone(  # noqa: N802
        self,
        name: str,
        blob_remap: dict[str, str] | None = None,
        op_id_mask: Iterable[int] | None = None,
        remap_funcs: Any = None,
        keep_schema: bool = True,
        update_external_list: bool = False,
    ) -> Net:
        """A copy named ``name`` with blobs renamed by ``blob_remap`` and only ops in ``op_id_mask``."""
        remap = {str(k): str(v) for k, v in (blob_remap or {}).items()}

        def rn(names: Iterable[str]) -> list[str]:
            return [remap.get(n, n) for n in names]

        proto = NetDef()
        proto.CopyFrom(self._net)
        proto.name = name
        del proto.op[:]
        mask = None if op_id_mask is None else set(op_id_mask)
        for i, op in enumerate(self._net.op):
            if mask is not None and i not in mask:
                continue
            new = proto.op.add()
            new.CopyFrom(op)
            for field in ("input", "output", "control_input"):
                names = rn(getattr(op, field))
                del getattr(new, field)[:]
                getattr(new, field).extend(names)
        for field in ("external_input", "external_output"):
            names = rn(getattr(self._net, field))
            del getattr(proto, field)[:]
            getattr(proto, field).extend(names)
        if update_external_list and mask is not None:
            produced = {o for op in proto.op for o in op.output}
            used = {i for op in proto.op for i in op.input}
            ext_in = [x for x in proto.external_input if x in used]
            ext_in += sorted(used - produced - set(ext_in))
            del proto.external_input[:]
            proto.external_input.extend(ext_in)
            ext_out = [x for x in proto.external_output if x in produced]
            del proto.external_output[:]
            proto.external_output.extend(ext_out)
        return Net(proto)

    def ClonePartial(self, name: str, inputs: Iterable[Any], outputs: Iterable[Any], remap_funcs: Any = None) -> Net:  # noqa: N802
        """The sub-net computing ``outputs`` from ``inputs`` (ops walked backwards from outputs)."""
        inputs = {str(x) for x in inputs}
        need = {str(x) for x in outputs}
        keep = []
        for i in reversed(range(len(self._net.op))):
            op = self._net.op[i]
            if need & set(op.output):
                keep.append(i)
                need -= set(op.output)
                need |= {x for x in op.input if x not in inputs}
        proto = NetDef()
        proto.CopyFrom(self._net)
        proto.name = name
        del proto.op[:], proto.external_input[:], proto.external_output[:]
        for i in sorted(keep):
            proto.op.add().CopyFrom(self._net.op[i])
        proto.external_input.extend(sorted(inputs) + sorted(need - inputs))
        proto.external_output.extend(str(x) for x in outputs)
        return Net(proto)

    def AddGradientOperators(self, ys: Any, skip: int = 0) -> dict[str, Any]:  # noqa: N802
        """Append the backward pass of ``ys``; {blob: gradient BlobReference or GradientSlice}."""
        from framework.net.backward import add_gradient_operators

        if isinstance(ys, (str, BlobReference)):
            ys = [ys]
        if isinstance(ys, dict):
            ys = {str(k): v for k, v in ys.items()}
        else:
            ys = [str(y) for y in ys]
        grads = add_gradient_operators(self._net, ys, skip)
        for op in self._net.op:
            self._used.update(op.input)
            self._used.update(op.output)
            self._defined.update(op.output)
        out: dict[str, Any] = {}
        for blob, g in grads.items():
            if isinstance(g, GradientSlice):
                g = GradientSlice(BlobReference(g.indices, self), BlobReference(g.values, self))
            elif g is not None:
                g = BlobReference(g, self)
            out[BlobReference(blob, self)] = g
        return out


# -- execution steps and plans -----------------------------------------------------
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


_ = CurrentNameScope  # re-exported through framework.core
