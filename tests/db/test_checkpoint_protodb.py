"""Checkpoints in a protodb (Caffe2's TensorProtos file): keys are tensor names, values TensorProtos."""

from __future__ import annotations

import numpy as np
import pytest

from framework import checkpoint
from framework.errors import DBError
from framework.memory.workspace import Workspace
from framework.proto import framework_pb2 as pb


def test_save_and_load_a_protodb_checkpoint(tmp_path):
    ws = Workspace(root_folder=str(tmp_path))
    values = {
        "w": np.arange(6, dtype=np.float32).reshape(2, 3),
        "ids": np.array([3, -1], np.int64),
        "big": np.arange(70000, dtype=np.float64),
    }
    for k, v in values.items():
        ws.feed_blob(k, v)
    assert sorted(checkpoint.save(ws, "c.protodb", db_type="protodb", chunk_size=30000)) == sorted(values)
    # the file is a TensorProtos message whose tensors are named by their keys (name#%chunk)
    protos = pb.TensorProtos()
    protos.ParseFromString((tmp_path / "c.protodb").read_bytes())
    assert {t.name.split("#%")[0] for t in protos.protos} == set(values) and len(protos.protos) == 5
    back = Workspace(root_folder=str(tmp_path))
    assert sorted(checkpoint.load(back, "c.protodb")) == sorted(values)
    for k, v in values.items():
        got = back.fetch_blob(k)
        assert got.dtype == v.dtype
        np.testing.assert_array_equal(got, v)
    rows = {r["name"]: r for r in checkpoint.list_checkpoint(str(tmp_path / "c.protodb"))}
    assert rows["w"]["shape"] == (2, 3) and rows["big"]["bytes"] == 70000 * 8


def test_a_caffe2_protodb_loads_and_non_tensors_are_refused(tmp_path):
    protos = pb.TensorProtos()
    t = protos.protos.add(name="b", dims=[2], data_type=pb.TensorProto.FLOAT)
    t.float_data.extend([1.5, -2.0])
    (tmp_path / "c2.protodb").write_bytes(protos.SerializeToString())
    ws = Workspace(root_folder=str(tmp_path))
    assert checkpoint.load(ws, "c2.protodb") == ["b"]
    np.testing.assert_array_equal(ws.fetch_blob("b"), np.array([1.5, -2.0], np.float32))
    ws.feed_blob("s", b"text")
    with pytest.raises(DBError, match="not a tensor"):
        checkpoint.save(ws, "s.protodb", blobs=["s"], db_type="protodb")
