"""brew.cond / brew.loop (Caffe2's helpers/control_ops) and the ``caffe2.python.helpers`` modules."""

import numpy as np

import framework.caffe2 as hook
from framework import workspace
from framework.caffe2.python import brew
from framework.caffe2.python.model_helper import ModelHelper


def test_cond_picks_the_branch():
    workspace.ResetWorkspace()
    workspace.FeedBlob("cond", np.array(True))
    workspace.FeedBlob("then_value", np.array(1))
    workspace.FeedBlob("else_value", np.array(2))
    then_model, else_model = ModelHelper(name="h36c_then"), ModelHelper(name="h36c_else")
    then_model.net.Copy("then_value", "output_blob")
    else_model.net.Copy("else_value", "output_blob")
    model = ModelHelper(name="h36c_cond")
    brew.cond(model=model, cond_blob="cond", external_blobs=["then_value", "else_value", "output_blob"],
              then_model=then_model, else_model=else_model)  # fmt: skip
    assert [op.type for op in model.net.Proto().op][-1] == "If"
    workspace.RunNetOnce(model.net)
    assert workspace.FetchBlob("output_blob") == 1
    workspace.FeedBlob("cond", np.array(False))
    workspace.RunNetOnce(model.net)
    assert workspace.FetchBlob("output_blob") == 2
    workspace.ResetWorkspace()


def test_loop_runs_while_condition_holds():
    workspace.ResetWorkspace()
    for name, v in [("cond", True), ("ONE", 1), ("THREE", 3), ("LIMIT", 4), ("counter", 0), ("acc", 0)]:
        workspace.FeedBlob(name, np.array(v))
    body = ModelHelper(name="h36c_body")
    body.net.Add(["acc", "THREE"], "acc")
    check = ModelHelper(name="h36c_check")
    check.net.Add(["counter", "ONE"], "counter")
    check.net.Copy(check.net.LT(["counter", "LIMIT"]), "cond")
    model = ModelHelper(name="h36c_loop")
    brew.loop(model, "cond", ["cond", "ONE", "THREE", "LIMIT", "counter", "acc"], body, check)
    workspace.RunNetOnce(model.net)
    # the condition is recomputed before each pass: counter 1, 2, 3 pass, 4 stops -> 3 passes of +3
    assert workspace.FetchBlob("acc") == 9 and workspace.FetchBlob("counter") == 4
    workspace.ResetWorkspace()


def test_helpers_modules_as_caffe2_lays_them_out():
    hook.install()
    try:
        from caffe2.python.helpers import algebra, arg_scope, control_ops, conv, fc, normalization, train

        assert fc.fc is brew.fc and conv.conv is brew.conv and control_ops.cond is brew.cond
        assert normalization.spatial_bn is brew.spatial_bn and train.iter is brew.iter and algebra.sum is brew.sum
        assert arg_scope.get_current_scope() == {}
        with arg_scope.arg_scope([brew.fc], axis=2):
            assert arg_scope.get_current_scope() == {"fc": {"axis": 2}}
            m = ModelHelper(name="h36c_scope")
            brew.fc(m, "x", "y", dim_in=2, dim_out=3)
            assert [(a.name, a.i) for a in m.net.Proto().op[-1].arg] == [("axis", 2)]
        assert arg_scope.get_current_scope() == {}
    finally:
        hook.uninstall()
