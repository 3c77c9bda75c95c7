"""data_parallel_model_utils: activations of a replicated model, and shifting ops to other devices."""

import pytest

from framework import workspace
from framework.caffe2.python import brew, data_parallel_model, model_helper, optimizer
from framework.caffe2.python import data_parallel_model_utils as dpm_utils


def _model():
    workspace.ResetWorkspace()
    model = model_helper.ModelHelper(name="h36c_shift")

    def build(m, loss_scale):
        blob = "data"
        for i in range(1, 4):
            blob = brew.fc(m, blob, f"fc{i}", dim_in=4, dim_out=4)
        return [m.net.SumElements([blob], ["loss"])]

    data_parallel_model.Parallelize_GPU(
        model,
        input_builder_fun=lambda m: m.param_init_net.UniformFill([], ["data"], shape=[8, 4]),
        forward_pass_builder_fun=build,
        optimizer_builder_fun=lambda m: optimizer.build_sgd(m, 0.1, policy="fixed"),
        devices=[0, 1],
    )
    return model


def test_activation_blobs_of_first_replica():
    # "loss" too: Parallelize seeds each replica's loss gradient as "<loss>_grad", as Caffe2 does
    assert dpm_utils.GetActivationBlobs(_model()) == ["fc1", "fc2", "fc3", "loss"]


def test_shift_moves_the_ops_of_the_given_activations():
    model = _model()
    for op in model.net.Proto().op:
        for b in op.output:
            if b.startswith("gpu_1/"):
                op.device_option.device_id = 1
    dpm_utils.ShiftActivationDevices(model, ["fc3"], {0: 2, 1: 3})
    device_of = {}
    for op in model.net.Proto().op:
        for b in op.output:
            device_of[b] = op.device_option.device_id
    assert device_of["gpu_0/fc3"] == 2 and device_of["gpu_1/fc3"] == 3
    assert device_of["gpu_0/fc1"] == 0 and device_of["gpu_1/fc1"] == 1
    init_device = {op.output[0]: op.device_option.device_id for op in model.param_init_net.Proto().op}
    assert init_device["gpu_0/fc3_w"] == 2 and init_device["gpu_0/fc1_w"] == 0
    with pytest.raises(ValueError, match="both a source and a target"):
        dpm_utils.ShiftActivationDevices(model, ["fc3"], {0: 1, 1: 2})
    workspace.ResetWorkspace()
