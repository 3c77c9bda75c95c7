"""Blob serialization: Tensors, string blobs and registered types <-> ``BlobProto``.

Wire format as Caffe2 (reference/caffe2.md §1, §4):

- A tensor becomes ``BlobProto{name, type="Tensor", tensor=TensorProto}``. Tensors
  with more than ``chunk_size`` elements (default: the process's, ``set_default_chunk_size``;
  ``DEFAULT_CHUNK_SIZE`` = 1,000,000 elements until set) are split into chunks; chunk k covers the element segment
  ``[k*chunk, min((k+1)*chunk, numel))`` and is stored under the key ``name#%k``.
  Even a one-chunk tensor uses ``name#%0``; an empty tensor yields one record
  with segment [0, 0] so that its shape survives.
- Element payloads (raw by default, typed on request) and how every
  TensorProto storage type is read: ``framework.memory.tensor_proto``.
- A ``bytes`` blob becomes ``BlobProto{type="std::string", content=...}``.
- Other Python types are serialized through ``register_blob_serializer``.

Every malformed input raises ``SerializationError``; protobuf's own errors never
escape.

>>> t = Tensor.from_numpy(np.arange(6, dtype=np.float32).reshape(2, 3))
>>> data = serialize_blob_to_string(t, "x")
>>> b = Blob("x"); deserialize_blob(data, b); b.get(Tensor).data().tolist()
[[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
"""

from __future__ import annotations

import bisect
from typing import Any, Callable, Iterator

import numpy as np
from google.protobuf.message import DecodeError, EncodeError

from framework.errors import FrameworkError, SerializationError
from framework.memory.blob import Blob
from framework.memory.tensor import Tensor
from framework.memory.tensor_proto import (
    DT,
    RAW_DTYPES,
    TYPED_FIELDS,
    allocate_elements,
    as_array,
    proto_elements,
    proto_extent,
    tensor_from_proto,
    tensor_to_proto,
    typed_field,
    varint,
)
from framework.memory.typemeta import TypeMeta
from framework.proto.framework_pb2 import BlobProto, TensorProto
from framework.runtime.state import RUNTIME

DEFAULT_CHUNK_SIZE = 1_000_000  # the process default until set_default_chunk_size changes it
CHUNK_SEPARATOR = "#%"
TENSOR_TYPE = "Tensor"
STRING_TYPE = "std::string"
_CHUNK = RUNTIME.held("memory.serialize.chunk_size", lambda: [DEFAULT_CHUNK_SIZE])


def set_default_chunk_size(n: int) -> int:
    """Change the process default chunk size (elements); returns the previous value."""
    if int(n) <= 0:
        raise SerializationError(f"chunk size must be > 0 elements, got {n}")
    old, _CHUNK[0] = _CHUNK[0], int(n)
    return old


def chunk_key(name: str, k: int) -> str:
    return f"{name}{CHUNK_SEPARATOR}{k}"


def blob_name_of_key(key: str) -> str:
    """The blob name a DB key belongs to: the key cut at the first ``#%``."""
    i = key.find(CHUNK_SEPARATOR)
    return key if i < 0 else key[:i]


# -- the serializer registry ------------------------------------------------------
SerializeFn = Callable[[Any, str], BlobProto]
DeserializeFn = Callable[[BlobProto, Blob], None]
_SERIALIZERS: dict[type, tuple[str, SerializeFn]] = {}
_DESERIALIZERS: dict[str, DeserializeFn] = {}
# Called with a BlobProto type no deserializer is registered for yet (the ops layer's families import
# the one that registers it): memory stays below ops.
_TYPE_LOADERS: list[Callable[[str], None]] = []


def add_blob_type_loader(loader: Callable[[str], None]) -> None:
    """Call ``loader(type_name)`` before giving up on an unknown BlobProto type."""
    if loader not in _TYPE_LOADERS:
        _TYPE_LOADERS.append(loader)


