"""``workspace.C`` / ``caffe2.python._import_c_extension``: the names Caffe2's pybind module
offered that scripts touch, answered by this (CPU-only, numpy) framework.

The module is also callable: ``workspace.C()`` is the current ``Workspace`` object (this
framework's older spelling); ``C.Workspace.current`` is the same object, as in Caffe2.
"""

from __future__ import annotations

import sys
import types
from typing import Any

from framework.caffe2.c_onnx import Caffe2Backend, DummyName, new_dummy_name, reset_dummy_name
from framework.memory.blob import Blob
from framework.memory.tensor import Tensor
from framework.memory.workspace import Workspace as _Workspace

# CPU-only build: no CUDA, no HIP, no MKL-DNN (ideep), no ASAN
has_cuda_support = False
has_hip_support = False
has_gpu_support = False
has_mkldnn = False
use_mkldnn = False
is_asan = False
# Operator schemas are always compiled in (Caffe2's CAFFE2_NO_OPERATOR_SCHEMA build flag is off)
define_caffe2_no_operator_schema = False
TensorCPU = Tensor


def _ws() -> Any:
    from framework import workspace

    return workspace


class _BlobMap:
    def __init__(self, ws: _Workspace) -> None:
        self._ws = ws

    def __call__(self) -> list[str]:
        return _Workspace.blobs(self._ws)

    def __getitem__(self, name: Any) -> Blob:
        return self._ws.get_blob(str(name))

    def __contains__(self, name: Any) -> bool:
        return self._ws.has_blob(str(name))

    def __iter__(self) -> Any:
        return iter(self())

    def __len__(self) -> int:
        return len(self())

    def keys(self) -> list[str]:
        return self()

    def __eq__(self, other: Any) -> bool:
        if isinstance(other, dict):
            return set(self()) == set(other) and all(self[k] is other[k] for k in other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]


class _NetMap(_BlobMap):
    """Caffe2's ``ws.nets``: ``ws.nets[name].run()``, ``name in ws.nets``, ``len(ws.nets)``; calling it
    lists the names."""

    def __call__(self) -> list[str]:
        return _Workspace.nets(self._ws)

    def __getitem__(self, name: Any) -> Any:
        return self._ws.get_net(str(name))

    def __contains__(self, name: Any) -> bool:
        return self._ws.has_net(str(name))


class _WorkspaceType(type):
    """``C.Workspace.current`` is the current workspace; instances of this framework's
    Workspace count as ``C.Workspace`` instances."""

    @property
    def current(cls) -> _Workspace:
        return _ws().current()

    def __instancecheck__(cls, obj: Any) -> bool:
        return isinstance(obj, _Workspace)


class Workspace(_Workspace, metaclass=_WorkspaceType):
    """``C.Workspace()``: a new, empty workspace (not registered by name), as Caffe2's, with
    Caffe2's ``run(op | net | plan)`` (blobs answer ``feed``/``fetch``). Data sources open relative
    paths as given (``read_folder=""``), as Caffe2's CreateDB does."""

    def __init__(self, *args: Any, read_folder: str | None = "", **kwargs: Any) -> None:
        super().__init__(*args, read_folder=read_folder, **kwargs)

    @property
    def blobs(self) -> _BlobMap:  # type: ignore[override]
        """Caffe2's ``ws.blobs``: ``ws.blobs["x"].fetch()``, ``"x" in ws.blobs``; calling it
        (``ws.blobs()``) still lists the names, as this framework's Workspace does."""
        return _BlobMap(self)

    @property
    def nets(self) -> _NetMap:  # type: ignore[override]
        """Caffe2's ``ws.nets`` (see ``_NetMap``); ``ws.nets()`` still lists the names."""
        return _NetMap(self)

    def create_net(self, net: Any, overwrite: bool = False, *args: Any, **kwargs: Any) -> Any:
        """As this framework's Workspace.create_net, but like Caffe2's binding it takes a Net or NetDef (or
        its serialized bytes), not text: a ``str`` is a TypeError."""
        if isinstance(net, str):
            raise TypeError(f"Workspace.create_net takes a Net, a NetDef or serialized NetDef bytes, not {net!r}")
        return super().create_net(net, overwrite, *args, **kwargs)

    def run(self, obj: Any) -> bool:
        if hasattr(obj, "Proto"):
            obj = obj.Proto()
        kind = type(obj).__name__
        if kind == "PlanDef" or kind == "ExecutionStep":
            self.run_plan(obj)
        elif kind == "NetDef":
            self.run_net_once(obj)
        elif kind == "OperatorDef":
            self.run_operator_once(obj)
        else:
            raise ValueError(f"Don't know how to do Workspace.run() on {type(obj)}")
        return True


