"""Parsing ImageInput's DB records: Caffe2 TensorProtos (image, label[, weights], extras[, box])
or Caffe1 Datums, into an image source, a label row and extra rows, with Caffe2's label types."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from google.protobuf.message import DecodeError

from framework.db.datum import parse_datum
from framework.errors import SerializationError, ShapeError
from framework.memory.tensor_proto import proto_elements, proto_extent
from framework.proto.framework_pb2 import TensorProto, TensorProtos

SINGLE_LABEL, MULTI_LABEL_SPARSE, MULTI_LABEL_DENSE = 0, 1, 2
MULTI_LABEL_WEIGHTED_SPARSE, SINGLE_LABEL_WEIGHTED, EMBEDDING_LABEL = 3, 4, 5
LABEL_TYPES = {
    SINGLE_LABEL: "SINGLE_LABEL",
    MULTI_LABEL_SPARSE: "MULTI_LABEL_SPARSE",
    MULTI_LABEL_DENSE: "MULTI_LABEL_DENSE",
    MULTI_LABEL_WEIGHTED_SPARSE: "MULTI_LABEL_WEIGHTED_SPARSE",
    SINGLE_LABEL_WEIGHTED: "SINGLE_LABEL_WEIGHTED",
    EMBEDDING_LABEL: "EMBEDDING_LABEL",
}
_EXTRA_DTYPES = {
    TensorProto.FLOAT: np.float32,
    TensorProto.INT32: np.int32,
    TensorProto.INT64: np.int64,
    TensorProto.UINT8: np.uint8,
}


class Record(NamedTuple):
    """One parsed record: ``encoded`` bytes or a ``raw`` HWC uint8 image, the label row, extras, a box."""

    encoded: bytes | None
    raw: np.ndarray | None
    label: np.ndarray
    extras: list[np.ndarray]
    box: tuple[int, int, int, int] | None  # ymin, xmin, height, width


class RecordSpec(NamedTuple):
    label_type: int
    num_labels: int
    use_caffe_datum: bool
    extra_sizes: list[int]


def _values(tp: TensorProto, where: str) -> np.ndarray:
    return proto_elements(tp)[1]


def label_dtype(first: TensorProtos | None, spec: RecordSpec, where: str) -> np.dtype:
    """The label output's dtype, from the first record of the batch (Caffe2's rule)."""
    if spec.use_caffe_datum:
        return np.dtype(np.int32)
    dt = first.protos[1].data_type
    if dt not in (TensorProto.INT32, TensorProto.FLOAT):
        raise SerializationError(f"{where}: label TensorProto has data_type {dt}; ImageInput reads INT32 or FLOAT")
    if spec.label_type == MULTI_LABEL_WEIGHTED_SPARSE:
        return np.dtype(np.float32)
    return np.dtype(np.int32 if dt == TensorProto.INT32 else np.float32)


def parse_protos(value: bytes, where: str) -> TensorProtos:
    protos = TensorProtos()
    try:
        protos.ParseFromString(value)
    except (DecodeError, RuntimeError, ValueError) as e:
        raise SerializationError(f"{where} is not a TensorProtos: {e}") from None
    return protos


def parse_record(value: bytes, spec: RecordSpec, dtype: np.dtype, where: str) -> Record:
    """Parse one DB value into a Record (label row cast to ``dtype``); errors name ``where``."""
    if spec.use_caffe_datum:
        d = parse_datum(value, where)
        label = np.array(d.label, dtype)
        if d.encoded:
            return Record(bytes(d.data), None, label, [], None)
        c, h, w = d.channels, d.height, d.width
        if c not in (1, 3) or h <= 0 or w <= 0 or len(d.data) != c * h * w:
            raise ShapeError(
                f"{where}: raw Datum must hold channels 1 or 3 and channels*height*width uint8 bytes; got "
                f"channels={c} height={h} width={w} and {len(d.data)} bytes"
            )
        chw = np.frombuffer(d.data, np.uint8).reshape(c, h, w)
        return Record(None, np.ascontiguousarray(chw.transpose(1, 2, 0)), label, [], None)
    protos = parse_protos(value, where)
    offset = 3 if spec.label_type in (MULTI_LABEL_WEIGHTED_SPARSE, SINGLE_LABEL_WEIGHTED) else 2
    end = offset + len(spec.extra_sizes)
    if len(protos.protos) < end:
        raise ShapeError(
            f"{where}: holds {len(protos.protos)} TensorProtos; label type {LABEL_TYPES[spec.label_type]} with "
            f"{len(spec.extra_sizes)} additional outputs needs at least {end}"
        )
    image, label_proto = protos.protos[0], protos.protos[1]
    encoded = raw = None
    if image.data_type == TensorProto.STRING:
        if len(image.string_data) != 1:
            raise ShapeError(
                f"{where}: an encoded image TensorProto must hold one string, it has {len(image.string_data)}"
            )
        encoded = bytes(image.string_data[0])
    elif image.data_type in (TensorProto.BYTE, TensorProto.UINT8):
        dims = proto_extent(image)[0]
        c = dims[2] if len(dims) == 3 else 1
        if len(dims) not in (2, 3) or c not in (1, 3):
            raise ShapeError(f"{where}: a raw image must be HW or HWC with 1 or 3 channels, got dims {list(dims)}")
        vals = _values(image, where)
        if vals.size != dims[0] * dims[1] * c:
            raise ShapeError(f"{where}: raw image dims {list(dims)} but {vals.size} bytes")
        raw = np.ascontiguousarray(vals.astype(np.uint8, copy=False).reshape(dims[0], dims[1], c))
    else:
        raise SerializationError(
            f"{where}: image TensorProto has data_type {image.data_type}; ImageInput reads STRING (encoded) or BYTE"
        )
    label = _label_row(protos, label_proto, spec, dtype, where)
    extras = []
    for k, size in enumerate(spec.extra_sizes):
        tp = protos.protos[offset + k]
        if tp.data_type not in _EXTRA_DTYPES:
            raise SerializationError(
                f"{where}: additional TensorProto {offset + k} has data_type {tp.data_type}; "
                "ImageInput reads FLOAT, INT32, INT64 or UINT8"
            )
        vals = _values(tp, where).astype(_EXTRA_DTYPES[tp.data_type], copy=False)
        if vals.size != size:
            raise ShapeError(
                f"{where}: additional TensorProto {offset + k} holds {vals.size} values, output_sizes says {size}"
            )
        extras.append(vals)
    box = None
    if len(protos.protos) == end + 1:
        b = protos.protos[end]
        vals = _values(b, where)
        if b.data_type != TensorProto.INT32 or vals.size != 4:
            raise ShapeError(
                f"{where}: the bounding box TensorProto must hold 4 INT32 values (ymin, xmin, height, width)"
            )
        box = tuple(int(v) for v in vals)
    return Record(encoded, raw, label, extras, box)


def _label_row(protos: TensorProtos, tp: TensorProto, spec: RecordSpec, dtype: np.dtype, where: str) -> np.ndarray:
    if tp.data_type not in (TensorProto.INT32, TensorProto.FLOAT):
        raise SerializationError(
            f"{where}: label TensorProto has data_type {tp.data_type}; ImageInput reads INT32 or FLOAT"
        )
    vals = _values(tp, where)
    lt, n = spec.label_type, spec.num_labels
    if lt in (SINGLE_LABEL, SINGLE_LABEL_WEIGHTED):
        if vals.size != 1:
            raise ShapeError(f"{where}: a single label must hold one value, it holds {vals.size}")
        return np.array(vals[0]).astype(dtype)
    if lt in (MULTI_LABEL_DENSE, EMBEDDING_LABEL):
        if vals.size != n:
            raise ShapeError(f"{where}: a dense label must hold num_labels={n} values, it holds {vals.size}")
        return vals.astype(dtype)
    idx = vals.astype(np.int64)
    if vals.size and (idx.min() < 0 or idx.max() >= n or (idx != vals).any()):
        raise ShapeError(f"{where}: sparse label indices {vals.tolist()} must be integers in [0, num_labels={n})")
    row = np.zeros(n, dtype)
    if lt == MULTI_LABEL_SPARSE:
        row[idx] = 1
        return row
    weights = _values(protos.protos[2], where)
    if weights.size != vals.size:
        raise ShapeError(f"{where}: {vals.size} sparse label indices but {weights.size} weights")
    row[idx] = weights.astype(dtype)
    return row
