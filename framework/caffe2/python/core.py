"""Caffe2-compatible builders (``caffe2.python.core``): CreateOperator,
DeviceOption, BlobReference, Net, NameScope, DeviceScope, ExecutionStep, Plan.

Code written against ``caffe2.python.core`` runs after changing the import.
``NameScope``/``DeviceScope`` are thread-local, as in Caffe2; names of nets
built here are made unique per process (``name``, ``name_1``...), as Caffe2
does. Everything else lives on the objects.

>>> net = Net("example")
>>> y = net.Relu(["x"], "y")
>>> print(net.listing())
y = Relu(x)
>>> str(net)
'example'
>>> y == "y", net.Proto().external_input
(True, ['x'])
"""

from __future__ import annotations

import sys
from typing import Any, Iterable

# ``core.C``: Caffe2's extension module (build flags, registered DBs...), as core imports it.
from framework.caffe2 import c_extension as C  # noqa: F401
from framework.proto.args import make_argument
from framework.proto.framework_pb2 import DeviceOption as _DeviceOptionProto
from framework.proto.framework_pb2 import OperatorDef, TensorProto

# ``core.DataType.FLOAT`` ... as Caffe2 (``caffe2_pb2.TensorProto.DataType``).
DataType = TensorProto.DataType


def DeviceOption(
    device_type: int = 0,
    device_id: int = 0,
    random_seed: int | None = None,
    node_name: str | None = None,
    numa_node_id: int | None = None,
    extra_info: Iterable[str] | None = None,
    cuda_gpu_id: int | None = None,
) -> _DeviceOptionProto:
    """A DeviceOption proto (``cuda_gpu_id`` is the 2018 name of ``device_id``)."""
    opt = _DeviceOptionProto(device_type=device_type)
    gpu = cuda_gpu_id if cuda_gpu_id is not None else device_id
    if gpu:
        opt.device_id = gpu
    if random_seed is not None:
        opt.random_seed = random_seed
    if node_name is not None:
        opt.node_name = node_name
    if numa_node_id is not None:
        opt.numa_node_id = numa_node_id
    if extra_info:
        opt.extra_info.extend(extra_info)
    return opt


def _names(x: Any, scoped: bool = False) -> list[str]:
    if x is None:
        return []
    if isinstance(x, (str, bytes)) or not isinstance(x, (list, tuple)):
        x = [x]
    out = [v.decode() if isinstance(v, bytes) else v for v in x]
    if scoped:  # plain strings get the current NameScope; BlobReferences are already full names
        prefix = CurrentNameScope()
        return [str(v) if isinstance(v, BlobReference) or not prefix else prefix + str(v) for v in out]
    return [str(v) for v in out]


def CreateOperator(
    operator_type: str,
    inputs: Any,
    outputs: Any,
    name: str = "",
    control_input: Any = None,
    device_option: _DeviceOptionProto | None = None,
    arg: Iterable[Any] | None = None,
    engine: str | None = None,
    debug_info: str | None = None,
    **kwargs: Any,
) -> OperatorDef:
    """An OperatorDef; keyword arguments become Arguments as Caffe2's MakeArgument does.

    A ``random_seed`` keyword goes to the device option, as in Caffe2.

    >>> op = CreateOperator("Relu", ["X"], ["Y"])
    >>> op.type, list(op.input), list(op.output)
    ('Relu', ['X'], ['Y'])
    """
    op = OperatorDef(type=operator_type)
    if name:  # proto2 presence: an unset name stays out of the text format, as in Caffe2
        op.name = name
    op.input.extend(_names(inputs, scoped=True))
    op.output.extend(_names(outputs, scoped=True))
    op.control_input.extend(_names(control_input, scoped=True))
    if device_option is None:
        device_option = CurrentDeviceScope()
    if device_option is not None:
        op.device_option.CopyFrom(device_option)
    if engine is not None:
        op.engine = engine
    if debug_info is not None:
        op.debug_info = debug_info
    if "random_seed" in kwargs:
        op.device_option.random_seed = int(kwargs.pop("random_seed"))
    if arg is not None:
        op.arg.extend(arg)
    for key, value in kwargs.items():
        if value is not None:
            op.arg.append(make_argument(key, value))
    # Caffe2's immediate mode (workspace.StartImmediate): every op created also runs at once in its own
    # workspace; the workspace module is looked up, not imported (no immediate mode before it is loaded)
    ws = sys.modules.get("framework.workspace")
    if ws is not None and ws.IsImmediate():
        ws.RunOperatorImmediate(op)
    return op


