"""Blob: any object plus its type; get/get_mutable/reset/share_external; blob sizes."""

from __future__ import annotations

import numpy as np
import pytest

from framework.errors import TypeMismatchError, UninitializedError
from framework.memory import Blob, Tensor, TypeMeta
from framework.memory.typemeta import STRING
from framework.memory.workspace import blob_nbytes


class Reader:
    pass


def test_get_checks_type_and_names_both_types_and_the_blob():
    b = Blob("weights", Tensor((2,)))
    assert isinstance(b.get(Tensor), Tensor) and b.get() is b.get(Tensor) and b.get_tensor() is b.get()
    with pytest.raises(TypeMismatchError) as info:
        b.get(Reader)
    msg = str(info.value)
    assert "Blob contains Tensor while caller expects Reader" in msg and "'weights'" in msg
    b.reset(b"abc")
    with pytest.raises(TypeMismatchError, match="Blob contains std::string while caller expects Tensor.*'weights'"):
        b.get(Tensor)
    assert b.get(str) == b"abc" and b.get(bytes) == b"abc" and b.get(STRING) == b"abc"


def test_empty_blob():
    b = Blob("e")
    assert b.is_empty and b.meta is None and b.type_name == "nullptr (uninitialized)"
    with pytest.raises(TypeMismatchError, match=r"nullptr \(uninitialized\) while caller expects Tensor"):
        b.get(Tensor)
    with pytest.raises(UninitializedError, match="'e' is empty"):
        b.get()


def test_get_mutable_keeps_matching_object_and_replaces_others():
    b = Blob("x")
    t = b.get_mutable(Tensor)
    assert b.get_mutable(Tensor) is t and b.get_mutable() is t
    r = b.get_mutable(Reader)
    assert isinstance(r, Reader) and b.get(Reader) is r and not b.is_type(Tensor)
    assert b.get_mutable(str) == b"" and b.is_type(bytes) and b.is_type(str)


def test_reset_and_share_external():
    b = Blob("x")
    assert b.reset("héllo") == "héllo".encode() and b.meta is STRING
    b.reset()
    assert b.is_empty
    t = Tensor.from_numpy(np.ones(3))
    assert b.share_external(t) is t and b.get(Tensor) is t  # held, not copied
    t.mutable_data()[0] = 5
    assert b.get(Tensor).data()[0] == 5
    r = Reader()
    b.reset(r)
    assert b.meta is TypeMeta.of(Reader) and b.type_name == "Reader"


def test_element_meta_is_not_a_blob_type():
    with pytest.raises(TypeMismatchError, match="tensor element type"):
        Blob("x", Tensor()).get(TypeMeta.of(np.float32))


def test_blob_nbytes():
    assert blob_nbytes(Blob("a", Tensor.from_numpy(np.zeros((3, 4), np.float32)))) == 48
    assert blob_nbytes(Blob("a", Tensor((3, 4)))) == 0  # not allocated
    strings = Tensor.from_numpy(np.array(["ab", "cde"]))
    assert blob_nbytes(Blob("s", strings)) == 5 + strings.nbytes  # string payload plus the pointers
    assert blob_nbytes(Blob("b", b"12345")) == 5
    assert blob_nbytes(Blob("r", Reader())) == 0  # unknown types: 0, as Caffe2's BlobStat