def register_blob_serializer(
    py_type: type, type_name: str, serialize_fn: SerializeFn, deserialize_fn: DeserializeFn
) -> None:
    """Teach blob serialization a Python type.

    ``serialize_fn(obj, name) -> BlobProto`` (``type`` is set to ``type_name``
    if left empty); ``deserialize_fn(blob_proto, blob)`` puts the object into
    ``blob``. Deserialization dispatches on ``BlobProto.type == type_name``.
    """
    _SERIALIZERS[py_type] = (type_name, serialize_fn)
    _DESERIALIZERS[type_name] = deserialize_fn


def is_serializable(obj: Any) -> bool:
    """Whether ``serialize_blob`` can store ``obj`` (a Blob's object or a Blob)."""
    obj = _obj_of(obj)
    if isinstance(obj, Tensor):
        return obj.is_initialized and (obj.is_allocated or (obj.numel == 0 and obj.meta is not None))
    if isinstance(obj, (bytes, str, np.ndarray)):
        return True
    return obj is not None and any(c in _SERIALIZERS for c in type(obj).__mro__)


def registered_blob_types() -> list[str]:
    return sorted({TENSOR_TYPE, STRING_TYPE, *_DESERIALIZERS})


def _obj_of(blob: Any) -> Any:
    return blob._obj if isinstance(blob, Blob) else blob


def _custom_proto(obj: Any, name: str) -> BlobProto:
    for cls in type(obj).__mro__:
        entry = _SERIALIZERS.get(cls)
        if entry is not None:
            type_name, fn = entry
            proto = fn(obj, name)
            proto.name = name
            if not proto.type:
                proto.type = type_name
            return proto
    known = ", ".join(["Tensor", "bytes/str", *(c.__qualname__ for c in _SERIALIZERS)])
    raise SerializationError(
        f"blob '{name}' holds a {type(obj).__qualname__}, which has no serializer; "
        f"serializable types: {known} (register one with register_blob_serializer)"
    )


def _encode(proto: BlobProto, name: str) -> bytes:
    try:
        return proto.SerializeToString()
    except EncodeError as e:  # pragma: no cover - our protos are always complete
        raise SerializationError(f"blob '{name}': {e}") from e


def serialize_blob(
    name: str, blob: Any, chunk_size: int | None = None, typed: bool = False
) -> Iterator[tuple[str, bytes]]:
    """Yield the ``(key, BlobProto bytes)`` records that store ``blob`` under ``name``.

    Tensors give keys ``name#%k``, one per chunk of ``chunk_size`` elements
    (None or -1: the process default, ``set_default_chunk_size``; 0: no chunking). Other blobs give one
    record under ``name``.
    """
    obj = _obj_of(blob)
    if obj is None:
        raise SerializationError(f"blob '{name}' is empty (uninitialized): nothing to serialize")
    try:
        name.encode("utf-8")
    except UnicodeEncodeError as e:
        raise SerializationError(
            f"blob name {name!r} is not valid UTF-8 text, which BlobProto.name needs: save it under another name"
        ) from e
    if isinstance(obj, (Tensor, np.ndarray)):
        arr = as_array(obj)
        n = arr.size
        if chunk_size is None or chunk_size < 0:
            chunk_size = _CHUNK[0]
        step = n if chunk_size == 0 else int(chunk_size)
        begin, k = 0, 0
        fast = arr.dtype in RAW_DTYPES
        while True:
            end = min(begin + step, n) if step > 0 else n
            if fast:
                value = _chunk_bytes(arr, name, begin, end, typed)
            else:
                proto = BlobProto(name=name, type=TENSOR_TYPE)
                proto.tensor.CopyFrom(tensor_to_proto(arr, name, typed, (begin, end)))
                value = _encode(proto, name)
            yield chunk_key(name, k), value
            begin, k = end, k + 1
            if begin >= n:
                return
    yield name, _encode(blob_to_proto(obj, name), name)


