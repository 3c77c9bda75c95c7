"""Workspace: blobs, parent/forwarded blobs, root folder, feed/fetch copy semantics, nets, sizes."""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from framework.errors import BlobNotFoundError, FrameworkError, NetError, UninitializedError
from framework.memory import Tensor, memory_reporter
from framework.memory.workspace import Workspace

DTYPES = [np.float16, np.float32, np.float64, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.bool_]


def test_create_has_get_remove_rename():
    ws = Workspace(name="w")
    assert not ws.has_blob("a") and ws.blobs() == []
    a = ws.create_blob("a")
    assert ws.has_blob("a") and ws.get_blob("a") is a and ws.create_blob("a") is a and a.name == "a"
    ws.create_blob("b")
    ws.rename_blob("a", "c")
    assert ws.blobs() == ["b", "c"] and ws.get_blob("c") is a and a.name == "c" and not ws.has_blob("a")
    with pytest.raises(FrameworkError, match="cannot rename 'c' to 'b': a blob called 'b' already exists"):
        ws.rename_blob("c", "b")
    with pytest.raises(BlobNotFoundError, match="no local blob 'zz'"):
        ws.rename_blob("zz", "q")
    assert ws.remove_blob("b") and not ws.remove_blob("b") and ws.blobs() == ["c"]


def test_missing_blob_error_suggests_names():
    ws = Workspace(name="w")
    ws.create_blob("weights")
    with pytest.raises(BlobNotFoundError, match=r"can't find blob 'wieghts' in workspace 'w'.*Did you mean: weights"):
        ws.get_blob("wieghts")


def test_blobs_order_local_forwarded_parent():
    parent = Workspace(name="parent")
    for n in ("p1", "p2", "shared"):
        parent.create_blob(n)
    other = Workspace()
    other.create_blob("o")
    ws = Workspace(parent=parent)
    ws.create_local_blob("z_local")
    ws.create_local_blob("shared")  # hides the parent's
    ws.add_blob_mapping(other, {"fwd": "o"})
    assert ws.blobs() == ["z_local", "shared", "fwd", "p1", "p2"]
    assert ws.local_blobs() == ["z_local", "shared"]
    assert ws.get_blob("shared") is not parent.get_blob("shared")
    assert ws.get_blob("fwd") is other.get_blob("o")
    assert ws.get_blob("p1") is parent.get_blob("p1")
    # create_blob finds the parent's blob instead of making a local one
    assert ws.create_blob("p2") is parent.get_blob("p2") and "p2" not in ws.local_blobs()
    # removal and renaming are local only
    assert not ws.remove_blob("p1") and parent.has_blob("p1")


def test_parent_blobs_are_visible_and_writes_go_through():
    parent = Workspace()
    parent.feed_blob("x", np.arange(3.0))
    child = Workspace(parent=parent)
    assert child.has_blob("x")
    np.testing.assert_array_equal(child.fetch_blob("x"), np.arange(3.0))
    child.feed_blob("x", np.zeros(3))
    np.testing.assert_array_equal(parent.fetch_blob("x"), np.zeros(3))


def test_add_blob_mapping():
    parent = Workspace()
    parent.feed_blob("w", np.ones(2))
    ws = Workspace()
    ws.add_blob_mapping(parent, {"local_w": "w"})
    ws.add_blob_mapping(parent, {"local_w": "w"})  # identical: fine
    assert ws.blobs() == ["local_w"]
    np.testing.assert_array_equal(ws.fetch_blob("local_w"), np.ones(2))
    ws.feed_blob("local_w", np.full(2, 7.0))  # writes reach the parent's blob
    np.testing.assert_array_equal(parent.fetch_blob("w"), np.full(2, 7.0))
    with pytest.raises(BlobNotFoundError, match="parent workspace has no blob 'nope'"):
        ws.add_blob_mapping(parent, {"a": "nope"})
    parent.create_blob("v")
    with pytest.raises(FrameworkError, match="redefinition of blob 'local_w'"):
        ws.add_blob_mapping(parent, {"local_w": "v"})
    ws.create_blob("mine")
    with pytest.raises(FrameworkError, match="redefinition of blob 'mine'"):
        ws.add_blob_mapping(parent, {"mine": "v"})
    ws.add_blob_mapping(parent, {"mine": "v", "v2": "v"}, skip_defined=True)
    assert ws.get_blob("mine") is not parent.get_blob("v") and ws.get_blob("v2") is parent.get_blob("v")
    # a forwarded blob disappears from the list when the parent drops it
    parent.remove_blob("v")
    assert "v2" not in ws.blobs()


def test_root_folder(tmp_path):
    ws = Workspace()
    assert ws.root_folder == "."
    ws = Workspace(root_folder=tmp_path)
    assert ws.root_folder == str(tmp_path)
    assert ws.resolve_path("ckpt.minidb") == os.path.join(str(tmp_path), "ckpt.minidb")
    assert ws.resolve_path("/abs/x") == "/abs/x"
    assert ws.resolve_path("rel", absolute=True) == "rel"
    ws.root_folder = "elsewhere"
    assert ws.resolve_path("a") == os.path.join("elsewhere", "a")


