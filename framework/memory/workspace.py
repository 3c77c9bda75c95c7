"""Workspace: blobs by name, nets by name, an optional parent, a root folder.

Relative paths: ops that read or write a workspace's own files (Load, Save, Checkpoint, Print's
``to_file``) resolve them under the root folder, as Caffe2's ops do (``RootFolder() + "/" + path``).
Ops that open a data source (CreateDB, ImageInput's ``db``, CreateTextFileReader) resolve them under
``read_folder``: the root folder by default (``framework --root DIR`` serves nets from files their data
there), or ``""`` for Caffe2's behaviour (the path as given, relative to the working directory: the
Caffe2-compatible ``workspace`` module and ``C.Workspace`` use it). Reads are not confined; writes
always go through the write policy below.

A Workspace is an ordinary object: create as many as you like and pass them
around. Blob look-up goes local -> forwarded -> parent, as in Caffe2. The
net-related methods (``create_net``, ``run_plan``...) run the net layer's implementations, which it hands
down through ``framework.runtime.services.NET`` (nets sit above the memory core; see that module).

>>> ws = Workspace()
>>> ws.feed_blob("x", [1.0, 1.0, 1.0])
>>> ws.fetch_blob("x")
array([1., 1., 1.])
"""

from __future__ import annotations

import difflib
import os
import threading
from typing import Any, Iterable

from framework.errors import BlobNotFoundError, FrameworkError, NetError, TypeMismatchError, UninitializedError
from framework.memory.blob import Blob
from framework.memory.int8_tensor import Int8Tensor, Int8TensorCPU, as_int8_tensor
from framework.memory.packs import PackCache
from framework.memory.paths import check_write_path, normalize_allow_paths
from framework.memory.tensor import Tensor, as_tensor_array
from framework.runtime.services import NET


def suggest(name: str, candidates: Iterable[str], n: int = 3) -> str:
    """' Did you mean: a, b?' for close matches, or ''."""
    close = difflib.get_close_matches(name, list(candidates), n=n, cutoff=0.6)
    return f" Did you mean: {', '.join(close)}?" if close else ""


