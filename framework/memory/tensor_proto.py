"""Tensors <-> ``TensorProto``: element encodings and the checks that reading needs.

- Writing: ``raw_data`` (little-endian, ``storage_type`` RAW) by default, one
  ``tobytes`` per chunk; with ``typed=True`` the typed fields instead:
  float_data, double_data, int64_data, int32_data (bool, int8, uint8, int16,
  uint16 widened; float16 as its uint16 bit pattern) and string_data for string
  tensors. Packed typed payloads are built with numpy (no per-element Python
  work) and are byte-identical to protobuf's own encoding.
- Reading accepts every storage type: TYPED (any field, BYTE as uint8, float16
  from int32_data bits; bool, int8/16, uint8/16, int64 and float16 also from
  little-endian ``byte_data``, as later Caffe2 writes them on request), RAW,
  NO_CONTENT (shape and type only: the tensor gets no data, so a few bytes in a file cannot
  make it allocate gigabytes); EXTERNAL is refused with a clear error.

Blob-level serialization (BlobProto, chunking, the registry) is in
``framework.memory.serialize``.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from framework.errors import FrameworkError, SerializationError
from framework.memory.tensor import Tensor, as_tensor_array
from framework.memory.typemeta import STRING, TypeMeta
from framework.proto.framework_pb2 import TensorProto

DT = TensorProto

# Little-endian wire dtypes of raw_data, by numpy dtype.
RAW_DTYPES: dict[np.dtype, np.dtype] = {
    np.dtype(t): np.dtype(t).newbyteorder("<")
    for t in (np.float16, np.float32, np.float64, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.bool_)
}
_WIDENED = (DT.BOOL, DT.INT8, DT.UINT8, DT.INT16, DT.UINT16, DT.INT32)
# Types a later Caffe2 may write into byte_data (raw little-endian elements) when asked to.
_BYTES_HOLDER = (DT.BOOL, DT.INT8, DT.UINT8, DT.INT16, DT.UINT16, DT.INT64, DT.FLOAT16)


def as_array(tensor: Any) -> np.ndarray:
    if isinstance(tensor, Tensor):
        if not tensor.is_initialized:
            raise SerializationError("cannot serialize an uninitialized tensor (it has no shape)")
        if not tensor.is_allocated:
            if tensor.numel == 0 and tensor.meta is not None:
                return np.empty(tensor.dims, dtype=tensor.meta.dtype)
            raise SerializationError(f"cannot serialize a tensor of shape {tensor.dims} that holds no data")
        return tensor.data()
    return as_tensor_array(tensor)


def tensor_to_proto(
    tensor: Any, name: str = "", typed: bool = False, segment: tuple[int, int] | None = None
) -> TensorProto:
    """A TensorProto of ``tensor`` (a Tensor or numpy array), or of its element range ``segment``.

    ``dims`` are always the full shape; ``segment=(begin, end)`` stores only
    those flat elements and sets ``segment``. Raw little-endian ``raw_data`` by
    default, typed fields with ``typed=True``; string tensors always use
    ``string_data``.
    """
    arr = as_array(tensor)
    try:
        meta = TypeMeta.of(arr.dtype)
    except FrameworkError as e:
        raise SerializationError(f"tensor '{name}': {e}") from e
    if meta.proto_type == DT.UNDEFINED:
        raise SerializationError(f"tensor '{name}': element type {meta.name} has no TensorProto type (not Caffe2's)")
    proto = TensorProto()
    if name:
        proto.name = name
    proto.dims.extend(arr.shape)
    proto.data_type = meta.proto_type
    flat = arr.reshape(-1)
    if segment is not None:
        begin, end = int(segment[0]), int(segment[1])
        if not 0 <= begin <= end <= flat.size:
            raise SerializationError(f"tensor '{name}': segment [{begin}, {end}) is outside [0, {flat.size})")
        proto.segment.begin, proto.segment.end = begin, end
        flat = flat[begin:end]
    if meta is STRING:
        proto.string_data.extend(_string_element(x, name) for x in flat)
    elif not typed:
        proto.storage_type = DT.RAW
        proto.raw_data = flat.astype(RAW_DTYPES[flat.dtype], copy=False).tobytes()
    else:
        _fill_typed(proto, meta, flat)
    return proto


def _string_element(x: Any, name: str) -> bytes:
    if isinstance(x, bytes):
        return x
    if isinstance(x, str):
        return x.encode("utf-8")
    raise SerializationError(
        f"tensor '{name}': an object tensor element is a {type(x).__qualname__}; only strings (bytes/str) "
        "can be serialized"
    )


def _fill_typed(proto: TensorProto, meta: TypeMeta, flat: np.ndarray) -> None:
    # Parsing the encoded packed field appends to it: no per-element Python work.
    field = typed_field(meta.proto_type, flat)
    if field:
        proto.MergeFromString(b"".join(field))


# Packed typed fields: (field number, fixed-width little-endian wire dtype or None for varints).
TYPED_FIELDS: dict[int, tuple[int, str | None]] = {DT.FLOAT: (3, "<f4"), DT.DOUBLE: (9, "<f8"), DT.INT64: (10, None)}


def typed_field(dt: int, flat: np.ndarray) -> list[Any]:
    """The encoded packed typed field of ``flat`` as buffers [tag + length, payload]; [] when empty (as protobuf).

    float_data and double_data are packed fixed-width, so their payload is the
    elements' little-endian bytes; int32_data and int64_data are packed varints
    (negative values as 10-byte two's complement), encoded with numpy. FLOAT16
    goes into int32_data as its uint16 bit patterns; bool and the small integer
    types are widened into int32_data, as Caffe2 writes them.
    """
    if flat.size == 0:
        return []
    number, wire = TYPED_FIELDS.get(dt, (4, None))
    if wire is not None:
        payload: memoryview | bytes = np.ascontiguousarray(flat.astype(wire, copy=False)).data.cast("B")
    elif dt == DT.FLOAT16:
        payload = _varints(flat.view(np.uint16).astype(np.uint64))
    else:
        payload = _varints(flat.astype(np.int64).view(np.uint64))
    return [bytes([(number << 3) | 2]) + varint(len(payload)), payload]


def _varints(values: np.ndarray) -> bytes:
    """Protobuf base-128 varints of uint64 ``values``, concatenated (vectorized)."""
    v = values.astype(np.uint64, copy=True)
    sizes = np.ones(v.size, dtype=np.int64)
    rest = v >> np.uint64(7)
    while True:
        more = rest != 0
        if not more.any():
            break
        sizes += more
        rest >>= np.uint64(7)
    out = np.empty(int(sizes.sum()), dtype=np.uint8)
    pos = np.cumsum(sizes) - sizes
    idx = np.arange(v.size)
    for i in range(int(sizes.max())):
        idx = idx[sizes[idx] > i]
        byte = (v[idx] & np.uint64(0x7F)).astype(np.uint8)
        byte[sizes[idx] > i + 1] |= 0x80
        out[pos[idx] + i] = byte
        v[idx] >>= np.uint64(7)
    return out.tobytes()


def _check_range(proto: TensorProto, values: np.ndarray, low: int, high: int, what: str) -> None:
    """SerializationError naming the tensor when a widened value does not fit its type (it would wrap)."""
    if values.size and (values.min() < low or values.max() > high):
        bad = values[(values < low) | (values > high)][0]
        raise SerializationError(
            f"tensor '{proto.name}': int32_data holds {int(bad)}, outside the range of {what} [{low}, {high}]"
        )


def _check_count(proto: TensorProto, got: int, want: int, field: str) -> None:
    if got != want:
        raise SerializationError(
            f"tensor '{proto.name}': {field} holds {got} elements but the segment needs {want} "
            f"(dims {list(proto.dims)}, data_type {_type_name(proto.data_type)})"
        )


def _type_name(dt: int) -> str:
    try:
        return DT.DataType.Name(dt)
    except ValueError:
        return f"unknown({dt})"


def _check_unknown_enums(proto: TensorProto) -> None:
    """An enum value this schema does not know (data_type 99) lands in the unknown fields and the
    field reads as its default (FLOAT): refuse instead of loading the bytes as floats."""
    from google.protobuf.unknown_fields import UnknownFieldSet

    for f in UnknownFieldSet(proto):
        if f.field_number in (2, 12):
            field = "data_type" if f.field_number == 2 else "storage_type"
            raise SerializationError(f"tensor '{proto.name}': unknown {field} {f.data} (not a Caffe2 {field})")


def proto_extent(proto: TensorProto) -> tuple[tuple[int, ...], int, int, int]:
    """(dims, numel, begin, end) of a TensorProto, validated."""
    if not proto.HasField("data_type") or not proto.HasField("storage_type"):
        _check_unknown_enums(proto)
    dims = tuple(proto.dims)
    numel = 1
    for d in dims:
        if d < 0:
            raise SerializationError(f"tensor '{proto.name}': negative dimension in dims {list(dims)}")
        numel *= d
    if numel > 1 << 48:
        raise SerializationError(f"tensor '{proto.name}': dims {list(dims)} are implausibly large")
    if proto.HasField("segment"):
        begin, end = proto.segment.begin, proto.segment.end
        if not 0 <= begin <= end <= numel:
            raise SerializationError(
                f"tensor '{proto.name}': segment [{begin}, {end}) does not fit a tensor of {numel} elements"
            )
    else:
        begin, end = 0, numel
    return dims, numel, begin, end


def proto_elements(proto: TensorProto) -> tuple[TypeMeta, np.ndarray | None]:
    """The element type and the flat elements of the proto's segment (read-only when possible);
    None for NO_CONTENT (shape only)."""
    dims, numel, begin, end = proto_extent(proto)
    count = end - begin
    dt = proto.data_type
    try:
        meta = TypeMeta.from_proto(dt)
    except FrameworkError as e:
        raise SerializationError(
            f"tensor '{proto.name}': data_type {_type_name(dt)} cannot be read "
            "(only plain numeric, bool and string tensors are supported)"
        ) from e
    assert meta.dtype is not None, "every TensorProto type has a numpy dtype"
    st = proto.storage_type
    if st == DT.EXTERNAL:
        raise SerializationError(
            f"tensor '{proto.name}': storage_type EXTERNAL (data in another file) is not supported"
        )
    if st == DT.NO_CONTENT:
        return meta, None  # shape and type only: nothing to allocate
    if meta is STRING:
        _check_count(proto, len(proto.string_data), count, "string_data")
        out = np.empty(count, dtype=object)
        out[:] = list(proto.string_data)
        return meta, out
    if st == DT.RAW:
        raw = proto.raw_data
        wire = RAW_DTYPES[meta.dtype] if dt != DT.BYTE else np.dtype(np.uint8)
        _check_count(proto, len(raw) // wire.itemsize if len(raw) % wire.itemsize == 0 else -1, count, "raw_data")
        arr = np.frombuffer(raw, dtype=wire)
        if meta.dtype == np.bool_ and arr.size and arr.view(np.uint8).max() > 1:
            arr = arr.view(np.uint8) != 0
        return meta, arr.astype(meta.dtype, copy=False)
    if st != DT.TYPED:
        raise SerializationError(f"tensor '{proto.name}': unknown storage_type {st}")
    if dt == DT.FLOAT:
        vals = np.asarray(proto.float_data, dtype=np.float32)
        _check_count(proto, vals.size, count, "float_data")
    elif dt == DT.DOUBLE:
        vals = np.asarray(proto.double_data, dtype=np.float64)
        _check_count(proto, vals.size, count, "double_data")
    elif dt == DT.BYTE:
        vals = np.frombuffer(proto.byte_data, dtype=np.uint8)
        _check_count(proto, vals.size, count, "byte_data")
    elif dt in _BYTES_HOLDER and proto.HasField("byte_data"):
        # Later Caffe2 (flags caffe2_serialize_fp16_as_bytes / caffe2_serialize_using_bytes_as_holder)
        # stores these types' elements little-endian in byte_data instead of int32_data/int64_data.
        raw = proto.byte_data
        wire = RAW_DTYPES[meta.dtype]
        size = wire.itemsize
        _check_count(proto, len(raw) // size if len(raw) % size == 0 else -1, count, "byte_data")
        vals = np.frombuffer(raw, dtype=wire)
        if dt == DT.BOOL:
            vals = vals.view(np.uint8) != 0
        vals = vals.astype(meta.dtype, copy=False)
    elif dt == DT.INT64:
        vals = np.asarray(proto.int64_data, dtype=np.int64)
        _check_count(proto, vals.size, count, "int64_data")
    elif dt == DT.FLOAT16:
        bits = np.asarray(proto.int32_data, dtype=np.int64)
        _check_count(proto, bits.size, count, "int32_data")
        _check_range(proto, bits, -(1 << 15), (1 << 16) - 1, "float16 bit patterns")
        vals = bits.astype(np.uint16).view(np.float16)
    elif dt in _WIDENED:
        wide = np.asarray(proto.int32_data, dtype=np.int64)
        _check_count(proto, wide.size, count, "int32_data")
        if dt != DT.BOOL:
            info = np.iinfo(meta.dtype)
            _check_range(proto, wide, int(info.min), int(info.max), str(meta.dtype))
        vals = (wide != 0) if dt == DT.BOOL else wide.astype(meta.dtype)
    else:  # pragma: no cover - every TypeMeta proto type is handled above
        raise SerializationError(f"tensor '{proto.name}': cannot read data_type {_type_name(dt)}")
    return meta, vals


def tensor_from_proto(proto: TensorProto) -> Tensor:
    """A new Tensor from a complete TensorProto (no segment, or one covering every element)."""
    dims, numel, begin, end = proto_extent(proto)
    if (begin, end) != (0, numel):
        raise SerializationError(
            f"tensor '{proto.name}': holds only the segment [{begin}, {end}) of {numel} elements; "
            "chunked tensors are reassembled by ChunkAssembler (Load)"
        )
    meta, vals = proto_elements(proto)
    t = Tensor()
    t.resize(dims)
    if vals is None:  # NO_CONTENT: shape and type, no data
        t._meta = meta
        return t
    dst = allocate_elements(proto, lambda: t.mutable_data(meta))
    dst.reshape(-1)[...] = vals
    return t


def allocate_elements(proto: TensorProto, make: Callable[[], np.ndarray]) -> np.ndarray:
    """Run an allocation a (possibly damaged) proto asks for; a SerializationError if it cannot be met."""
    try:
        return make()
    except FrameworkError as e:  # the allocation limit
        raise SerializationError(f"tensor '{proto.name}': dims {list(proto.dims)}: {e}") from None
    except (MemoryError, ValueError, OverflowError) as e:
        raise SerializationError(
            f"tensor '{proto.name}': dims {list(proto.dims)} ask for more memory than is available (damaged data?): {e}"
        ) from None


def varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)