@given(
    hnp.arrays(st.sampled_from(DTYPES), hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4)),
)
def test_feed_fetch_arrays_copy_both_ways(arr):
    ws = Workspace()
    original = arr.copy()
    ws.feed_blob("x", arr)
    if arr.size:
        arr.flat[0] = arr.flat[-1] if arr.dtype != np.bool_ else not arr.flat[0]
    out = ws.fetch_blob("x")
    assert out.dtype == original.dtype and out.shape == original.shape
    np.testing.assert_array_equal(out, original)  # feeding copied
    if out.size:
        out.flat[0] = 0
        np.testing.assert_array_equal(ws.fetch_blob("x"), original)  # fetching copied


def test_feed_scalars_and_strings():
    ws = Workspace()
    ws.feed_blob("f", 1.5)
    ws.feed_blob("i", 7)
    ws.feed_blob("b", True)
    ws.feed_blob("f32", np.float32(2))
    assert ws.fetch_blob("f").dtype == np.float64 and ws.fetch_blob("f").shape == () and ws.fetch_blob("f") == 1.5
    assert ws.fetch_blob("i").dtype == np.int64 and ws.fetch_blob("i") == 7
    assert ws.fetch_blob("b").dtype == np.bool_ and ws.fetch_blob("f32").dtype == np.float32
    ws.feed_blob("s", "héllo")
    ws.feed_blob("by", b"\x00\xff")
    assert ws.fetch_blob("s") == "héllo".encode() and ws.fetch_blob("by") == b"\x00\xff"
    ws.feed_blob("sa", np.array(["a", "bb"]))
    out = ws.fetch_blob("sa")
    assert out.dtype == object and list(out) == [b"a", b"bb"]
    ws.feed_blob("sl", [b"x", "y"])
    assert list(ws.fetch_blob("sl")) == [b"x", b"y"]


def test_feed_a_tensor_copies_it():
    ws = Workspace()
    t = Tensor.from_numpy(np.arange(4))
    ws.feed_blob("t", t)
    t.mutable_data()[0] = 100
    assert ws.fetch_blob("t")[0] == 0


def test_refeed_same_shape_allocates_nothing():
    ws = Workspace()
    x = np.random.rand(32, 8).astype(np.float32)
    ws.feed_blob("x", x)
    start = memory_reporter().allocations
    for _ in range(10):
        ws.feed_blob("x", x)
    assert memory_reporter().allocations == start


def test_fetch_errors():
    ws = Workspace(name="w")
    with pytest.raises(BlobNotFoundError, match="can't find blob 'nope'"):
        ws.fetch_blob("nope")
    ws.create_blob("empty")
    with pytest.raises(BlobNotFoundError, match="'empty' exists but holds nothing"):
        ws.fetch_blob("empty")
    ws.create_blob("t").get_mutable(Tensor).resize(3)
    with pytest.raises(UninitializedError, match=r"blob 't'.*shape \(3,\), never written"):
        ws.fetch_blob("t")


def test_blob_sizes():
    ws = Workspace()
    ws.feed_blob("a", np.zeros((4, 4), dtype=np.float64))
    ws.feed_blob("s", "abc")
    ws.create_blob("e")
    assert ws.blob_sizes() == {"a": 128, "s": 3, "e": 0}


def test_no_shared_state_between_workspaces():
    a, b = Workspace(), Workspace()
    a.feed_blob("x", 1.0)
    assert not b.has_blob("x") and b.blobs() == []


# -- nets ---------------------------------------------------------------------------------


def _relu_net(name="n"):
    from framework.proto.framework_pb2 import NetDef

    net = NetDef(name=name, external_input=["X"], external_output=["Y"])
    net.op.add(type="Relu", input=["X"], output=["Y"])
    return net


def test_net_registry_refuses_overwrite_unless_asked():
    pytest.importorskip("framework.net.base")
    ws = Workspace()
    ws.feed_blob("X", np.array([-1.0, 2.0], dtype=np.float32))
    first = ws.create_net(_relu_net())
    assert ws.nets() == ["n"] and ws.has_net("n") and ws.get_net("n") is first
    with pytest.raises(NetError, match="refus.*overwrite"):
        ws.create_net(_relu_net())
    assert ws.get_net("n") is first
    second = ws.create_net(_relu_net(), overwrite=True)
    assert ws.get_net("n") is second and second is not first
    ws.run_net("n")
    np.testing.assert_array_equal(ws.fetch_blob("Y"), [0.0, 2.0])
    ws.delete_net("n")
    assert ws.nets() == []
    with pytest.raises(NetError, match="no net called 'n'"):
        ws.get_net("n")