class Workspace:
    """Named blobs and nets; see module doc."""

    def __init__(
        self,
        root_folder: str | os.PathLike = ".",
        parent: Workspace | None = None,
        name: str = "",
        allow_paths: Iterable[str | os.PathLike] | None = None,
        read_folder: str | os.PathLike | None = None,
    ) -> None:
        self.name = name
        self._root_folder = os.fspath(root_folder)
        self._read_folder = None if read_folder is None else os.fspath(read_folder)
        if read_folder is None and parent is not None:
            self._read_folder = parent._read_folder  # a child reads where its parent does
        self.parent = parent
        # Where ops may write (framework.memory.paths): None = Caffe2's behaviour (absolute paths
        # anywhere); a tuple = only the root folder and these folders. A child inherits the policy.
        self._allow_paths = normalize_allow_paths(allow_paths)
        if allow_paths is None and parent is not None and parent._allow_paths is not None:
            self._allow_paths = parent._allow_paths + (os.path.realpath(parent.root_folder),)
        self._blobs: dict[str, Blob] = {}
        self._forwarded: dict[str, tuple[Workspace, str]] = {}
        self._nets: dict[str, Any] = {}
        self._lock = threading.RLock()
        self.last_failed_op_net_position = -1
        self._packs: PackCache | None = None

    @property
    def packs(self) -> PackCache:
        """The cache of packed weights the ops of this workspace tree share (the root workspace's)."""
        root = self
        while root.parent is not None:
            root = root.parent
        packs = root._packs
        if packs is None:
            packs = root._packs = PackCache()
        return packs

    # -- root folder --------------------------------------------------------
    @property
    def root_folder(self) -> str:
        return self._root_folder

    @root_folder.setter
    def root_folder(self, folder: str | os.PathLike) -> None:
        self._root_folder = os.fspath(folder)

    def resolve_path(self, path: str, absolute: bool = False) -> str:
        """``path`` itself when absolute (or asked so), else joined to the root folder (for reading)."""
        if absolute or os.path.isabs(path):
            return path
        return os.path.join(self._root_folder, path)

    @property
    def read_folder(self) -> str:
        """Where data sources' relative paths resolve (see the module doc): the root folder unless set;
        ``""`` means the working directory (Caffe2's CreateDB)."""
        return self._root_folder if self._read_folder is None else self._read_folder

    def resolve_read_path(self, path: str) -> str:
        """``path`` itself when absolute, else joined to ``read_folder`` (a data source an op opens)."""
        path = os.fspath(path)
        if os.path.isabs(path):
            return path
        return os.path.join(self.read_folder, path) if self.read_folder else path

    @property
    def allow_paths(self) -> tuple[str, ...] | None:
        """Folders besides the root folder where ops may write; None: absolute paths anywhere."""
        return self._allow_paths

    @allow_paths.setter
    def allow_paths(self, paths: Iterable[str | os.PathLike] | None) -> None:
        self._allow_paths = normalize_allow_paths(paths)

    def resolve_write_path(self, path: str, absolute: bool = False, what: str = "write") -> str:
        """The path an op writes for ``path``; PathNotAllowedError (naming ``what`` and the path)
        if the workspace's policy refuses it (see ``framework.memory.paths``)."""
        return check_write_path(os.fspath(path), self._root_folder, self._allow_paths, absolute, what)

    # -- blobs ----------------------------------------------------------------
    def _find(self, name: str) -> Blob | None:
        blob = self._blobs.get(name)
        if blob is not None:
            return blob
        fwd = self._forwarded.get(name)
        if fwd is not None:
            return fwd[0]._find(fwd[1])
        if self.parent is not None:
            return self.parent._find(name)
        return None

    def has_blob(self, name: str) -> bool:
        return self._find(str(name)) is not None

    def get_blob(self, name: str) -> Blob:
        """The blob called ``name``; raises BlobNotFoundError with suggestions."""
        name = str(name)
        blob = self._find(name)
        if blob is None:
            raise BlobNotFoundError(
                f"can't find blob '{name}' in workspace{self._label()}.{suggest(name, self.blobs())}"
            )
        return blob

    def create_blob(self, name: str) -> Blob:
        """The existing blob called ``name`` (local, forwarded or parent's), or a new local one."""
        name = str(name)
        with self._lock:
            blob = self._find(name)
            if blob is None:
                blob = self._blobs[name] = Blob(name)
            return blob

    def create_local_blob(self, name: str) -> Blob:
        name = str(name)
        with self._lock:
            blob = self._blobs.get(name)
            if blob is None:
                blob = self._blobs[name] = Blob(name)
            return blob

    def remove_blob(self, name: str) -> bool:
        """Remove a local blob; False if there was none."""
        with self._lock:
            return self._blobs.pop(str(name), None) is not None

    def rename_blob(self, old: str, new: str) -> None:
        """Rename a local blob; refuses a name that is visible already (local, forwarded or parent's)."""
        with self._lock:
            if old not in self._blobs:
                raise BlobNotFoundError(f"rename_blob: no local blob '{old}'.{suggest(old, self._blobs)}")
            if old == new:
                return
            if self.has_blob(new):
                raise FrameworkError(
                    f"rename_blob: cannot rename '{old}' to '{new}': a blob called '{new}' already exists "
                    "(here, forwarded or in the parent workspace)"
                )
            blob = self._blobs.pop(old)
            blob.name = new
            self._blobs[new] = blob

    def blobs(self) -> list[str]:
        """Names of all visible blobs: local, forwarded, then the parent's."""
        names = list(self._blobs)
        seen = set(names)
        for local, (ws, pname) in self._forwarded.items():
            if local not in seen and ws.has_blob(pname):
                names.append(local)
                seen.add(local)
        if self.parent is not None:
            for n in self.parent.blobs():
                if n not in seen:
                    names.append(n)
                    seen.add(n)
        return names

    def local_blobs(self) -> list[str]:
        return list(self._blobs)

    def add_blob_mapping(self, parent: Workspace, mapping: dict[str, str], skip_defined: bool = False) -> None:
        """Make ``parent``'s blobs visible here under local names (forwarded blobs).

        ``mapping`` is {local name: parent name}. Repeating an identical mapping is a
        no-op; mapping a name that is already visible here is an error, unless
        ``skip_defined`` (then that name keeps its current meaning).
        """
        with self._lock:
            for local, pname in mapping.items():
                if not parent.has_blob(pname):
                    raise BlobNotFoundError(
                        f"add_blob_mapping: the parent workspace has no blob '{pname}'.{suggest(pname, parent.blobs())}"
                    )
                fwd = self._forwarded.get(local)
                if fwd is not None:
                    if fwd[0] is parent and fwd[1] == pname:
                        continue
                    raise FrameworkError(
                        f"add_blob_mapping: redefinition of blob '{local}': it already forwards to '{fwd[1]}'"
                    )
                if self.has_blob(local):
                    if skip_defined:
                        continue
                    raise FrameworkError(f"add_blob_mapping: redefinition of blob '{local}': it already exists here")
                self._forwarded[local] = (parent, pname)

    # -- feed and fetch ---------------------------------------------------------
    def feed_blob(self, name: str, value: Any) -> None:
        """Store a copy of ``value``: str/bytes as a string blob, anything array-like as a tensor.

        Re-feeding a tensor of the same shape and type reuses its buffer.
        """
        feed_value(self.create_blob(name), value)

    def fetch_blob(self, name: str) -> Any:
        """A numpy copy of a tensor, bytes of a string blob, or the object itself for others."""
        return fetch_value(self.get_blob(name), name)

    def fetch_int8_blob(self, name: str) -> Int8Tensor:
        """Caffe2's ``Workspace.fetch_int8_blob``: an Int8TensorCPU blob as ``Int8Tensor(data, scale,
        zero_point)``; an error for any other blob."""
        result = self.fetch_blob(name)
        if not isinstance(result, tuple):
            raise TypeMismatchError(f"You are not fetching an Int8Blob {name}. Please use FetchBlob")
        return Int8Tensor(*result)

    def blob_sizes(self) -> dict[str, int]:
        """Bytes held by each local blob (tensor nbytes plus string lengths)."""
        out = {}
        for name, blob in self._blobs.items():
            out[name] = blob_nbytes(blob)
        return out

    # -- nets (implemented by the net layer, handed down as NET's services) ----------
    def create_net(self, net: Any, overwrite: bool = False, optimize: bool = False, outputs: Any = None) -> Any:
        return NET.get("create_net")(self, net, overwrite=overwrite, optimize=optimize, outputs=outputs)

    def get_net(self, name: str) -> Any:
        net = self._nets.get(name)
        if net is None:
            raise NetError(f"no net called '{name}' in workspace{self._label()}.{suggest(name, self._nets)}")
        return net

    def has_net(self, name: str) -> bool:
        return name in self._nets

    def delete_net(self, name: str) -> None:
        self._nets.pop(name, None)

    def nets(self) -> list[str]:
        return list(self._nets)

    def run_net(self, name: Any, num_iter: int = 1) -> None:
        net = self.get_net(name if isinstance(name, str) else _net_name(name))
        for _ in range(num_iter):
            net.run()

    def run_net_once(self, net: Any) -> None:
        NET.get("run_net_once")(self, net)

    def run_operator_once(self, op: Any) -> None:
        NET.get("run_operator_once")(self, op)

    def run_plan(self, plan: Any) -> None:
        NET.get("run_plan")(self, plan)

    def run_operators_once(self, ops: Any) -> None:
        for op in ops:
            self.run_operator_once(op)

    def infer_shapes_and_types(
        self, nets: Any, blob_dimensions: dict | None = None, blob_types: dict | None = None
    ) -> tuple[dict, dict]:
        return NET.get("infer_shapes_and_types")(self, nets, blob_dimensions, blob_types)

    def benchmark_net(self, name: Any, warmup_runs: int, main_runs: int, run_individual: bool) -> list[float]:
        return NET.get("benchmark_net")(
            self, name if isinstance(name, str) else _net_name(name), warmup_runs, main_runs, run_individual
        )

    def _label(self) -> str:
        return f" '{self.name}'" if self.name else ""

    def __repr__(self) -> str:
        return f"Workspace({self.name!r}, {len(self._blobs)} blobs, {len(self._nets)} nets)"

    # Caffe2-style names for code written against caffe2.python.workspace's C.Workspace objects.
    HasBlob = has_blob
    CreateBlob = create_blob
    FeedBlob = feed_blob
    FetchBlob = fetch_blob
    Blobs = blobs
    CreateNet = create_net
    RunNet = run_net
    RunNetOnce = run_net_once
    RunOperatorOnce = run_operator_once
    RunPlan = run_plan
    BenchmarkNet = benchmark_net


