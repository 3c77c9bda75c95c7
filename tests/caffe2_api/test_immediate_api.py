"""Caffe2's immediate mode: between StartImmediate and StopImmediate every op created (by CreateOperator,
by a Net, and the gradient ops AddGradientOperators adds) also runs at once in its own workspace."""

import os

import numpy as np

from framework import core, workspace


def test_ops_run_as_they_are_created(capsys):
    workspace.ResetWorkspace()
    assert not workspace.IsImmediate()
    workspace.StartImmediate()
    assert "Immediate mode is on" in capsys.readouterr().out
    try:
        root = workspace._immediate["root"]
        assert os.path.isdir(root)
        workspace.FeedImmediate("x", np.array([-1.0, 2.0], np.float32))
        core.CreateOperator("Relu", ["x"], ["y"])
        np.testing.assert_array_equal(workspace.FetchImmediate("y"), [0.0, 2.0])
        net = core.Net("h36c_immediate")
        net.Scale(["y"], ["z"], scale=3.0)
        np.testing.assert_array_equal(workspace.FetchImmediate("z"), [0.0, 6.0])
        net.SumElements(["z"], ["loss"])
        net.AddGradientOperators(["loss"])
        # d loss / d y = 3 * 1 (Scale's gradient ran in the immediate workspace)
        np.testing.assert_array_equal(workspace.FetchImmediate("y_grad"), [3.0, 3.0])
        assert {"x", "y", "z", "loss"} <= set(workspace.ImmediateBlobs())
        # the user's own workspace saw none of it
        assert workspace.CurrentWorkspace() == "default" and not workspace.HasBlob("y")
        workspace.StartImmediate(i_know=True)  # restarts, empty
        assert workspace.ImmediateBlobs() == [] and not os.path.exists(root)
        assert capsys.readouterr().out == ""
    finally:
        workspace.StopImmediate()
    assert not workspace.IsImmediate() and not os.path.exists(workspace._immediate["root"] or root)
    core.CreateOperator("Relu", ["nothing_fed"], ["out"])  # not immediate any more: nothing runs
    workspace.StopImmediate()  # a second stop is a no-op, as in Caffe2