def record_keys(name: str, blob: Any, chunk_size: int | None = None) -> list[str]:
    """The keys ``serialize_blob(name, blob, chunk_size)`` will yield, without serializing."""
    obj = _obj_of(blob)
    if isinstance(obj, (Tensor, np.ndarray)):
        n = as_array(obj).size
        if chunk_size is None or chunk_size < 0:
            chunk_size = _CHUNK[0]
        count = 1 if chunk_size == 0 or n == 0 else -(-n // int(chunk_size))
        return [chunk_key(name, k) for k in range(count)]
    return [name]


_RAW_DATA_TAG = bytes([(13 << 3) | 2])  # TensorProto.raw_data, length-delimited
_TENSOR_TAG = bytes([(3 << 3) | 2])  # BlobProto.tensor, length-delimited


def _chunk_bytes(arr: np.ndarray, name: str, begin: int, end: int, typed: bool) -> bytes:
    """BlobProto bytes of one numeric chunk, built around the payload with a single copy.

    The TensorProto fields numbered below the payload field and those above it
    are serialized by protobuf, and the encoded payload field is put between
    them, which is exactly where protobuf itself puts it: the result is
    byte-identical to ``SerializeToString`` of the full message (tested).
    Typed: float_data (3), int32_data (4), double_data (9) or int64_data (10);
    raw: raw_data (13), after storage_type (12).
    """
    dt = TypeMeta.of(arr.dtype).proto_type
    if dt == DT.UNDEFINED:
        raise SerializationError(f"tensor '{name}': element type {arr.dtype} has no TensorProto type (not Caffe2's)")
    flat = arr.reshape(-1)[begin:end]
    low = TensorProto(dims=arr.shape, data_type=dt)
    high = TensorProto()
    if typed:
        number = TYPED_FIELDS.get(dt, (4,))[0]
        field = typed_field(dt, flat)
        above = high if number < 7 else low  # name (7) sits between int32_data (4) and double_data (9)
        if name:
            above.name = name
        high.segment.begin, high.segment.end = begin, end
        parts = [low.SerializeToString(), *field, high.SerializeToString()]
    else:
        low.storage_type = DT.RAW
        if name:
            low.name = name
        low.segment.begin, low.segment.end = begin, end
        payload = np.ascontiguousarray(flat.astype(RAW_DTYPES[flat.dtype], copy=False)).data.cast("B")
        parts = [low.SerializeToString(), _RAW_DATA_TAG + varint(len(payload)), payload]
    tensor_len = sum(p.nbytes if isinstance(p, memoryview) else len(p) for p in parts)
    outer = BlobProto(name=name, type=TENSOR_TYPE).SerializeToString() + _TENSOR_TAG + varint(tensor_len)
    return b"".join((outer, *parts))


def blob_to_proto(obj: Any, name: str, typed: bool = False) -> BlobProto:
    """One BlobProto of a blob's object (tensors unchunked)."""
    obj = _obj_of(obj)
    if isinstance(obj, (Tensor, np.ndarray)):
        proto = BlobProto(name=name, type=TENSOR_TYPE)
        arr = as_array(obj)
        proto.tensor.CopyFrom(tensor_to_proto(arr, name, typed))
        return proto
    if isinstance(obj, str):
        obj = obj.encode("utf-8")
    if isinstance(obj, bytes):
        return BlobProto(name=name, type=STRING_TYPE, content=obj)
    if obj is None:
        raise SerializationError(f"blob '{name}' is empty (uninitialized): nothing to serialize")
    return _custom_proto(obj, name)


def serialize_blob_to_string(blob: Any, name: str = "", typed: bool = False) -> bytes:
    """Bytes of one BlobProto holding the whole blob (no chunking)."""
    return _encode(blob_to_proto(blob, name, typed), name)


def parse_blob_proto(data: Any, where: str = "") -> BlobProto:
    """Parse BlobProto bytes; SerializationError (naming ``where``) on any damage."""
    proto = BlobProto()
    try:
        proto.ParseFromString(data)
    except (DecodeError, RuntimeError, ValueError, TypeError) as e:
        label = f" {where}" if where else ""
        raise SerializationError(f"cannot parse a BlobProto{label}: {e}") from e
    return proto


def deserialize_blob(data: Any, blob: Blob) -> None:
    """Put the object serialized in ``data`` (BlobProto bytes or message) into ``blob``.

    Tensors must be complete (a single chunk); use ChunkAssembler for chunks.
    """
    proto = data if isinstance(data, BlobProto) else parse_blob_proto(data, f"for blob '{blob.name}'")
    if proto.type == TENSOR_TYPE or (not proto.type and proto.HasField("tensor")):
        blob.reset(tensor_from_proto(proto.tensor))
    elif proto.type == STRING_TYPE:
        blob.reset(bytes(proto.content))
    else:
        fn = _DESERIALIZERS.get(proto.type)
        for loader in _TYPE_LOADERS if fn is None else ():
            loader(proto.type)
            fn = _DESERIALIZERS.get(proto.type)
        if fn is None:
            raise SerializationError(
                f"blob '{proto.name or blob.name}': unknown BlobProto type '{proto.type}'; "
                f"known types: {', '.join(registered_blob_types())}"
            )
        try:
            fn(proto, blob)
        except FrameworkError:
            raise
        except Exception as e:
            raise SerializationError(f"blob '{proto.name or blob.name}' of type '{proto.type}': {e}") from e


# -- reassembly of chunks ---------------------------------------------------------
class _State:
    __slots__ = ("blob", "is_tensor", "total", "current", "spans", "dims", "meta", "flat", "chunk_ids", "num_chunks")

    def __init__(self, blob: Blob) -> None:
        self.blob = blob
        self.is_tensor = False
        self.total = 0
        self.current = 0
        self.spans: list[tuple[int, int]] = []
        self.dims: tuple[int, ...] = ()
        self.meta: TypeMeta | None = None
        self.flat: np.ndarray | None = None
        self.chunk_ids: dict[int, bytes] = {}
        self.num_chunks = 0

    @property
    def complete(self) -> bool:
        return self.current == self.total


class ChunkAssembler:
    """Reassembles the records of many blobs, arriving in any order, into Blobs.

    ``add(name, proto, blob)`` merges one BlobProto into ``blob`` (the first
    part resets it); ``check_complete()`` raises for any blob still partial.
    Duplicate, overlapping or overflowing parts raise ``SerializationError``.
    """

    def __init__(self, budget: int | None = None) -> None:
        self.states: dict[str, _State] = {}
        # Bytes of tensor data the source justifies (None: unbounded): a part whose dims promise
        # more than that is refused before anything is allocated (a few bytes cannot ask for GiBs).
        self.budget = budget
        self.allocated = 0

    def __contains__(self, name: str) -> bool:
        return name in self.states

    def is_complete(self, name: str) -> bool:
        st = self.states.get(name)
        return st is not None and st.complete

    def complete_names(self) -> list[str]:
        return [n for n, s in self.states.items() if s.complete]

    def add(self, name: str, proto: BlobProto, blob: Blob, where: str = "") -> None:
        label = f" ({where})" if where else ""
        st = self.states.get(name)
        is_tensor = proto.type == TENSOR_TYPE or (not proto.type and proto.HasField("tensor"))
        # Decode (and validate) the part before allocating anything for it.
        decoded = proto_elements(proto.tensor) if is_tensor else None
        if st is None:
            st = self.states[name] = _State(blob)
            blob.reset()
            if is_tensor:
                self._start_tensor(st, proto.tensor, name, label)
            else:
                st.num_chunks = max(proto.content_num_chunks, 1) if proto.HasField("content_num_chunks") else 1
                st.total = st.num_chunks
        elif st.is_tensor != is_tensor:
            raise SerializationError(f"blob '{name}'{label}: parts of different kinds (tensor and non-tensor)")
        if decoded is not None:
            self._add_tensor(st, proto.tensor, decoded[1], name, label)
        else:
            self._add_content(st, proto, name, label)

    def _start_tensor(self, st: _State, tp: TensorProto, name: str, label: str) -> None:
        dims, numel, _, _ = proto_extent(tp)
        st.is_tensor = True
        st.total, st.dims = numel, dims
        try:
            st.meta = TypeMeta.from_proto(tp.data_type)
        except FrameworkError as e:
            raise SerializationError(f"blob '{name}'{label}: {e}") from e
        t = Tensor()
        t.resize(dims)
        if tp.storage_type == TensorProto.NO_CONTENT:  # shape and type only
            t._meta = st.meta
            st.flat = None
            st.blob.reset(t)
            return
        nbytes = numel * (8 if st.meta.dtype == object else st.meta.itemsize)
        if self.budget is not None and self.allocated + nbytes > self.budget:
            raise SerializationError(
                f"Data size mismatch for blob {name}{label}: dims {list(dims)} promise {nbytes} bytes of "
                f"{st.meta.name}, more than the source's {self.budget} bytes can hold (damaged or hostile file?)"
            )
        self.allocated += nbytes
        st.flat = allocate_elements(tp, lambda: t.mutable_data(st.meta)).reshape(-1)
        st.blob.reset(t)

    def _add_tensor(self, st: _State, tp: TensorProto, vals: np.ndarray | None, name: str, label: str) -> None:
        dims, numel, begin, end = proto_extent(tp)
        if dims != st.dims:
            raise SerializationError(
                f"blob '{name}'{label}: a part has dims {list(dims)}, earlier ones {list(st.dims)}"
            )
        try:
            meta = TypeMeta.from_proto(tp.data_type)
        except FrameworkError as e:
            raise SerializationError(f"blob '{name}'{label}: {e}") from e
        if meta is not st.meta:
            earlier = st.meta.name if st.meta is not None else "none"
            raise SerializationError(f"blob '{name}'{label}: a part has type {meta.name}, earlier ones {earlier}")
        i = bisect.bisect_left(st.spans, (begin, end))
        overlaps = (i > 0 and st.spans[i - 1][1] > begin) or (i < len(st.spans) and st.spans[i][0] < end)
        dup = i < len(st.spans) and st.spans[i] == (begin, end)
        if (st.flat is None) != (vals is None):
            raise SerializationError(f"blob '{name}'{label}: parts with and without content (NO_CONTENT)")
        if overlaps or dup or st.current + (end - begin) > st.total:
            raise SerializationError(
                f"blob '{name}'{label}: found an extra part: segment [{begin}, {end}) overlaps data already read "
                f"({st.current} of {st.total} elements)"
            )
        if vals is not None and st.flat is not None:  # both or neither, checked above
            st.flat[begin:end] = vals
        st.spans.insert(i, (begin, end))
        st.current += end - begin

    def _add_content(self, st: _State, proto: BlobProto, name: str, label: str) -> None:
        n = max(proto.content_num_chunks, 1) if proto.HasField("content_num_chunks") else 1
        cid = proto.content_chunk_id if proto.HasField("content_chunk_id") else 0
        if n != st.num_chunks or not 0 <= cid < n or cid in st.chunk_ids:
            raise SerializationError(
                f"blob '{name}'{label}: found an extra part: chunk {cid} of {n} "
                f"(expected {st.num_chunks} chunks, have {sorted(st.chunk_ids)})"
            )
        st.chunk_ids[cid] = bytes(proto.content)
        st.current += 1
        if st.current == st.total:
            if n > 1:
                whole = BlobProto()
                whole.CopyFrom(proto)
                whole.ClearField("content_num_chunks")
                whole.ClearField("content_chunk_id")
                whole.content = b"".join(st.chunk_ids[i] for i in range(n))
                proto = whole
            deserialize_blob(proto, st.blob)

    def check_complete(self, where: str = "") -> None:
        label = f" in {where}" if where else ""
        for name, st in self.states.items():
            if not st.complete:
                raise SerializationError(
                    f"Data size mismatch for blob {name}{label}. Expected {st.total} "
                    f"{'elements' if st.is_tensor else 'chunks'}, read {st.current}: some parts are missing"
                )
