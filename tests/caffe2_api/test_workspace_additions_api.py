"""caffe2.python.workspace: the parts Caffe2's workspace_test drives: C.Workspace's blobs/nets maps,
Blob.tensor() views, op cost, C++ transforms, background plans, immediate mode's folder name."""

import os

import numpy as np
import pytest

from framework import core, workspace
from framework.errors import FrameworkError
from framework.proto import caffe2_pb2


def test_c_workspace_maps_and_create_net():
    ws = workspace.C.Workspace()
    assert ws.nets == {} and ws.blobs == {}
    net = core.Net("h36b_wsmap")
    net.ConstantFill([], "ones", shape=[2], value=1.0)
    created = ws.create_net(net)
    with pytest.raises(RuntimeError):
        ws.create_net(net)  # exists already
    ws.create_net(net, True)
    assert list(ws.nets) == [net.Name()] and net.Name() in ws.nets and len(ws.nets) == 1
    assert created is not None
    ws.nets[net.Name()].run()
    assert "ones" in ws.blobs and ws.blobs == {"ones": ws.blobs["ones"]}
    np.testing.assert_array_equal(ws.blobs["ones"].fetch(), [1.0, 1.0])
    assert ws.blobs() == ["ones"] and ws.nets() == [net.Name()]  # still callable
    with pytest.raises(TypeError):
        ws.create_net("not a net")
    assert "ones" not in workspace.C.Workspace.current.blobs or workspace.C.Workspace.current is not ws


def test_current_workspace_is_a_c_workspace():
    workspace.ResetWorkspace()
    current = workspace.C.Workspace.current
    assert "h36b_x" not in current.blobs
    workspace.FeedBlob("h36b_x", np.ones(3, np.float32))
    assert "h36b_x" in current.blobs
    workspace.ResetWorkspace()
    assert "h36b_x" not in workspace.C.Workspace.current.blobs


def test_net_with_empty_name_set_explicitly():
    workspace.ResetWorkspace()
    net_def = caffe2_pb2.NetDef(name="")
    net_def.op.add().CopyFrom(core.CreateOperator("ConstantFill", [], ["e"], shape=[1], value=3.0))
    workspace.CreateNet(net_def)
    workspace.RunNet("")
    assert workspace.FetchBlob("e")[0] == 3.0
    unnamed = caffe2_pb2.NetDef()
    with pytest.raises(FrameworkError, match="no name"):
        workspace.CreateNet(unnamed)


def test_run_operator_once_from_bytes():
    workspace.ResetWorkspace()
    op = core.CreateOperator("ConstantFill", [], ["b"], shape=[2], value=5.0)
    assert workspace.RunOperatorOnce(op.SerializeToString()) is True
    np.testing.assert_array_equal(workspace.FetchBlob("b"), [5.0, 5.0])


def test_blob_tensor_handle():
    ws = workspace.C.Workspace()
    ws.create_blob("t").feed(np.array([1.0, 2.0, 3.0]))
    handle = ws.blobs["t"].tensor()
    handle.data[0] = 9.0  # a view: the blob changes
    np.testing.assert_array_equal(ws.blobs["t"].fetch(), [9.0, 2.0, 3.0])
    handle.init([2, 2], caffe2_pb2.TensorProto.INT32)
    handle.data[1, 0] = 7
    np.testing.assert_array_equal(ws.blobs["t"].fetch(), np.array([[0, 0], [7, 0]], np.int32))
    assert handle._shape == [2, 2]
    with pytest.raises(RuntimeError):
        handle.init([1], caffe2_pb2.TensorProto.STRING)
    value = np.array([4.0, 5.0])
    handle.feed(value)
    value[0] = -1.0  # fed as a copy
    np.testing.assert_array_equal(handle.data, [4.0, 5.0])


def test_get_operator_cost_of_a_conv():
    workspace.ResetWorkspace()
    workspace.FeedBlob("X", np.zeros((1, 2, 5, 5), np.float32))
    workspace.FeedBlob("W", np.zeros((3, 2, 3, 3), np.float32))
    op = core.CreateOperator("Conv", ["X", "W"], ["Y"], kernel=3)
    flops, written = workspace.GetOperatorCost(op.SerializeToString(), ["X", "W"])
    # Y is 1x3x3x3 = 27 values, each a dot product of 2 * 3 * 3 = 18 products and sums
    assert flops == 2 * 27 * 18 and written == 27 * 4


