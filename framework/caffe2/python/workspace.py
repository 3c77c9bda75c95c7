"""Caffe2-compatible module functions (``caffe2.python.workspace``).

Everything here is a thin layer over a current ``Workspace`` object chosen
by name (``SwitchWorkspace``); beside the workspaces by name and the current one it keeps only
Caffe2's immediate-mode state, as Caffe2's module does. Code written for
``caffe2.python.workspace`` runs after changing the import.

>>> from framework import workspace
>>> workspace.FeedBlob("x", [1.0, 2.0])
True
>>> workspace.FetchBlob("x")
array([1., 2.])
"""

from __future__ import annotations

import contextlib
import os
from typing import Any, Iterator

import numpy as np

from framework.caffe2 import c_extension as C
from framework.errors import FrameworkError
from framework.memory.blob import Blob
from framework.memory.int8_tensor import Int8Tensor
from framework.memory.workspace import Workspace as _Workspace
from framework.proto import caffe2_pb2

# Caffe2's workspaces: data sources (CreateDB...) open relative paths as given (read_folder "")
_workspaces: dict[str, _Workspace] = {"default": C.Workspace(name="default", read_folder="")}
_current = ["default"]


def current() -> _Workspace:
    """The current Workspace object (also ``workspace.C()`` and ``workspace.C.Workspace.current``)."""
    return _workspaces[_current[0]]


# Caffe2's ``workspace.Workspace`` (``C.Workspace``): the class; ``Workspace.current`` is the current one
Workspace = C.Workspace

# -- the build: CPU only (Caffe2's answers without CUDA/HIP) -------------------------------------------
is_asan = C.is_asan
has_cuda_support = C.has_cuda_support
has_hip_support = C.has_hip_support
has_gpu_support = C.has_gpu_support
GpuDeviceType = caffe2_pb2.CUDA  # as Caffe2 without GPU support (tests name it anyway)
NumCudaDevices = C.num_cuda_devices
NumGpuDevices = C.num_cuda_devices
GetCUDAVersion = C.get_cuda_version
GetCuDNNVersion = C.get_cudnn_version
IsNUMAEnabled = C.is_numa_enabled
GetNumNUMANodes = C.get_num_numa_nodes
RegisteredOperators = C.registered_operators
GlobalInit = C.global_init


def GetDeviceProperties(device_id: int) -> None:
    return None


def GetGpuPeerAccessPattern() -> Any:
    import numpy as np

    return np.array([])


def GetGPUMemoryInfo() -> None:
    return None


# -- names: Caffe2's Stringify helpers ---------------------------------------------------------------
def StringifyProto(obj: Any) -> Any:
    """A string as is; a protobuf message (or an object with ``Proto()``) serialized."""
    if isinstance(obj, (str, bytes)):
        return obj
    if hasattr(obj, "SerializeToString"):
        return obj.SerializeToString()
    if hasattr(obj, "Proto"):
        return obj.Proto().SerializeToString()
    raise ValueError(f"Unexpected argument to StringifyProto of type {type(obj).__name__}")


def _stringify_name(name: Any, expected_type: str) -> str:
    if isinstance(name, str):
        return name
    if type(name).__name__ != expected_type:
        raise TypeError(f"Expected a string or {expected_type}, got {type(name).__name__}")
    return str(name)


def StringifyBlobName(name: Any) -> str:
    return _stringify_name(name, "BlobReference")


def StringifyNetName(name: Any) -> str:
    if type(name).__name__ == "Net":
        return name.Name()
    return _stringify_name(name, "Net")


def GetNetName(net: Any) -> str:
    if isinstance(net, str):
        return net
    if type(net).__name__ == "Net":
        return net.Name()
    if hasattr(net, "op") and hasattr(net, "name"):
        return net.name
    raise TypeError(f"Not a Net object: {net!r}")


def GetNameScope() -> str:
    from framework.caffe2.python.scope import CurrentNameScope

    return CurrentNameScope()


# -- workspaces ----------------------------------------------------------------
def CurrentWorkspace() -> str:
    return _current[0]


def Workspaces() -> list[str]:
    return list(_workspaces)


