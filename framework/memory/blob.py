"""Blob: a named holder of one object of any type plus its TypeMeta.

Operators read and write Tensors held in blobs; blobs may also hold strings
(``bytes``, Caffe2's std::string) or any Python object (a DB reader, a net).

>>> b = Blob("x")
>>> t = b.get_mutable(Tensor)
>>> b.get(Tensor) is t
True
"""

from __future__ import annotations

from typing import Any

from framework.errors import TypeMismatchError, UninitializedError
from framework.memory.tensor import Tensor
from framework.memory.typemeta import STRING, TypeMeta

# The names the memory planner (framework.net.memory_planner) gives the blobs it makes to share one buffer
# between activations whose lifetimes do not overlap: SHARED_PREFIX + n + SHARED_SUFFIX (Caffe2's names).
# The name does not make a blob planner-owned: ``Blob.planned`` does (set by the net the planner's NetDef
# creates, from its PLANNED_ARG argument).
SHARED_PREFIX, SHARED_SUFFIX = "__m", "_shared"
PLANNED_ARG = "planned_buffers"


def _type_name(obj: Any) -> str:
    if obj is None:
        return "nullptr (uninitialized)"
    if isinstance(obj, Tensor):
        return "Tensor"
    if isinstance(obj, bytes):
        return "std::string"
    return type(obj).__qualname__


def _py_class(cls: Any) -> type:
    """The Python class that holds values of ``cls`` (str and the string TypeMeta map to bytes)."""
    if cls is str or cls is STRING:
        return bytes
    if isinstance(cls, TypeMeta):
        if cls.py_type is None:
            raise TypeMismatchError(f"{cls.name} is a tensor element type; a blob holds a Tensor of it")
        return cls.py_type
    return cls


def _wanted_name(cls: Any) -> str:
    if cls is Tensor:
        return "Tensor"
    if cls in (bytes, str, STRING):
        return "std::string"
    return getattr(cls, "__qualname__", str(cls))


class Blob:
    """A type-erased, named container.

    ``planned`` marks a blob the memory planner owns: nothing a caller observes lives in it, so an op
    writing a new shape there reuses its buffer instead of keeping the old data aside for a rollback,
    and compiled callables bind to its buffer rather than to one view (framework.memory.binding).
    """

    __slots__ = ("_obj", "name", "planned", "__weakref__")

    def __init__(self, name: str = "", obj: Any = None) -> None:
        self.name = name
        self._obj = obj
        self.planned = False

    @property
    def held(self) -> Any:
        """The held object as it is (None when empty): no type check (see ``get`` for a checked read)."""
        return self._obj

    @property
    def held_tensor(self) -> Tensor | None:
        """The held Tensor, or None when the blob holds something else or nothing (``tensor()`` is
        Caffe2's method of that name: a handle with a numpy view)."""
        obj = self._obj
        return obj if type(obj) is Tensor else None

    @property
    def array(self) -> Any:
        """The held Tensor's cached numpy view (``Tensor.array``); None when there is none or the blob
        holds no Tensor. The run path's one-call read of an input."""
        obj = self._obj
        return obj._array if type(obj) is Tensor else None

    def reuse_view(self, shape: Any, dtype: Any) -> Any:
        """The held Tensor's cached view if it already has ``shape`` and ``dtype``, as a write (the
        tensor's version is bumped); else None. The run path's one-call write of an output."""
        obj = self._obj
        if type(obj) is Tensor:
            arr = obj._array
            if arr is not None and arr.shape == shape and arr.dtype == dtype:
                obj.version += 1
                return arr
        return None

    @property
    def meta(self) -> TypeMeta | None:
        obj = self._obj
        if obj is None:
            return None
        if isinstance(obj, bytes):
            return STRING
        return TypeMeta.for_python_type(type(obj))

    @property
    def type_name(self) -> str:
        return _type_name(self._obj)

    @property
    def is_empty(self) -> bool:
        return self._obj is None

    def is_type(self, cls: Any) -> bool:
        return isinstance(self._obj, _py_class(cls))

    def get(self, cls: type | None = None) -> Any:
        """The held object; with ``cls``, checked to be of that type."""
        obj = self._obj
        if cls is not None and not isinstance(obj, _py_class(cls)):
            raise TypeMismatchError(
                f"wrong type for the Blob instance. Blob contains {_type_name(obj)} "
                f"while caller expects {_wanted_name(cls)}. Offending blob name: '{self.name}'"
            )
        if obj is None:
            raise UninitializedError(f"blob '{self.name}' is empty (uninitialized)")
        return obj

    def get_tensor(self) -> Tensor:
        obj = self._obj
        if type(obj) is Tensor:
            return obj
        return self.get(Tensor)

    def get_mutable(self, cls: Any = Tensor) -> Any:
        """The held object if it is a ``cls``, else a new default ``cls()`` put in its place.

        ``str`` (or the string TypeMeta) means Caffe2's std::string, held as ``bytes``.
        """
        cls = _py_class(cls)
        obj = self._obj
        if isinstance(obj, cls):
            return obj
        obj = cls()
        self._obj = obj
        return obj

    def reset(self, obj: Any = None) -> Any:
        """Hold ``obj`` (or nothing), dropping what was held."""
        if isinstance(obj, str):
            obj = obj.encode("utf-8")
        self._obj = obj
        return obj

    def share_external(self, obj: Any) -> Any:
        """Hold an object owned elsewhere (Python keeps it alive while either holds it).

        No copy is made: a Tensor or numpy-backed object stays shared with its owner.
        """
        if isinstance(obj, str):
            obj = obj.encode("utf-8")
        self._obj = obj
        return obj

    def feed(self, value: Any, device_option: Any = None) -> bool:
        """Caffe2's ``Blob.feed``: store a copy of ``value`` (as Workspace.feed_blob)."""
        from framework.memory.workspace import feed_value

        feed_value(self, value)
        return True

    def fetch(self) -> Any:
        """Caffe2's ``Blob.fetch``: a numpy copy of the tensor (or the string/object held)."""
        from framework.memory.workspace import fetch_value

        return fetch_value(self)

    def tensor(self) -> Any:
        """Caffe2's ``Blob.tensor()``: a handle whose ``data`` is a numpy view of the held tensor (see
        ``framework.memory.tensor_handle``)."""
        from framework.memory.tensor_handle import TensorHandle

        return TensorHandle(self)

    def serialize(self, name: str | None = None) -> bytes:
        """Caffe2's ``Blob.serialize(name)``: one BlobProto of what the blob holds, stored under ``name``
        (default: the blob's own name), as bytes."""
        from framework.memory.serialize import serialize_blob_to_string

        return serialize_blob_to_string(self, self.name if name is None else name)

    def deserialize(self, serialized: bytes) -> None:
        """Caffe2's ``Blob.deserialize``: hold the content of a serialized BlobProto."""
        from framework.memory.serialize import deserialize_blob

        deserialize_blob(serialized, self)

    def __repr__(self) -> str:
        return f"Blob({self.name!r}, {self._obj!r})"