def _net_name(net: Any) -> str:
    if hasattr(net, "Name"):
        return net.Name()
    return net.name


def blob_nbytes(blob: Blob) -> int:
    """Size in bytes of what a blob holds (0 for unknown types), as Caffe2's BlobStat."""
    obj = blob._obj
    if isinstance(obj, Tensor):
        if not obj.is_allocated:
            return 0
        if obj.meta is not None and obj.meta.is_pod:
            return obj.nbytes
        return sum(len(x) for x in obj.data().reshape(-1) if isinstance(x, bytes)) + obj.nbytes
    if isinstance(obj, bytes):
        return len(obj)
    return 0


def feed_value(blob: Blob, value: Any) -> None:
    """Store a copy of ``value`` in ``blob`` (Workspace.feed_blob and Caffe2's ``Blob.feed``)."""
    if isinstance(value, (str, bytes)):
        blob.reset(value)
        return
    if isinstance(value, Tensor):
        blob.get_mutable(Tensor).copy_from(value)
        return
    q = as_int8_tensor(value)
    if q is not None:  # an Int8TensorCPU or an Int8Tensor(data, scale, zero_point) namedtuple: a copy
        blob.reset(q)
        return
    if hasattr(value, "SerializeToString") and hasattr(value, "dims"):  # a TensorProto
        from framework.memory.tensor_proto import tensor_from_proto

        blob.reset(tensor_from_proto(value))
        return
    blob.get_mutable(Tensor).assign(as_tensor_array(value))


def fetch_value(blob: Blob, name: str = "") -> Any:
    """What ``blob`` holds: a numpy copy of a tensor, bytes of a string, or the object itself."""
    name = name or blob.name
    obj = blob._obj
    if isinstance(obj, Tensor):
        if not obj.is_allocated:
            raise UninitializedError(
                f"can't fetch blob '{name}': its tensor has no data yet "
                f"({'never resized' if obj.numel < 0 else f'shape {obj.dims}, never written'})"
            )
        return obj.numpy()
    if obj is None:
        raise BlobNotFoundError(f"blob '{name}' exists but holds nothing (uninitialized)")
    if isinstance(obj, Int8TensorCPU):  # Caffe2's Int8TensorFetcher: (data copy, scale, zero_point)
        if obj.t._array is None:
            raise UninitializedError(f"can't fetch blob '{name}': its Int8TensorCPU has no data yet")
        return (obj.numpy(), obj.scale, obj.zero_point)
    return obj
