"""caffe2.python.models.resnet: ResNet-50's structure and names, and a small ResNet that runs and trains."""

import numpy as np
import pytest

from framework import core, workspace
from framework.caffe2.python.model_helper import ModelHelper
from framework.caffe2.python.models import resnet


def _types(model):
    return [op.type for op in model.net.Proto().op]


def test_resnet50_structure_and_caffe2_names():
    model = ModelHelper(name="h36c_r50")
    out = resnet.create_resnet50(model, "data", num_input_channels=3, num_labels=1000, no_loss=True)
    assert str(out) == "last_out_L1000"
    types = _types(model)
    # 1 + 3 * 16 convolutions plus 4 projections; a BN after each; 16 residual sums; one FC
    assert types.count("Conv") == 53 and types.count("SpatialBN") == 53
    assert types.count("Sum") == 16 and types.count("FC") == 1 and types.count("MaxPool") == 1
    params = {str(p) for p in model.params}
    assert {"conv1_w", "conv1_b", "comp_0_conv_1_w", "shortcut_projection_0_w", "comp_15_spatbn_3_s"} <= params
    fills = {op.output[0]: op.type for op in model.param_init_net.Proto().op}
    assert fills["comp_3_conv_2_w"] == "MSRAFill"
    strides = {op.output[0]: [a.i for a in op.arg if a.name == "stride"] for op in model.net.Proto().op}
    assert strides["comp_3_conv_2"] == [2] and strides["comp_4_conv_2"] == [1]  # stage 2 starts at component 3
    with pytest.raises(ValueError, match="invalid for resnext"):
        resnet.create_resnext(ModelHelper(name="h36c_bad"), "data", 3, 10, num_layers=42, num_groups=1,
                              num_width_per_group=4)  # fmt: skip


def test_resnet_32x32_runs_and_trains():
    workspace.ResetWorkspace()
    model = ModelHelper(name="h36c_r32", arg_scope={"order": "NCHW"})
    softmax = resnet.create_resnet_32x32(model, "data", num_input_channels=3, num_groups=1, num_labels=4)
    loss = model.net.AveragedLoss(model.net.LabelCrossEntropy([softmax, "label"], "xent"), "loss")
    model.AddGradientOperators([loss])
    for p in model.params:
        model.net.WeightedSum([p, "ONE", model.param_to_grad[p], "LR"], p)
    rng = np.random.default_rng(0)
    workspace.FeedBlob("data", rng.standard_normal((4, 3, 32, 32)).astype(np.float32))
    workspace.FeedBlob("label", np.arange(4, dtype=np.int32))
    workspace.FeedBlob("ONE", np.ones(1, np.float32))
    workspace.FeedBlob("LR", np.full(1, -0.05, np.float32))
    workspace.RunNetOnce(model.param_init_net)
    workspace.CreateNet(model.net)
    losses = []
    for _ in range(4):
        workspace.RunNet(model.net.Name())
        losses.append(float(workspace.FetchBlob("loss")))
    probs = workspace.FetchBlob(str(softmax))
    assert probs.shape == (4, 4)
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, rtol=1e-5)
    assert losses[-1] < losses[0]
    assert core.Net(model.net.Proto()).Name() != model.net.Name()
    workspace.ResetWorkspace()