def num_cuda_devices() -> int:
    return 0


def num_hip_devices() -> int:
    return 0


def get_cuda_version() -> int:
    return 0


def get_cudnn_version() -> int:
    return 0


def get_build_options() -> dict[str, str]:
    """Caffe2's build-option strings, as a CPU-only build without MKL-DNN, NCCL or ROCm reports them."""
    return {
        "BUILD_TYPE": "Release",
        "BLAS": "numpy",
        "USE_CUDA": "OFF",
        "USE_CUDNN": "OFF",
        "USE_ROCM": "OFF",
        "USE_MKLDNN": "OFF",
        "USE_NCCL": "OFF",
        "USE_NNPACK": "OFF",
        "USE_OPENMP": "OFF",
    }


def builtin_cpu_supports_avx2() -> bool:
    """Whether this CPU has AVX2 (Caffe2's tests of its AVX2 kernels skip without it)."""
    from framework.runtime.blas_kernel import _cpu

    return "avx2" in _cpu()[1]


def is_numa_enabled() -> bool:
    return False


def get_num_numa_nodes() -> int:
    return 0


def registered_operators() -> list[str]:
    from framework.ops.registry import registered_ops

    return list(registered_ops())


def global_init(args: Any = None) -> bool:
    """Caffe2's GlobalInit(["caffe2", "--caffe2_log_level=0", ...]): flags tune Caffe2's C++ runtime and are
    accepted and ignored, except ``--caffe2_operator_throw_if_fp_exceptions[=1|0|true|false]`` (ops then fail
    on division by zero, overflow and invalid operations: ``framework.runtime.state.RUNTIME.fp_exceptions``).
    A non-list is refused as Caffe2's binding does."""
    if args is not None and not isinstance(args, (list, tuple)):
        raise TypeError(f"GlobalInit takes a list of strings, got {type(args).__name__}")
    from framework.runtime.state import RUNTIME

    for arg in list(args or [])[1:]:
        name, _, value = str(arg).partition("=")
        if name.lstrip("-") == "caffe2_operator_throw_if_fp_exceptions":
            RUNTIME.fp_exceptions = value.strip().lower() not in ("0", "false", "no")
    return True


def blobs() -> list[str]:
    return _ws().Blobs()


def has_blob(name: Any) -> bool:
    return _ws().HasBlob(name)


def create_blob(name: Any) -> bool:
    return _ws().CreateBlob(name)


def fetch_blob(name: Any) -> Any:
    return _ws().FetchBlob(name)


def feed_blob(name: Any, arr: Any, device_option: Any = None) -> bool:
    return _ws().FeedBlob(name, arr, device_option)


def reset_blob(name: Any) -> bool:
    _ws().current().get_blob(str(name)).reset()
    return True


def serialize_blob(name: Any) -> bytes:
    return _ws().SerializeBlob(name)


def deserialize_blob(name: Any, serialized: bytes) -> bool:
    return _ws().DeserializeBlob(name, serialized)


def current_workspace() -> str:
    return _ws().CurrentWorkspace()


def switch_workspace(name: str, create_if_missing: bool = False) -> None:
    _ws().SwitchWorkspace(name, create_if_missing)