# The builders below use CreateOperator, so they are imported after it is defined.
# Gradients: Caffe2's registry API and sparse-gradient tuple come from net.backward.
from framework.caffe2.python.builder import (  # noqa: E402
    BlobReference,
    ExecutionStep,
    Net,
    Plan,
    ScopedBlobReference,
    UnknownOperatorAttributeError,
    execution_step,
)
from framework.caffe2.python.builder.records import clone_and_bind_net  # noqa: E402
from framework.caffe2.python.core_ir import IR  # noqa: E402, F401 - Caffe2's core.IR
from framework.caffe2.python.core_ssa import (  # noqa: E402, F401 - Caffe2's core.get_ssa and helpers
    get_op_ids_in_path,
    get_output_producers,
    get_ssa,
    get_undefined_blobs,
)
from framework.caffe2.python.scope import (  # noqa: E402
    CurrentDeviceScope,
    CurrentNameScope,
    DeviceScope,
    EmptyDeviceScope,
    EmptyNameScope,
    NameScope,
    ScopedName,
)
from framework.net.backward import GradientRegistry as _GradientRegistry  # noqa: E402  # noqa: E402
from framework.net.backward import GradientSlice  # noqa: E402  # noqa: E402


class GradientRegistry(_GradientRegistry):
    """Caffe2's GradientRegistry (makers registered here are shared with the net layer's)."""

    @classmethod
    def GetBackwardPass(
        cls, operators: Iterable[OperatorDef], ys: Any, ys_generate_gradient: bool = False
    ) -> tuple[list[OperatorDef], dict[BlobReference, Any]]:
        """(gradient ops, {blob: gradient}) with BlobReferences as Caffe2 returns them (blobs
        without a gradient are left out; sparse gradients are GradientSlices of references)."""
        ops, grads = _GradientRegistry.GetBackwardPass(operators, ys, ys_generate_gradient)
        out: dict[BlobReference, Any] = {}
        for key, val in grads.items():
            if val is None:
                continue
            if isinstance(val, GradientSlice):
                val = GradientSlice(BlobReference(val.indices), BlobReference(val.values))
            else:
                val = BlobReference(val)
            out[BlobReference(key)] = val
        return ops, out


def to_execution_step(step_or_nets: Any, default_name: str | None = None) -> ExecutionStep:
    """Caffe2's ``core.to_execution_step``: an ExecutionStep from a step, a net, a list of them, a
    ``net_builder.NetBuilder`` or a ``task.TaskGroup`` (``framework.caffe2.python.net_builder.to_execution_step``)."""
    from framework.caffe2.python.net_builder import to_execution_step as _to_execution_step

    return _to_execution_step(step_or_nets, default_name)


_GLOBAL_INIT_ARGS: list[str] = []


def GlobalInit(args: Any) -> bool:
    """Caffe2's core.GlobalInit(["prog", "--flag=value", ...]): flags are recorded (GetGlobalInitArgs)
    and otherwise ignored; they tune Caffe2's C++ runtime."""
    from framework import workspace
    from framework.caffe2.python.lazy import TriggerLazyImport

    TriggerLazyImport()
    _GLOBAL_INIT_ARGS.extend(list(args)[1:])
    return workspace.GlobalInit(args)


def GetGlobalInitArgs() -> list[str]:
    return list(_GLOBAL_INIT_ARGS)


def RefreshRegisteredOperators(trigger_lazy: bool = True) -> None:
    """The registry is read directly, so nothing is refreshed; with ``trigger_lazy`` the deferred work of
    ``caffe2.python.lazy`` runs (``lazy_dyndep`` libraries), as in Caffe2."""
    if trigger_lazy:
        from framework.caffe2.python.lazy import TriggerLazyImport

        TriggerLazyImport()


# Engine preferences (Caffe2's SetEnginePref family): recorded; every engine runs the default CPU
# implementation here, so they change no result.
_ENGINE_PREF: dict[str, Any] = {"per_op": {}, "global": {}}


def SetPerOpEnginePref(op_engine_pref: dict) -> None:
    _ENGINE_PREF["per_op"] = dict(op_engine_pref)


def SetGlobalEnginePref(global_engine_pref: dict) -> None:
    _ENGINE_PREF["global"] = dict(global_engine_pref)


def SetEnginePref(per_op_engine_pref: dict, global_engine_pref: dict) -> None:
    SetPerOpEnginePref(per_op_engine_pref)
    SetGlobalEnginePref(global_engine_pref)


def SetOpEnginePref(op_type: str, op_engine_pref: dict) -> None:
    _ENGINE_PREF["per_op"][op_type] = dict(op_engine_pref)


def IsOperator(op_type: str) -> bool:
    """Whether ``op_type`` is a registered operator type."""
    from framework.ops.registry import has_op

    return has_op(str(op_type))


# Engines Caffe2 registered implementations under; each runs the default CPU implementation here.
KNOWN_ENGINES = frozenset(
    ["DEFAULT", "CUDNN", "MIOPEN", "EIGEN", "NNPACK", "MKLDNN", "IDEEP", "SIMD", "ACCELERATE", "PACKED",
     "DEPTHWISE_3x3", "SparseHash", "CUB", "TENSORCORE", "QNNPACK", "DNNLOWP", "FBGEMM", "BLOCK", "GLOO", "MPI"]
)  # fmt: skip


