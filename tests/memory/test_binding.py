"""The one invalidation rule of the run path (framework.memory.binding), planner-owned blobs flagged on the
Blob, and packed weights owned by their workspace."""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest

from framework.caffe2.python.core import CreateOperator
from framework.errors import FrameworkError, ShapeError
from framework.memory.binding import all_hold, bind, matches, stamp
from framework.memory.blob import PLANNED_ARG, Blob
from framework.memory.tensor import Tensor
from framework.memory.workspace import Workspace
from framework.net.memory_planner import optimize_inference_net
from framework.ops.operator import Operator
from framework.ops.registry import has_op, register_op
from framework.ops.schema import UNKNOWN
from framework.proto.framework_pb2 import NetDef


def _filled(shape, value=1.0) -> Blob:
    b = Blob("b")
    t = b.get_mutable(Tensor)
    t.resize(shape)
    t.mutable_data(np.float32)[...] = value
    return b


def test_stamp_follows_writes_storage_and_identity_and_holds_the_tensor_weakly():
    t = _filled((3,)).get_tensor()
    s = stamp(t)
    assert matches(s, t) and not matches(None, t) and not matches(s, None)
    assert not matches(s, Tensor.from_numpy(np.ones(3, np.float32)))  # another tensor, same values
    t.mutable_data(np.float32)  # a write
    assert not matches(s, t)
    s = stamp(t)
    other = Tensor.from_numpy(np.zeros(3, np.float32))
    t.share_data(other)  # another storage
    assert not matches(s, t)
    ref = weakref.ref(t)
    s = stamp(t)
    del t, other
    gc.collect()
    assert ref() is None and not matches(s, None)


def test_binding_holds_while_tensor_storage_and_view_stay():
    b = _filled((4,))
    g = bind(b)
    assert all_hold((g,))
    b.get_tensor().mutable_data(np.float32)  # same view, new values: still bound
    assert all_hold((g,))
    b.get_tensor().reshape((2, 2))  # a new view of the same storage
    assert not all_hold((g,))
    b2 = _filled((4,))
    g2 = bind(b2)
    b2.reset(Tensor.from_numpy(np.ones(4, np.float32)))  # another tensor
    assert not all_hold((g2,))


def test_planner_owned_blob_is_bound_to_its_buffer_not_its_view():
    b = _filled((8,))
    b.planned = True
    g = bind(b)
    t = b.get_tensor()
    t.resize((2, 3))  # shrinks: keeps the buffer, a new view of it
    t.mutable_data(np.float32)
    assert all_hold((g,))
    t.resize((64,))  # grows: a new buffer
    t.mutable_data(np.float32)
    assert not all_hold((g,))


def test_planner_flags_its_blobs_through_the_net_def():
    net = NetDef(name="p", external_input=["x"], external_output=["z"])
    net.op.extend(
        [
            CreateOperator("Relu", ["x"], ["a"]),
            CreateOperator("Sigmoid", ["a"], ["b"]),
            CreateOperator("Tanh", ["b"], ["z"]),
        ]
    )
    opt, _ = optimize_inference_net(net, shapes={"x": (4, 5)})
    names = [s.decode() for a in opt.arg if a.name == PLANNED_ARG for s in a.strings]
    assert names and all(n.startswith("__m") for n in names)
    ws = Workspace()
    x = np.linspace(-2, 2, 20, dtype=np.float32).reshape(4, 5)
    ws.feed_blob("x", x)
    ws.create_net(opt).run()
    assert all(ws.get_blob(n).planned for n in names)
    assert not ws.get_blob("x").planned and not ws.get_blob("z").planned
    np.testing.assert_allclose(ws.fetch_blob("z"), np.tanh(1 / (1 + np.exp(-np.maximum(x, 0)))), rtol=1e-6)


if not has_op("_TestWriteThenFail"):

    @register_op(
        "_TestWriteThenFail",
        inputs=1,
        outputs=1,
        infer=lambda args, ins: [UNKNOWN],
        private=True,
    )
    class _TestWriteThenFail(Operator):
        """Writes 99s in output 0, shaped as input 0, then fails."""

        def run(self) -> None:
            self.output(0, self.input(0).shape, np.float32)[...] = 99
            raise ShapeError(f"{self.describe()}: fails after writing its output")


@pytest.mark.parametrize("name", ["__m0_shared", "y"])
def test_a_user_blob_named_like_a_planner_buffer_keeps_its_rollback(name):
    # the new, smaller shape fits the old buffer, which only a planner-owned blob may reuse in place
    ws = Workspace()
    ws.feed_blob("x", np.ones((2, 3), np.float32))
    ws.feed_blob(name, np.arange(16, dtype=np.float32))
    with pytest.raises(FrameworkError, match="fails after writing"):
        ws.run_operator_once(CreateOperator("_TestWriteThenFail", ["x"], [name]))
    assert not ws.get_blob(name).planned
    np.testing.assert_array_equal(ws.fetch_blob(name), np.arange(16, dtype=np.float32))


def _fc_net(ws: Workspace, name: str) -> None:
    rng = np.random.default_rng(0)
    ws.feed_blob("x", rng.standard_normal((8, 16)).astype(np.float32))
    ws.feed_blob("w", rng.standard_normal((32, 16)).astype(np.float32))
    ws.feed_blob("b", rng.standard_normal(32).astype(np.float32))
    net = NetDef(name=name, external_input=["x", "w", "b"], external_output=["y"])
    net.op.extend([CreateOperator("FC", ["x", "w", "b"], ["y"])])
    ws.create_net(net)


def test_weight_packs_belong_to_the_workspace_and_no_pack_outlives_it():
    ws = Workspace()
    _fc_net(ws, "fc")
    for _ in range(3):  # the weight is packed once seen unchanged
        ws.run_net("fc")
    x, w, b = (ws.fetch_blob(n) for n in "xwb")
    np.testing.assert_allclose(ws.fetch_blob("y"), x @ w.T + b, rtol=1e-5, atol=1e-5)
    packs = ws.packs
    assert len(packs) == 1
    refs = [weakref.ref(a) for a in packs.arrays()]
    np.testing.assert_array_equal(packs.arrays()[0], w.T)
    child = Workspace(parent=ws)
    assert child.packs is packs  # a child workspace shares its root's packs
    other = Workspace()
    _fc_net(other, "fc")
    for _ in range(3):
        other.run_net("fc")
    assert other.packs is not packs and len(other.packs) == 1
    del ws, child, packs
    gc.collect()
    assert all(r() is None for r in refs)
    assert len(other.packs) == 1


def test_a_changed_weight_is_packed_again():
    ws = Workspace()
    _fc_net(ws, "fc")
    for _ in range(3):
        ws.run_net("fc")
    w2 = np.full((32, 16), 0.5, np.float32)
    ws.feed_blob("w", w2)
    for _ in range(3):
        ws.run_net("fc")
        x, b = ws.fetch_blob("x"), ws.fetch_blob("b")
        np.testing.assert_allclose(ws.fetch_blob("y"), x @ w2.T + b, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(ws.packs.arrays()[0], w2.T)
