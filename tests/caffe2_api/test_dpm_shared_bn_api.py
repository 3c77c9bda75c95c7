"""data_parallel_model's CPU options: shared_model (one set of parameters read by every replica) and
combine_spatial_bn (batch statistics over all replicas), against numpy written from their definitions."""

from __future__ import annotations

import numpy as np
import pytest

import framework.caffe2 as hook

hook.install()

from caffe2.python import brew, data_parallel_model, model_helper, optimizer, workspace  # noqa: E402


def _fc_model(devices, shared, lr=0.5):
    model = model_helper.ModelHelper(name="dpm_shared")

    def forward(m, loss_scale):
        brew.fc(m, "data", "fc", dim_in=3, dim_out=2)
        return [m.net.Scale(m.net.AveragedLoss("fc", "l"), "loss", scale=loss_scale)]

    data_parallel_model.Parallelize_CPU(model, input_builder_fun=lambda m: None, forward_pass_builder_fun=forward,
                                        optimizer_builder_fun=lambda m: optimizer.build_sgd(m, lr),
                                        devices=devices, shared_model=shared)  # fmt: skip
    return model


def test_shared_model_keeps_one_parameter_set_and_trains_like_one_batch():
    workspace.ResetWorkspace()
    model = _fc_model([0, 1, 2], shared=True)
    names = {o for net in (model.param_init_net, model.net) for op in net.Proto().op for o in op.output}
    assert "cpu_0/fc_w" in names and not {"cpu_1/fc_w", "cpu_2/fc_w", "cpu_1/fc_b"} & names
    reads = {i for op in model.net.Proto().op if op.type == "FC" for i in op.input}
    assert {"cpu_0/fc_w", "cpu_0/fc_b"} <= reads and not any(r.startswith("cpu_1/fc_") for r in reads)
    rng = np.random.default_rng(3)
    x = rng.standard_normal((6, 3)).astype(np.float32)
    for d in range(3):
        workspace.FeedBlob(f"cpu_{d}/data", x[2 * d : 2 * d + 2])
    workspace.RunNetOnce(model.param_init_net)
    w0, b0 = workspace.FetchBlob("cpu_0/fc_w").copy(), workspace.FetchBlob("cpu_0/fc_b").copy()
    workspace.CreateNet(model.net)
    workspace.RunNet(model.net)
    # mean over all 6 x 2 outputs: every replica's 2 x 2 mean scaled by 1/3
    grad_y = np.full((6, 2), 1.0 / 12.0)
    np.testing.assert_allclose(workspace.FetchBlob("cpu_0/fc_w"), w0 - 0.5 * grad_y.T @ x, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(workspace.FetchBlob("cpu_0/fc_b"), b0 - 0.5 * grad_y.sum(0), rtol=1e-5, atol=1e-6)


def test_shared_model_needs_cpu_devices():
    model = model_helper.ModelHelper(name="dpm_gpu_shared")
    with pytest.raises(AssertionError, match="only supported on CPU"):
        data_parallel_model.Parallelize_GPU(model, lambda m: None, lambda m, s: [], devices=[0], shared_model=True)


def test_combine_spatial_bn_normalizes_with_the_whole_batch():
    workspace.ResetWorkspace()
    eps = 1e-3
    rng = np.random.default_rng(5)
    x = [rng.standard_normal((3, 2, 2, 2)).astype(np.float32) for _ in range(2)]
    model = model_helper.ModelHelper(name="dpm_bn")

    def forward(m, loss_scale):
        brew.spatial_bn(m, "data", "bn", 2, epsilon=eps, is_test=False)
        return [m.net.SumElements(m.net.Sqr("bn", "sq"), "loss")]

    data_parallel_model.Parallelize_CPU(model, input_builder_fun=lambda m: None, forward_pass_builder_fun=forward,
                                        optimizer_builder_fun=lambda m: optimizer.build_sgd(m, 0.1),
                                        devices=[0, 1], combine_spatial_bn=True)  # fmt: skip
    types = [op.type for op in model.net.Proto().op]
    assert types.count("ChannelStats") == 2 and types.count("ChannelBackpropStats") == 2
    for d in (0, 1):
        workspace.FeedBlob(f"cpu_{d}/data", x[d])
    workspace.RunNetOnce(model.param_init_net)
    scale, bias = workspace.FetchBlob("cpu_0/bn_s").copy(), workspace.FetchBlob("cpu_0/bn_b").copy()
    workspace.RunNetOnce(model.net)
    full = np.concatenate(x).astype(np.float64)
    mean = full.mean(axis=(0, 2, 3), keepdims=True)
    var = full.var(axis=(0, 2, 3), keepdims=True)
    s, b = scale.reshape(1, -1, 1, 1), bias.reshape(1, -1, 1, 1)
    for d in (0, 1):
        want = s * (x[d] - mean) / np.sqrt(var + eps) + b
        np.testing.assert_allclose(workspace.FetchBlob(f"cpu_{d}/bn"), want, rtol=1e-4, atol=1e-4)
    # loss = sum(y^2) over both replicas: dL/dbias = sum of 2 y over the whole batch, the same on both
    y = np.concatenate([s * (xd - mean) / np.sqrt(var + eps) + b for xd in x])
    for d in (0, 1):
        np.testing.assert_allclose(workspace.FetchBlob(f"cpu_{d}/bn_b_grad"), (2 * y).sum(axis=(0, 2, 3)),
                                   rtol=1e-3, atol=1e-3)  # fmt: skip
