"""core / workspace names Caffe2 scripts use."""

import numpy as np

from framework import core, workspace
from framework.proto import caffe2_pb2


def test_is_operator_and_device_types():
    assert core.IsOperator("FC") and not core.IsOperator("NoSuchOp")
    assert core.IsGPUDeviceType(caffe2_pb2.CUDA) and core.IsGPUDeviceType(caffe2_pb2.HIP)
    assert not core.IsGPUDeviceType(caffe2_pb2.CPU)


def test_create_operator_takes_any_iterable():
    op = core.CreateOperator("Tile", ["X"], ["Y"], tiles=2, axes=range(3), scales=(x / 2 for x in range(2)))
    args = {a.name: a for a in op.arg}
    assert list(args["axes"].ints) == [0, 1, 2] and list(args["scales"].floats) == [0.0, 0.5]


def test_get_backward_pass_returns_blob_references():
    net = core.Net("bp")
    net.FC(["x", "w", "b"], "y")
    ops, grads = core.GradientRegistry.GetBackwardPass(net.Proto().op, {"y": "y_grad"})
    assert [o.type for o in ops] == ["FCGradient"]
    assert all(isinstance(k, core.BlobReference) and isinstance(v, core.BlobReference) for k, v in grads.items())
    assert grads["w"] == "w_grad" and "y" in grads


def test_workspace_cpu_answers_and_c():
    assert workspace.has_gpu_support is False and workspace.has_cuda_support is False
    assert workspace.has_hip_support is False and workspace.NumCudaDevices() == 0
    assert workspace.NumGpuDevices() == 0 and workspace.GetCuDNNVersion() == 0
    assert workspace.GpuDeviceType == caffe2_pb2.CUDA
    assert "FC" in workspace.RegisteredOperators() and workspace.GlobalInit(["caffe2", "--caffe2_log_level=0"])
    assert workspace.C.has_mkldnn is False
    assert workspace.C() is workspace.C.Workspace.current is workspace.Workspace.current
    assert isinstance(workspace.C(), workspace.Workspace) and isinstance(workspace.Workspace(), workspace.C.Workspace)


def test_stringify_and_blobs_mapping():
    net = core.Net("sp")
    assert workspace.StringifyProto("x") == "x"
    assert workspace.StringifyProto(net) == net.Proto().SerializeToString()
    assert workspace.StringifyBlobName(core.BlobReference("b")) == "b" and workspace.StringifyNetName(net) == net.Name()
    assert workspace.GetNetName(net.Proto()) == net.Name() == workspace.GetNetName(net)
    workspace.ResetWorkspace()
    workspace.blobs["k"] = np.ones(2, np.float32)
    assert "k" in workspace.blobs and list(workspace.blobs) == ["k"] and len(workspace.blobs) == 1
    np.testing.assert_array_equal(workspace.blobs["k"], np.ones(2, np.float32))


def test_switch_workspace_semantics():
    start = workspace.CurrentWorkspace()
    with workspace.WorkspaceGuard("guarded_ws"):
        assert workspace.CurrentWorkspace() == "guarded_ws" and workspace.Blobs() == []
    assert workspace.CurrentWorkspace() == start
    try:
        workspace.SwitchWorkspace("never_created_ws")
    except RuntimeError as e:  # Caffe2 code catches RuntimeError
        assert "does not exist" in str(e)
    else:
        raise AssertionError("switched to a missing workspace")


def test_engine_prefs_are_accepted():
    core.SetEnginePref({caffe2_pb2.CUDA: {"Conv": ["CUDNN"]}}, {caffe2_pb2.CUDA: ["CUDNN"]})
    core.SetOpEnginePref("Conv", {caffe2_pb2.CPU: ["NNPACK"]})
    assert core._ENGINE_PREF["per_op"]["Conv"] == {caffe2_pb2.CPU: ["NNPACK"]}
    assert core._ENGINE_PREF["global"] == {caffe2_pb2.CUDA: ["CUDNN"]}
    core.SetEnginePref({}, {})
    assert core._ENGINE_PREF == {"per_op": {}, "global": {}}