def workspaces() -> list[str]:
    return _ws().Workspaces()


def root_folder() -> str:
    return _ws().RootFolder()


def reset_workspace(root: str | None = None) -> bool:
    return _ws().ResetWorkspace(root)


def nets() -> list[str]:
    return _ws().Nets()


def run_operator_once(op: Any) -> bool:
    return _ws().RunOperatorOnce(op)


def run_net_once(net: Any) -> bool:
    return _ws().RunNetOnce(net)


def run_net(name: Any, num_iter: int = 1, allow_fail: bool = False) -> bool:
    return _ws().RunNet(name, num_iter, allow_fail)


def create_net(net: Any, overwrite: bool = False) -> bool:
    return _ws().CreateNet(net, overwrite)


def run_plan(plan: Any) -> bool:
    return _ws().RunPlan(plan)


def benchmark_net(name: Any, warmup_runs: int, main_runs: int, run_individual: bool) -> list[float]:
    return _ws().BenchmarkNet(name, warmup_runs, main_runs, run_individual)


class Mode:
    """Caffe2's ``C.Mode``: how ``create_db`` opens a DB."""

    read = "read"
    write = "write"
    new = "new"


class _Transaction:
    """Caffe2's pybind Transaction: ``put``, ``commit``; what was put is committed when the object goes
    away too (Caffe2's transactions commit in their destructor)."""

    def __init__(self, txn: Any) -> None:
        self._txn = txn

    def put(self, key: Any, value: bytes) -> None:
        self._txn.put(key, value)

    def commit(self) -> None:
        self._txn.commit()

    def __del__(self) -> None:
        try:
            self._txn.commit()
        except Exception:
            import logging

            logging.getLogger(__name__).exception("DB transaction: commit on release failed")


class _Cursor:
    """Caffe2's pybind Cursor: ``valid``, ``key`` and ``value`` as bytes, ``next``, ``seek_to_first``."""

    def __init__(self, cursor: Any) -> None:
        self._cursor = cursor

    def valid(self) -> bool:
        return self._cursor.valid()

    def key(self) -> bytes:
        key = self._cursor.key()
        return key if isinstance(key, bytes) else key.encode("utf-8", "surrogateescape")

    def value(self) -> bytes:
        return self._cursor.value()

    def next(self) -> None:
        self._cursor.next()

    def seek_to_first(self) -> None:
        self._cursor.seek_to_first()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cursor, name)


class _DB:
    """Caffe2's pybind DB: ``new_transaction()`` (``put``/``commit``), ``new_cursor()``, ``close()``."""

    def __init__(self, db: Any) -> None:
        self._db = db

    def new_transaction(self) -> _Transaction:
        return _Transaction(self._db.new_transaction())

    def new_cursor(self) -> _Cursor:
        return _Cursor(self._db.cursor())

    def close(self) -> None:
        self._db.close()

    def __del__(self) -> None:  # Caffe2 closes the DB when the object goes away
        try:
            self._db.close()
        except Exception:
            pass


def registered_dbs() -> list[str]:
    """The DB type names ``create_db``, Save/Load and CreateDB accept (Caffe2's ``C.registered_dbs()``)."""
    from framework.db import db_types

    return db_types()


def create_db(db_type: str, source: str, mode: Any) -> _DB:
    """Open a DB (minidb, lmdb, leveldb...) as Caffe2's ``C.create_db(type, source, mode)``."""
    from framework.db import open_db

    return _DB(open_db(db_type, source, getattr(mode, "value", mode)))


class _CallableModule(types.ModuleType):
    def __call__(self) -> _Workspace:
        return _ws().current()


sys.modules[__name__].__class__ = _CallableModule

__all__ = [
    "Blob",
    "Caffe2Backend",
    "DummyName",
    "Tensor",
    "new_dummy_name",
    "reset_dummy_name",
    "TensorCPU",
    "Workspace",
    "has_gpu_support",
    "has_mkldnn",
]
