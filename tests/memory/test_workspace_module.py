"""framework.workspace: the Caffe2-compatible module over a current Workspace object."""

from __future__ import annotations

import os

import numpy as np
import pytest

from framework import workspace
from framework.errors import BlobNotFoundError, FrameworkError
from framework.memory.workspace import Workspace


@pytest.fixture(autouse=True)
def fresh_default():
    """Run each test in a fresh workspace called 'default', dropping any others created."""
    before = set(workspace.Workspaces())
    workspace.SwitchWorkspace("default", True)
    workspace.ResetWorkspace()
    yield
    workspace.SwitchWorkspace("default")
    workspace.ResetWorkspace()
    for name in set(workspace.Workspaces()) - before:
        del workspace._workspaces[name]


def test_feed_fetch_has_blobs_create():
    assert workspace.FeedBlob("x", np.arange(3, dtype=np.float32)) is True
    assert workspace.HasBlob("x") and not workspace.HasBlob("y")
    np.testing.assert_array_equal(workspace.FetchBlob("x"), [0, 1, 2])
    workspace.FeedBlob("s", "text")
    assert workspace.FetchBlob("s") == b"text"
    assert workspace.CreateBlob("e") is True and workspace.HasBlob("e")
    assert workspace.Blobs() == ["x", "s", "e"]
    a, s = workspace.FetchBlobs(["x", "s"])
    assert a.dtype == np.float32 and s == b"text"
    with pytest.raises(BlobNotFoundError, match="can't find blob 'q'"):
        workspace.FetchBlob("q")
    assert isinstance(workspace.C(), Workspace) and workspace.C().has_blob("x")


def test_feed_accepts_blob_references_and_copies():
    class Ref:  # core.BlobReference-like: str() gives the name
        def __str__(self):
            return "ref"

    arr = np.ones(2)
    workspace.FeedBlob(Ref(), arr)
    arr[0] = 9
    assert workspace.HasBlob(Ref()) and workspace.FetchBlob(Ref())[0] == 1


def test_blobs_dict_view():
    workspace.blobs["a"] = np.zeros(2)
    workspace.blobs["b"] = "hi"
    assert "a" in workspace.blobs and "z" not in workspace.blobs
    assert len(workspace.blobs) == 2 and list(workspace.blobs) == ["a", "b"] and workspace.blobs.keys() == ["a", "b"]
    assert workspace.blobs["b"] == b"hi"
    np.testing.assert_array_equal(workspace.blobs["a"], [0, 0])


def test_remove_and_rename():
    workspace.FeedBlob("a", 1.0)
    assert workspace.RenameBlob("a", "b") and workspace.Blobs() == ["b"]
    assert workspace.RemoveBlob("b") and workspace.Blobs() == []


def test_switch_workspace():
    workspace.FeedBlob("in_default", 1)
    assert workspace.CurrentWorkspace() == "default"
    with pytest.raises(FrameworkError, match="'other' does not exist; pass create_if_missing=True"):
        workspace.SwitchWorkspace("other")
    workspace.SwitchWorkspace("other", create_if_missing=True)
    assert workspace.CurrentWorkspace() == "other" and "other" in workspace.Workspaces()
    assert workspace.Blobs() == [] and workspace.RootFolder() == "."
    workspace.FeedBlob("in_other", 2)
    workspace.SwitchWorkspace("default")
    assert workspace.Blobs() == ["in_default"]
    workspace.SwitchWorkspace("other", True)  # existing: kept, not recreated
    assert workspace.Blobs() == ["in_other"]


def test_reset_workspace_and_root_folder(tmp_path):
    workspace.FeedBlob("x", 1)
    folder = tmp_path / "new" / "root"
    assert workspace.ResetWorkspace(str(folder)) is True
    assert workspace.Blobs() == [] and workspace.RootFolder() == str(folder) and folder.is_dir()
    assert workspace.CurrentWorkspace() == "default"
    workspace.FeedBlob("y", 2)
    workspace.ResetWorkspace()  # keeps the root folder
    assert workspace.Blobs() == [] and workspace.RootFolder() == str(folder)
    assert workspace.C().resolve_path("a.minidb") == os.path.join(str(folder), "a.minidb")


def test_serialize_deserialize_blob():
    pytest.importorskip("framework.memory.serialize")
    x = np.arange(12, dtype=np.int16).reshape(3, 4)
    workspace.FeedBlob("x", x)
    data = workspace.SerializeBlob("x")
    assert isinstance(data, bytes)
    from framework.proto.framework_pb2 import BlobProto

    proto = BlobProto()
    proto.ParseFromString(data)
    assert proto.name == "x" and proto.type == "Tensor" and list(proto.tensor.dims) == [3, 4]
    assert workspace.DeserializeBlob("y", data) is True
    out = workspace.FetchBlob("y")
    assert out.dtype == np.int16
    np.testing.assert_array_equal(out, x)
    workspace.FeedBlob("s", b"payload")
    workspace.DeserializeBlob("s2", workspace.SerializeBlob("s"))
    assert workspace.FetchBlob("s2") == b"payload"


def test_net_functions_use_the_current_workspace():
    pytest.importorskip("framework.net.base")
    from framework.proto.framework_pb2 import NetDef

    net = NetDef(name="relu_net", external_input=["X"], external_output=["Y"])
    net.op.add(type="Relu", input=["X"], output=["Y"])
    workspace.FeedBlob("X", np.array([-1.0, 3.0], dtype=np.float32))
    assert workspace.CreateNet(net) is True
    assert workspace.Nets() == ["relu_net"]
    with pytest.raises(FrameworkError, match="overwrite"):
        workspace.CreateNet(net)
    assert workspace.CreateNet(net, overwrite=True)
    assert workspace.RunNet("relu_net", num_iter=2)
    np.testing.assert_array_equal(workspace.FetchBlob("Y"), [0.0, 3.0])
    assert workspace.DeleteNet("relu_net") and workspace.Nets() == []


def test_feed_a_tensor_proto():
    pytest.importorskip("framework.memory.serialize")
    from framework.proto.framework_pb2 import TensorProto

    proto = TensorProto(dims=[2], data_type=TensorProto.INT32, int32_data=[4, 5])
    workspace.FeedBlob("p", proto)
    out = workspace.FetchBlob("p")
    assert out.dtype == np.int32 and out.tolist() == [4, 5]
