"""The RecurrentNetwork plumbing ops on their own: apply_link views, gradient accumulation, blob fetcher."""

import numpy as np
import pytest

from framework.core import CreateOperator
from framework.errors import FrameworkError
from framework.memory.tensor import Tensor
from framework.memory.workspace import Workspace
from framework.ops import create_operator


def test_apply_link_is_a_view_without_copy():
    ws = Workspace()
    states = np.arange(24, dtype=np.float32).reshape(4, 2, 3)
    ws.feed_blob("S", states)
    ws.feed_blob("t", np.array([1], np.int32))
    ws.run_operator_once(CreateOperator("rnn_internal_apply_link", ["t", "S"], ["s_t", "S"], offset=1, window=2))
    np.testing.assert_array_equal(ws.fetch_blob("s_t"), states[2:4])
    view = ws.get_blob("s_t").get_tensor().data()
    view[...] = -1  # writes through to S
    assert (ws.fetch_blob("S")[2:4] == -1).all()
    ws.feed_blob("t", np.array([3], np.int32))
    with pytest.raises(FrameworkError, match="outside"):
        ws.run_operator_once(CreateOperator("rnn_internal_apply_link", ["t", "S"], ["s_t", "S"], offset=1, window=1))
    with pytest.raises(FrameworkError, match="offset not set"):
        ws.run_operator_once(CreateOperator("rnn_internal_apply_link", ["t", "S"], ["s_t", "S"], window=1))


def test_accumulate_gradient_input():
    ws = Workspace()
    g = np.ones((4, 2, 3), np.float32)
    og = np.arange(18, dtype=np.float32).reshape(3, 2, 3)
    ws.feed_blob("g", g)
    ws.feed_blob("og", og)
    ws.feed_blob("t", np.array([2], np.int32))
    ws.run_operator_once(CreateOperator("rnn_internal_accumulate_gradient_input", ["t", "og", "g"], ["g"], offset=1))
    expected = g.copy()
    expected[3] += og[2]
    np.testing.assert_array_equal(ws.fetch_blob("g"), expected)
    ws.feed_blob("t", np.array([3], np.int32))
    with pytest.raises(FrameworkError, match="cannot add"):
        ws.run_operator_once(
            CreateOperator("rnn_internal_accumulate_gradient_input", ["t", "og", "g"], ["g"], offset=1)
        )
    np.testing.assert_array_equal(ws.fetch_blob("g"), expected)


def test_blob_fetcher_copies_step_blobs():
    from framework.caffe2.python import rnn_cell
    from framework.caffe2.python.model_helper import ModelHelper

    model = ModelHelper(name="m")
    rnn_cell.LSTM(model, "x", None, ("h0", "c0"), 2, 3, scope="l", forward_only=True)
    ws = Workspace()
    ws.feed_blob("x", np.ones((2, 1, 2), np.float32))
    ws.feed_blob("h0", np.zeros((1, 1, 3), np.float32))
    ws.feed_blob("c0", np.zeros((1, 1, 3), np.float32))
    ws.run_net_once(model.param_init_net)
    ws.run_net_once(model.net)
    scratch = [op.output[-1] for op in model.net.Proto().op if op.type == "RecurrentNetwork"][0]
    ws.run_operator_once(CreateOperator("RecurrentNetworkBlobFetcher", [scratch], ["names"], prefix="p"))
    names = [n.decode() for n in ws.fetch_blob("names")]
    assert "p_l/hidden_state1" in names and all(ws.has_blob(n) for n in names)
    np.testing.assert_array_equal(ws.fetch_blob("p_l/timestep1"), [1])


def test_apply_link_of_a_new_geometry_over_the_same_memory_takes_the_new_shape():
    # A later RecurrentNetwork (other window, other batch) may reuse the states buffer and step workspaces:
    # a view [t + offset, t + offset + window) of the same memory and size but another shape is a new view
    # (Caffe2's apply_link sets the internal tensor's dims on every run).
    ws = Workspace()
    buf = np.arange(30, dtype=np.float32)
    ws.feed_blob("t", np.array([0], np.int32))
    ws.create_blob("S").get_mutable(Tensor).share_external(buf.reshape(2, 3, 5))
    ws.run_operator_once(CreateOperator("rnn_internal_apply_link", ["t", "S"], ["s_t", "S"], offset=0, window=1))
    assert ws.fetch_blob("s_t").shape == (1, 3, 5)
    ws.create_blob("S").get_mutable(Tensor).share_external(buf.reshape(6, 1, 5))
    ws.run_operator_once(CreateOperator("rnn_internal_apply_link", ["t", "S"], ["s_t", "S"], offset=0, window=3))
    np.testing.assert_array_equal(ws.fetch_blob("s_t"), buf[:15].reshape(3, 1, 5))


def test_apply_link_keeps_the_shape_a_step_op_gave_its_view_in_place():
    ws = Workspace()
    ws.feed_blob("t", np.array([1], np.int32))
    ws.feed_blob("S", np.arange(12, dtype=np.float32).reshape(3, 2, 2))
    link = create_operator(CreateOperator("rnn_internal_apply_link", ["t", "S"], ["s_t", "S"], offset=0, window=1), ws)
    link.run()
    t = ws.get_blob("s_t").get_tensor()
    t.reshape((2, 2))  # as an op writing its [N, D] output into the linked [1, N, D] blob does
    link.run()
    assert ws.fetch_blob("s_t").shape == (2, 2)
    np.testing.assert_array_equal(ws.fetch_blob("s_t"), [[4, 5], [6, 7]])