def IsOperatorWithEngine(op_type: str, engine: str) -> bool:
    """Whether ``op_type`` is registered and ``engine`` is an engine name Caffe2 used (``KNOWN_ENGINES``):
    every engine runs the default CPU implementation here, but an unknown engine name is not one."""
    return IsOperator(op_type) and str(engine) in KNOWN_ENGINES


class _RegisteredOperators:
    """Caffe2's ``core._REGISTERED_OPERATORS``: the registered op type names, a live read-only set
    (families register lazily, so the names are read from the registry on each use)."""

    @staticmethod
    def _names() -> set[str]:
        from framework.ops.registry import registered_ops

        return set(registered_ops())

    def __contains__(self, op_type: object) -> bool:
        return isinstance(op_type, str) and IsOperator(op_type)

    def __iter__(self) -> Any:
        return iter(sorted(self._names()))

    def __len__(self) -> int:
        return len(self._names())

    def __repr__(self) -> str:
        return f"<{len(self)} registered operators>"


_REGISTERED_OPERATORS = _RegisteredOperators()


def IsGPUDeviceType(device_type: int) -> bool:
    from framework.proto.caffe2_pb2 import CUDA, HIP

    return device_type in (CUDA, HIP)


def InferOpBlobDevicesAsDict(op: OperatorDef) -> tuple[dict, dict]:
    """Every blob of ``op`` on the op's device (one CPU device here)."""
    dev = op.device_option if op.HasField("device_option") else DeviceOption()
    return {i: dev for i in op.input}, {o: dev for o in op.output}


def device_option_equal(opt1: Any, opt2: Any, ignore_node_name: bool = True, ignore_random_seed: bool = True) -> bool:
    """Whether two DeviceOptions name the same device: two CPU options are equal whatever their device
    id; node names and random seeds count only when not ignored. A missing option equals only another."""
    if opt1 is None or opt2 is None:
        return opt1 is opt2
    if not ignore_node_name and opt1.node_name != opt2.node_name:
        return False
    if not ignore_random_seed and opt1.random_seed != opt2.random_seed:
        return False
    if not opt1.device_type or not opt2.device_type:
        return not opt1.device_type and not opt2.device_type
    return opt1.device_type == opt2.device_type and opt1.device_id == opt2.device_id


def InferBlobDevices(net: Any) -> dict[str, _DeviceOptionProto]:
    """Every blob an op of ``net`` writes, mapped to that op's DeviceOption (the CPU when it has none);
    a later writer wins, as in Caffe2."""
    mapping: dict[str, _DeviceOptionProto] = {}
    for op in net.Proto().op:
        dev = op.device_option if op.HasField("device_option") else DeviceOption()
        for blob in op.output:
            mapping[blob] = dev
    return mapping


def CreatePythonOperator(
    f: Any,
    inputs: Any,
    outputs: Any,
    grad_f: Any = None,
    pass_workspace: bool = False,
    python_func_type: Any = None,
    *args: Any,
    **kwargs: Any,
) -> OperatorDef:
    """A ``Python`` op calling ``f(inputs, outputs)`` (see framework.ops.tensor.python_op).

    ``f`` (and ``grad_f``) are registered in this process under a fresh token that the op
    carries; a net saved and read back elsewhere cannot run them (only the program that
    registered a function can), and a NetDef never carries code.
    """
    from framework.ops.tensor.python_op import register_python_function

    if python_func_type is not None:  # Caffe2: a class whose instance is the function
        f = python_func_type(f) if not callable(f) else f
    kwargs["token"] = register_python_function(f, grad_f, pass_workspace)
    return CreateOperator("Python", inputs, outputs, *args, **kwargs)


__all__ = [
    "BlobReference",
    "CreatePythonOperator",
    "GetGlobalInitArgs",
    "GlobalInit",
    "SetEnginePref",
    "SetGlobalEnginePref",
    "SetOpEnginePref",
    "SetPerOpEnginePref",
    "IsGPUDeviceType",
    "IsOperator",
    "IsOperatorWithEngine",
    "CreateOperator",
    "CurrentDeviceScope",
    "CurrentNameScope",
    "DataType",
    "DeviceOption",
    "DeviceScope",
    "EmptyDeviceScope",
    "EmptyNameScope",
    "ExecutionStep",
    "GradientRegistry",
    "GradientSlice",
    "NameScope",
    "Net",
    "Plan",
    "ScopedBlobReference",
    "ScopedName",
    "UnknownOperatorAttributeError",
    "clone_and_bind_net",
    "execution_step",
    "to_execution_step",
]


def __getattr__(name: str) -> Any:
    # Caffe2's core imported the workspace module (scripts write ``core.workspace.RunPlan``); imported on
    # first use here, since workspace itself imports core
    if name == "workspace":
        from framework import workspace

        return workspace
    raise AttributeError(f"module 'framework.core' has no attribute {name!r}")
