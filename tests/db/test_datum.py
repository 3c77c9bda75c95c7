"""Caffe1 Datum records, written in the test straight from caffe.proto's field numbers (wire format by hand)."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from framework.db import Mode, open_db
from framework.db.datum import decode_datum, encode_datum
from framework.errors import DBError


def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def field(number, wire, payload):
    return varint(number << 3 | wire) + payload


def datum_bytes(c=None, h=None, w=None, data=None, label=None, floats=None, encoded=None):
    """Datum: channels=1, height=2, width=3 (int32), data=4 (bytes), label=5, float_data=6 (float), encoded=7."""
    out = b""
    for number, v in ((1, c), (2, h), (3, w)):
        if v is not None:
            out += field(number, 0, varint(v))
    if data is not None:
        out += field(4, 2, varint(len(data)) + data)
    if label is not None:
        out += field(5, 0, varint(label))
    for f in floats or ():
        out += field(6, 5, np.float32(f).tobytes())
    if encoded is not None:
        out += field(7, 0, varint(int(encoded)))
    return out


@given(st.integers(1, 4), st.integers(1, 6), st.integers(1, 6), st.integers(0, 999), st.data())
def test_raw_uint8_datum_is_chw(c, h, w, label, data):
    chw = np.array(data.draw(st.lists(st.integers(0, 255), min_size=c * h * w, max_size=c * h * w)), np.uint8)
    rec = decode_datum(datum_bytes(c, h, w, chw.tobytes(), label))
    assert rec.label == label and rec.encoded is None
    np.testing.assert_array_equal(rec.image, chw.reshape(c, h, w).transpose(1, 2, 0))


def test_float_data_and_encoded_and_roundtrip():
    rec = decode_datum(datum_bytes(1, 1, 2, floats=[0.5, -2.0], label=3))
    np.testing.assert_array_equal(rec.image, np.array([[[0.5], [-2.0]]], np.float32))
    jpeg = b"\xff\xd8fake jpeg bytes"
    rec = decode_datum(datum_bytes(data=jpeg, label=1, encoded=True))
    assert rec.image is None and rec.encoded == jpeg and rec.label == 1
    img = np.random.default_rng(0).integers(0, 256, (5, 4, 3), dtype=np.uint8)
    # our writer produces exactly the bytes of the hand-made message
    assert encode_datum(img, 9) == datum_bytes(3, 5, 4, np.ascontiguousarray(img.transpose(2, 0, 1)).tobytes(), 9)


@pytest.mark.parametrize(
    "raw, message",
    [
        (datum_bytes(3, 2, 2, b"\x00" * 11, 0), "11 bytes of data, 3x2x2 needs 12"),
        (datum_bytes(0, 2, 2, b"", 0), "must all be > 0"),
        (datum_bytes(1, 1, 1), "neither data nor float_data"),
        (datum_bytes(encoded=True), "no image bytes"),
        (b"\xff\xff\xff", "not a Caffe Datum"),
    ],
)
def test_bad_datums_are_named_errors(raw, message):
    with pytest.raises(DBError, match=message):
        decode_datum(raw, where="lmdb x: record 'k'")


@pytest.mark.parametrize("db_type", ["lmdb", "leveldb"])
def test_caffe1_style_image_db_reads(tmp_path, db_type):
    """An image set as Caffe1's convert_imageset lays it out: keys '%08d_<file>', Datum values."""
    rng = np.random.default_rng(1)
    images = [rng.integers(0, 256, (3, 8, 8), dtype=np.uint8) for _ in range(5)]
    path = str(tmp_path / f"train_{db_type}")
    with open_db(db_type, path, Mode.NEW) as db, db.new_transaction() as txn:
        for i, chw in enumerate(images):
            txn.put(f"{i:08d}_img{i}.png", datum_bytes(3, 8, 8, chw.tobytes(), i % 3))
    with open_db(db_type, path, Mode.READ) as db:
        got = [decode_datum(v, f"{db_type} {path}: record {k!r}") for k, v in db.cursor()]
    for i, (rec, chw) in enumerate(zip(got, images)):
        assert rec.label == i % 3
        np.testing.assert_array_equal(rec.image, chw.transpose(1, 2, 0))