def test_apply_transform():
    net = core.Net("h36b_tr")
    net.Conv(["X", "w", "b"], ["Y"], kernel=3, engine="CUDNN")
    net.Relu(["Y"], ["Z"])
    gpu = net.Conv(["X", "w", "b"], ["Y2"], kernel=3)
    del gpu
    net.Proto().op[-1].device_option.device_type = caffe2_pb2.CUDA
    out = workspace.ApplyTransform("ConvToNNPack", net.Proto())
    assert [op.engine for op in out.op] == ["NNPACK", "", ""]
    assert net.Proto().op[0].engine == "CUDNN"  # the input is left as it was
    with pytest.raises(RuntimeError, match="no transform called"):
        workspace.ApplyTransform("not_a_transform", net.Proto())


def test_apply_transform_if_faster_returns_a_working_net():
    workspace.ResetWorkspace()
    init = core.Net("h36b_init")
    init.ConstantFill([], ["data"], shape=[1, 2, 5, 5], value=1.0)
    init.ConstantFill([], ["w"], shape=[2, 2, 3, 3], value=1.0)
    init.ConstantFill([], ["b"], shape=[2], value=0.5)
    net = core.Net("h36b_fast")
    net.Conv(["data", "w", "b"], ["y"], kernel=3)
    out = workspace.ApplyTransformIfFaster("ConvToNNPack", net.Proto(), init.Proto(), warmup_runs=1, main_runs=2)
    assert [op.type for op in out.op] == ["Conv"] and out.op[0].engine in ("", "NNPACK")
    workspace.RunNetOnce(out)
    np.testing.assert_allclose(workspace.FetchBlob("y"), np.full((1, 2, 3, 3), 18.5))
    out = workspace.ApplyTransformIfFaster(
        "ConvToNNPack", net.Proto(), init.Proto(), warmup_runs=0, main_runs=1, improvement_threshold=1e9
    )
    assert out.op[0].engine == ""  # never "faster" by a factor of 1e9


def test_run_plan_in_background():
    workspace.ResetWorkspace()
    net = core.Net("h36b_bg")
    net.ConstantFill([], "bg", shape=[1], value=2.0)
    plan = core.Plan("h36b_bg_plan")
    plan.AddStep(core.ExecutionStep("step", net))
    handle = workspace.RunPlanInBackground(plan)
    handle.wait()
    assert handle.is_done() and handle.is_succeeded()
    assert workspace.FetchBlob("bg")[0] == 2.0
    bad = core.Net("h36b_bg_bad")
    bad.Relu(["missing"], ["r"])
    plan = core.Plan("h36b_bg_bad_plan")
    plan.AddStep(core.ExecutionStep("step", bad))
    handle = workspace.RunPlanInBackground(plan)
    handle.wait()
    assert handle.is_done() and not handle.is_succeeded() and handle.error is not None


def test_immediate_root_folder_name():
    workspace.StartImmediate(i_know=True)
    try:
        folder = workspace._immediate_root_folder
        assert folder and os.path.isdir(folder)
    finally:
        workspace.StopImmediate()
    assert workspace._immediate_root_folder == "" and not os.path.exists(folder)


def test_get_blob_size_bytes():
    workspace.ResetWorkspace()
    for dtype in (np.float16, np.float32, np.int64, np.uint8, np.bool_):
        workspace.FeedBlob("sz", np.zeros((2, 3), dtype))
        assert workspace.GetBlobSizeBytes("sz") == 6 * np.dtype(dtype).itemsize
    workspace.FeedBlob("s1", np.array([b"Hello World!", b"abcd"], dtype=object))
    workspace.FeedBlob("s2", np.array([b"element1", b"element2"], dtype=object))
    assert workspace.GetBlobSizeBytes("s1") - workspace.GetBlobSizeBytes("s2") == (12 + 4) - (8 + 8)
