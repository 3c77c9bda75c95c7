"""Caffe1's ``Datum`` records: image sets converted by Caffe (``convert_imageset``) into LMDB/LevelDB.

The message, from ``caffe.proto`` (package ``caffe``), field numbers as there::

    message Datum {
      optional int32 channels = 1;
      optional int32 height = 2;
      optional int32 width = 3;
      optional bytes data = 4;        // channels x height x width uint8, channel-major (CHW)
      optional int32 label = 5;
      repeated float float_data = 6;  // used instead of data for float images
      optional bool encoded = 7 [default = false];  // data holds a JPEG/PNG file's bytes
    }

Caffe2 reads these where ops take ``use_caffe_datum`` (``ImageInput``).
``decode_datum`` turns a record into an HWC array (or the encoded bytes, for
the caller's image decoder) and its label, checking sizes before trusting them.
The message class is built here from a descriptor, so no generated code is needed.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf import message as pb_message

from framework.errors import DBError


def _datum_class() -> type:
    f = descriptor_pb2.FileDescriptorProto(name="framework_caffe1_datum.proto", package="caffe", syntax="proto2")
    m = f.message_type.add(name="Datum")
    T = descriptor_pb2.FieldDescriptorProto
    for name, number, kind, label in (
        ("channels", 1, T.TYPE_INT32, T.LABEL_OPTIONAL),
        ("height", 2, T.TYPE_INT32, T.LABEL_OPTIONAL),
        ("width", 3, T.TYPE_INT32, T.LABEL_OPTIONAL),
        ("data", 4, T.TYPE_BYTES, T.LABEL_OPTIONAL),
        ("label", 5, T.TYPE_INT32, T.LABEL_OPTIONAL),
        ("float_data", 6, T.TYPE_FLOAT, T.LABEL_REPEATED),
        ("encoded", 7, T.TYPE_BOOL, T.LABEL_OPTIONAL),
    ):
        m.field.add(name=name, number=number, type=kind, label=label)
    pool = descriptor_pool.DescriptorPool()
    return message_factory.GetMessageClass(pool.Add(f).message_types_by_name["Datum"])


Datum = _datum_class()


class DatumRecord(NamedTuple):
    """A decoded Datum: ``image`` (HWC uint8 or float32) or, when ``encoded``, the file's bytes."""

    image: np.ndarray | None
    encoded: bytes | None
    label: int


def parse_datum(value: bytes, where: str = "record") -> Datum:
    """Parse a serialized Datum; a DBError naming ``where`` if it is not one."""
    d = Datum()
    try:
        d.ParseFromString(bytes(value))
    except pb_message.DecodeError as e:
        raise DBError(f"{where} is not a Caffe Datum: {e}") from None
    return d


def decode_datum(value: bytes, where: str = "record") -> DatumRecord:
    """The image (HWC) and label of a serialized Datum (see module doc)."""
    d = parse_datum(value, where)
    if d.encoded:
        if not d.data:
            raise DBError(f"{where}: an encoded Datum with no image bytes")
        return DatumRecord(None, bytes(d.data), int(d.label))
    c, h, w = d.channels, d.height, d.width
    if c <= 0 or h <= 0 or w <= 0:
        raise DBError(f"{where}: Datum dims channels={c} height={h} width={w} must all be > 0")
    n = c * h * w
    if d.data:
        if len(d.data) != n:
            raise DBError(f"{where}: Datum holds {len(d.data)} bytes of data, {c}x{h}x{w} needs {n}")
        chw = np.frombuffer(d.data, dtype=np.uint8).reshape(c, h, w)
    elif len(d.float_data):
        if len(d.float_data) != n:
            raise DBError(f"{where}: Datum holds {len(d.float_data)} float_data values, {c}x{h}x{w} needs {n}")
        chw = np.asarray(d.float_data, dtype=np.float32).reshape(c, h, w)
    else:
        raise DBError(f"{where}: Datum has neither data nor float_data")
    return DatumRecord(np.ascontiguousarray(chw.transpose(1, 2, 0)), None, int(d.label))


def encode_datum(image: np.ndarray, label: int = 0) -> bytes:
    """A raw (not encoded) Datum from an HWC (or HW) uint8/float image, as Caffe's tools write it."""
    a = np.asarray(image)
    if a.ndim == 2:
        a = a[:, :, None]
    if a.ndim != 3:
        raise ValueError(f"encode_datum needs an HW or HWC image, got shape {a.shape}")
    h, w, c = a.shape
    d = Datum(channels=c, height=h, width=w, label=int(label))
    chw = np.ascontiguousarray(a.transpose(2, 0, 1))
    if a.dtype == np.uint8:
        d.data = chw.tobytes()
    else:
        d.float_data.extend(chw.astype(np.float32).ravel().tolist())
    return d.SerializeToString()