@contextlib.contextmanager
def WorkspaceGuard(workspace_name: str) -> Iterator[None]:
    """Switch to ``workspace_name`` (created if missing) for the block, then back."""
    previous = CurrentWorkspace()
    SwitchWorkspace(workspace_name, True)
    try:
        yield
    finally:
        SwitchWorkspace(previous)


def SwitchWorkspace(name: str, create_if_missing: bool | None = None) -> None:
    """Make ``name`` the current workspace; create it (empty, root folder ".") only if asked."""
    name = str(name)
    if name not in _workspaces:
        if not create_if_missing:
            raise FrameworkError(
                f"workspace '{name}' does not exist; pass create_if_missing=True to create it. "
                f"Existing: {', '.join(_workspaces)}"
            )
        _workspaces[name] = C.Workspace(name=name, read_folder="")
    _current[0] = name


def ResetWorkspace(root_folder: str | None = None) -> bool:
    """Replace the current workspace with an empty one (keeping the root folder unless given). As in Caffe2,
    the root folder is where Save/Load/Print put relative paths; CreateDB and the other data sources still
    open theirs relative to the working directory."""
    old = C()
    folder = old.root_folder if root_folder is None else root_folder
    if root_folder is not None:
        os.makedirs(folder, exist_ok=True)
    _workspaces[_current[0]] = C.Workspace(root_folder=folder, name=old.name, read_folder="")
    return True


def RootFolder() -> str:
    return C().root_folder


# -- blobs ---------------------------------------------------------------------
def FeedBlob(name: Any, arr: Any, device_option: Any = None) -> bool:
    """Store a copy of ``arr`` (numpy array, scalar, str/bytes, TensorProto) under ``name``."""
    C().feed_blob(str(name), arr)
    return True


def FetchBlob(name: Any) -> Any:
    """A numpy copy of a tensor blob, bytes of a string blob, or the object held."""
    return C().fetch_blob(str(name))


def FetchBlobs(names: list[Any]) -> list[Any]:
    return [FetchBlob(n) for n in names]


def _int8_result(name: Any) -> Int8Tensor:
    return C().fetch_int8_blob(str(name))


def FetchInt8Blob(name: Any) -> Int8Tensor:
    """An Int8TensorCPU blob as ``Int8Tensor(data, scale, zero_point)`` (data: a numpy copy of the codes)."""
    return _int8_result(name)


def FetchInt8BlobRealVal(name: Any) -> Any:
    """The real values of an Int8TensorCPU blob: ``(data - zero_point) * scale`` as float32."""
    q = _int8_result(name)
    return (q.data.astype(np.int32) - int(q.zero_point)).astype(np.float32) * q.scale


def HasBlob(name: Any) -> bool:
    return C().has_blob(str(name))


def Blobs() -> list[str]:
    return C().blobs()


def CreateBlob(name: Any) -> bool:
    C().create_blob(str(name))
    return True


def ResetBlob(name: Any) -> bool:
    """Empty blob ``name`` (it stays in the workspace, holding nothing)."""
    return C.reset_blob(name)


def RemoveBlob(name: Any) -> bool:
    return C().remove_blob(str(name))


def RenameBlob(old: Any, new: Any) -> bool:
    C().rename_blob(str(old), str(new))
    return True


def SerializeBlob(name: Any) -> bytes:
    """One BlobProto (no chunking) of blob ``name``, as bytes."""
    from framework.memory.serialize import serialize_blob_to_string

    return serialize_blob_to_string(C().get_blob(str(name)), str(name))


def DeserializeBlob(name: Any, serialized: bytes) -> bool:
    from framework.memory.serialize import deserialize_blob

    deserialize_blob(serialized, C().create_blob(str(name)))
    return True


class _BlobsView:
    """``workspace.blobs``: dict-like view of the current workspace (fetch on get, feed on set)."""

    def __getitem__(self, name: str) -> Any:
        return FetchBlob(name)

    def __setitem__(self, name: str, value: Any) -> None:
        FeedBlob(name, value)

    def __contains__(self, name: object) -> bool:
        return HasBlob(name)

    def __len__(self) -> int:
        return len(Blobs())

    def __iter__(self) -> Iterator[str]:
        return iter(Blobs())

    def keys(self) -> list[str]:
        return Blobs()


