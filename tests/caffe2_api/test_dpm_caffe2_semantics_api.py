"""data_parallel_model as Caffe2 builds it: replicas under name and device scopes, the optimizer built once
over every replica, ConvertNetForDevice, the net transformer for forward-only models, checkpoint params."""

from __future__ import annotations

from unittest.mock import Mock

import numpy as np
import pytest

import framework.caffe2 as hook

hook.install()

from caffe2.proto import caffe2_pb2  # noqa: E402
from caffe2.python import brew, core, data_parallel_model, model_helper, optimizer, workspace  # noqa: E402


def _forward(model, loss_scale):
    brew.fc(model, "data", "fc", dim_in=4, dim_out=3)
    return [model.net.AveragedLoss("fc", "loss")]


def _parallel(devices, **kw):
    model = model_helper.ModelHelper(name="dpm_sem")
    data_parallel_model.Parallelize_CPU(model, input_builder_fun=lambda m: None, forward_pass_builder_fun=_forward,
                                        devices=devices, **kw)  # fmt: skip
    return model


def test_optimizer_runs_once_over_all_replicas_and_checkpoint_params():
    model = _parallel([1, 2], optimizer_builder_fun=lambda m: optimizer.build_sgd(m, 0.1, momentum=0.9))
    updates = [op for op in model.net.Proto().op if op.type == "MomentumSGDUpdate"]
    assert sorted(op.output[1] for op in updates) == sorted(
        f"cpu_{d}/fc_{p}_momentum" for d in (1, 2) for p in ("w", "b")
    )
    fc_ops = [op for op in model.net.Proto().op if op.type == "FC"]
    assert [op.device_option.device_id for op in fc_ops] == [1, 2]
    ckpt = {str(b) for b in data_parallel_model.GetCheckpointParams(model)}
    assert {"cpu_1/fc_w", "cpu_1/fc_b", "cpu_1/fc_w_momentum", "cpu_1/fc_b_momentum", "optimizer_iteration"} <= ckpt
    assert not any(n.startswith("cpu_2/") for n in ckpt)


def test_training_keeps_replicas_equal_to_one_big_batch():
    workspace.ResetWorkspace()
    model = _parallel([0, 1], optimizer_builder_fun=lambda m: optimizer.build_sgd(m, 0.5))
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 4)).astype(np.float32)
    for d in (0, 1):
        workspace.FeedBlob(f"cpu_{d}/data", x[2 * d : 2 * d + 2])
    workspace.RunNetOnce(model.param_init_net)
    w0, b0 = workspace.FetchBlob("cpu_0/fc_w").copy(), workspace.FetchBlob("cpu_0/fc_b").copy()
    workspace.CreateNet(model.net)
    workspace.RunNet(model.net)
    # each replica's loss is the mean of its 2 x 3 outputs (not scaled here); the gradients are summed
    grad_y = np.full((4, 3), 1.0 / 6.0, np.float32)
    w_want = w0 - 0.5 * (grad_y.T @ x)
    for d in (0, 1):
        np.testing.assert_allclose(workspace.FetchBlob(f"cpu_{d}/fc_w"), w_want, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(workspace.FetchBlob(f"cpu_{d}/fc_b"), b0 - 0.5 * grad_y.sum(0), rtol=1e-5)


def test_net_transformer_is_called_once_also_for_forward_only_models():
    for kw in ({}, {"optimizer_builder_fun": lambda m: optimizer.build_sgd(m, 0.1)}):
        transform = Mock()
        model = _parallel([0, 1], net_transformer_fun=transform, **kw)
        transform.assert_called_once_with(model, 2, "cpu", caffe2_pb2.CPU)


def test_parallelize_refuses_a_gpu_device_scope():
    with core.DeviceScope(core.DeviceOption(workspace.GpuDeviceType, 0)):
        with pytest.raises(AssertionError, match="without a device scope"):
            data_parallel_model.Parallelize_GPU(None, None, None)


def test_convert_net_for_device_prefixes_blobs_and_sets_the_device():
    other = model_helper.ModelHelper(name="other")
    brew.fc(other, "x", "y", dim_in=2, dim_out=2)
    with core.DeviceScope(core.DeviceOption(caffe2_pb2.CPU, 3)):
        converted = data_parallel_model.ConvertNetForDevice(other.net)
    op = converted.Proto().op[0]
    assert list(op.input) == ["cpu_3/x", "cpu_3/y_w", "cpu_3/y_b"] and list(op.output) == ["cpu_3/y"]
    assert op.device_option.device_id == 3
    assert list(other.net.Proto().op[0].input) == ["x", "y_w", "y_b"]  # the original is untouched
    with pytest.raises(RuntimeError, match="no device"):
        data_parallel_model.ConvertNetForDevice(other.net)
