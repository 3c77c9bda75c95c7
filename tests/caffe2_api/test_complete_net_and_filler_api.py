"""ModelHelper.GetCompleteNet / ConstructInitTrainNetfromNet and workspace.FillRandomNetworkInputs."""

from __future__ import annotations

import numpy as np
import pytest

import framework.caffe2 as hook

hook.install()

from caffe2.python import brew, core, model_helper, workspace  # noqa: E402


def test_complete_net_round_trip_keeps_ops_and_type():
    model = model_helper.ModelHelper("orig")
    brew.fc(model, "x", "y", dim_in=4, dim_out=3)
    brew.relu(model, "y", "z")
    model.net.Proto().type = "dag"
    complete = model.GetCompleteNet()
    n_init, n_train = len(model.param_init_net.Proto().op), len(model.net.Proto().op)
    ops = complete.Proto().op
    assert complete.Proto().type == "dag" and len(ops) == n_init + n_train
    assert [op.debug_info.endswith("/param_init_net") for op in ops] == [True] * n_init + [False] * n_train
    other = model_helper.ModelHelper("new")
    other.ConstructInitTrainNetfromNet(complete)
    assert [op.type for op in other.param_init_net.Proto().op] == [op.type for op in model.param_init_net.Proto().op]
    assert list(other.net.Proto().op) == list(model.net.Proto().op)
    assert set(map(str, other.net.Proto().external_input)) == {"x", "y_w", "y_b"}
    workspace.ResetWorkspace()
    workspace.RunNetOnce(other.param_init_net)
    workspace.FeedBlob("x", np.ones((2, 4), np.float32))
    workspace.RunNetOnce(other.net)
    w, b = workspace.FetchBlob("y_w"), workspace.FetchBlob("y_b")
    np.testing.assert_allclose(workspace.FetchBlob("z"), np.maximum(np.ones((2, 4)) @ w.T + b, 0), rtol=1e-5)


def test_fill_random_network_inputs_fills_only_unwritten_inputs():
    workspace.ResetWorkspace()
    net = core.Net("fill")
    net.Concat(["a", "b"], ["c", "split"], axis=0)
    net.Add(["c", "d"], "e")
    workspace.FillRandomNetworkInputs(net, [[(2, 3), (4, 3)], [(1,)]], [["float", "double"], ["int"]])
    a, b, d = (workspace.FetchBlob(n) for n in "abd")
    assert (a.shape, a.dtype, b.shape, b.dtype, d.shape, d.dtype) == ((2, 3), np.float32, (4, 3), np.float64,
                                                                      (1,), np.int32)  # fmt: skip
    assert 0 <= a.min() and a.max() < 1 and set(np.unique(d)) <= {0, 1}
    assert not workspace.HasBlob("c")


def test_fill_random_network_inputs_checks_counts_before_writing():
    workspace.ResetWorkspace()
    net = core.Net("fill_bad")
    net.Concat(["p", "q"], ["r", "s"])
    with pytest.raises(RuntimeError, match="required input"):
        workspace.FillRandomNetworkInputs(net, [[(2,)]], [["float"]])
    with pytest.raises(RuntimeError, match="1 op"):
        workspace.FillRandomNetworkInputs(net, [], [])
    with pytest.raises(ValueError, match="does not support type"):
        workspace.FillRandomNetworkInputs(net, [[(2,), (2,)]], [["float", "complex"]])
    assert not workspace.HasBlob("p") and not workspace.HasBlob("q")