blobs = _BlobsView()


# -- ops, nets and plans (implemented in framework.net) -------------------------------
def RunOperatorOnce(operator: Any) -> bool:
    if isinstance(operator, bytes):
        operator = caffe2_pb2.OperatorDef.FromString(operator)
    C().run_operator_once(operator)
    return True


def RunOperatorMultiple(operator: Any, num_runs: int) -> bool:
    for _ in range(int(num_runs)):
        RunOperatorOnce(operator)
    return True


def RunOperatorsOnce(operators: list[Any]) -> bool:
    for op in operators:
        RunOperatorOnce(op)
    return True


def CreateNet(net: Any, overwrite: bool = False, input_blobs: list[str] | None = None, optimize: bool = False) -> bool:
    """Instantiate a persistent net from a NetDef or core.Net; refuses to overwrite unless asked.
    ``optimize=True`` (not Caffe2's): apply the inference optimization pass (framework.net.optimize);
    then only the net's external outputs are guaranteed to hold their values.

    ``input_blobs`` are created first (as Caffe2); if creation fails they are removed
    again, so a failed CreateNet leaves the workspace unchanged.
    """
    from framework.caffe2.python.lazy import TriggerLazyImport

    TriggerLazyImport()  # Caffe2: deferred operator libraries are registered before a net is made
    ws = C()
    new = [str(n) for n in input_blobs or [] if not ws.has_blob(str(n))]
    for name in new:
        ws.create_blob(name)
    try:
        _Workspace.create_net(ws, net, overwrite=overwrite, optimize=optimize)
    except BaseException:
        for name in new:
            ws.remove_blob(name)
        raise
    return True


def RunNet(name: Any, num_iter: int = 1, allow_fail: bool = False) -> bool:
    """Run a created net ``num_iter`` times (``name`` may be a core.Net or NetDef)."""
    try:
        C().run_net(_net_name(name), num_iter)
    except Exception:
        if allow_fail:
            return False
        raise
    return True


def RunNetOnce(net: Any) -> bool:
    C().run_net_once(net)
    return True


def RunPlan(plan_or_step: Any) -> bool:
    C().run_plan(plan_or_step)
    return True


class _BackgroundPlan:
    """What ``RunPlanInBackground`` returns: ``is_done()``, ``is_succeeded()`` (False while running or
    after an error) and ``wait()`` (joins; re-raises nothing: the error is kept in ``error``)."""

    def __init__(self, ws: Any, plan: Any) -> None:
        import threading

        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(ws, plan), daemon=True)
        self._thread.start()

    def _run(self, ws: Any, plan: Any) -> None:
        try:
            ws.run_plan(plan)
        except BaseException as e:
            self.error = e

    def is_done(self) -> bool:
        return not self._thread.is_alive()

    def is_succeeded(self) -> bool:
        return self.is_done() and self.error is None

    def wait(self) -> None:
        self._thread.join()


def RunPlanInBackground(plan_or_step: Any) -> _BackgroundPlan:
    """Run a plan (or one execution step) in the current workspace on a thread of its own."""
    return _BackgroundPlan(C(), plan_or_step)


def Nets() -> list[str]:
    return C().nets()


def DeleteNet(name: Any) -> bool:
    C().delete_net(_net_name(name))
    return True


def InferShapesAndTypes(
    nets: list[Any], blob_dimensions: dict[str, Any] | None = None, blob_types: dict[str, Any] | None = None
) -> tuple[dict, dict]:
    from framework.net.api import infer_shapes_and_types

    return infer_shapes_and_types(C(), nets, blob_dimensions, blob_types)


def BenchmarkNet(name: Any, warmup_runs: int, main_runs: int, run_individual: bool) -> list[float]:
    from framework.net.api import benchmark_net

    return benchmark_net(C(), _net_name(name), warmup_runs, main_runs, run_individual)


