"""Net.RunAllOnGPU as Caffe2's: the net's device option (not each op's), CUDNN engines on request, and the
step nets of RecurrentNetwork ops tagged the same way; such a net still runs here (on the CPU)."""

from __future__ import annotations

import numpy as np

import framework.caffe2 as hook

hook.install()

from caffe2.python import core, workspace  # noqa: E402


def test_run_all_on_gpu_tags_the_net_and_recurrent_step_nets():
    step = core.Net("step")
    step.Relu(["x"], "y")
    net = core.Net("gpu_net")
    net.RecurrentNetwork(["x"], ["x"], step_net=step.Proto())
    net.Relu(["x"], "z")
    net.RunAllOnGPU(gpu_id=3, use_cudnn=True)
    proto = net.Proto()
    assert (proto.device_option.device_type, proto.device_option.device_id) == (workspace.GpuDeviceType, 3)
    assert all(op.engine == "CUDNN" for op in proto.op)
    assert all(not op.HasField("device_option") for op in proto.op)
    inner = proto.op[0].arg[0].n
    assert (inner.device_option.device_type, inner.device_option.device_id) == (workspace.GpuDeviceType, 3)
    assert inner.op[0].engine == "CUDNN"


def test_a_net_tagged_for_gpu_runs_on_the_cpu():
    workspace.ResetWorkspace()
    net = core.Net("gpu_relu")
    net.Relu(["a"], "b")
    net.RunAllOnGPU(gpu_id=1)
    workspace.FeedBlob("a", np.array([-1.0, 2.0], np.float32))
    workspace.RunNetOnce(net)
    np.testing.assert_array_equal(workspace.FetchBlob("b"), [0.0, 2.0])