def Predictor(init_net: Any, predict_net: Any, optimize: bool = True) -> Any:
    """Caffe2's ``workspace.Predictor``: runs ``init_net`` once, then ``run(inputs)`` -> outputs.

    Its workspace is a child of the current one (see ``framework.predictor``); ``optimize=False`` runs
    the predict net as written (no inference optimization pass; Caffe2's Predictor had no such pass).
    """
    from framework.predictor import Predictor as _Predictor

    return _Predictor(init_net, predict_net, parent=C(), optimize=optimize)


# -- immediate mode -------------------------------------------------------------
# Caffe2's debugging aid: between StartImmediate() and StopImmediate() every op that core.CreateOperator or a
# Net makes (gradient ops included) also runs at once in a workspace of its own, "_CAFFE2_IMMEDIATE", whose
# root folder is a fresh temporary folder; FeedImmediate/FetchImmediate/ImmediateBlobs reach that workspace.
_IMMEDIATE_WORKSPACE = "_CAFFE2_IMMEDIATE"
_immediate: dict[str, Any] = {"on": False, "root": ""}
_immediate_root_folder = ""  # Caffe2's name for the immediate workspace's temporary folder ("" when off)


def IsImmediate() -> bool:
    return bool(_immediate["on"])


def StartImmediate(i_know: bool = False) -> None:
    """Turn immediate mode on (restarting it, empty, if it was on); prints Caffe2's caveat unless ``i_know``."""
    import tempfile

    if IsImmediate():
        StopImmediate()
    _immediate["on"] = True
    with WorkspaceGuard(_IMMEDIATE_WORKSPACE):
        _immediate["root"] = tempfile.mkdtemp(prefix="caffe2_immediate_")
        ResetWorkspace(_immediate["root"])
    global _immediate_root_folder
    _immediate_root_folder = _immediate["root"]
    if not i_know:
        print(
            "Immediate mode is on (a debugging aid): every operator created now also runs at once in the "
            f"workspace {_IMMEDIATE_WORKSPACE!r}; ops must be runnable in creation order. Call StopImmediate() "
            "to free it."
        )


def StopImmediate() -> None:
    """Turn immediate mode off, emptying its workspace and removing its temporary root folder."""
    import shutil

    if not IsImmediate():
        return
    with WorkspaceGuard(_IMMEDIATE_WORKSPACE):
        ResetWorkspace()
    shutil.rmtree(_immediate["root"], ignore_errors=True)
    _immediate.update(on=False, root="")
    global _immediate_root_folder
    _immediate_root_folder = ""


def ImmediateBlobs() -> list[str]:
    with WorkspaceGuard(_IMMEDIATE_WORKSPACE):
        return Blobs()


def RunOperatorImmediate(op: Any) -> None:
    with WorkspaceGuard(_IMMEDIATE_WORKSPACE):
        RunOperatorOnce(op)


def FetchImmediate(*args: Any, **kwargs: Any) -> Any:
    with WorkspaceGuard(_IMMEDIATE_WORKSPACE):
        return FetchBlob(*args, **kwargs)


def FeedImmediate(*args: Any, **kwargs: Any) -> bool:
    with WorkspaceGuard(_IMMEDIATE_WORKSPACE):
        return FeedBlob(*args, **kwargs)


def _net_name(net: Any) -> str:
    if isinstance(net, str):
        return net
    if hasattr(net, "Name"):
        return net.Name()
    return net.name


__all__ = [n for n in dir() if n[:1].isupper() and n not in ("Any", "Iterator", "FrameworkError", "Blob")]
__all__ += ["blobs", "Blob", "current", "has_gpu_support", "has_cuda_support", "has_hip_support", "is_asan"]


from framework.caffe2.python.workspace_fill import FillRandomNetworkInputs  # noqa: E402, F401
from framework.caffe2.python.workspace_transforms import (  # noqa: E402 - they call back into this module
    ApplyTransform,
    ApplyTransformIfFaster,
    GetBlobSizeBytes,
    GetOperatorCost,
)

__all__ += ["ApplyTransform", "ApplyTransformIfFaster", "GetBlobSizeBytes", "GetOperatorCost"]
