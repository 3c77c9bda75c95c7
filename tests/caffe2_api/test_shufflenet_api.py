"""caffe2.python.models.shufflenet: ShuffleNet V2's structure and Caffe2 names, and a forward pass whose
unit plumbing (concat of right then left branch, channel shuffle by 2) matches a numpy reference."""

import numpy as np

from framework import workspace
from framework.caffe2.python import model_helper
from framework.caffe2.python.models import shufflenet


def _types(model):
    return [op.type for op in model.net.Proto().op]


def test_structure_and_names():
    model = model_helper.ModelHelper(name="h36b_shuffle")
    out = shufflenet.create_shufflenet(model, "data", 3, 10, no_loss=True)
    assert str(out) == "last_out_L10"
    types = _types(model)
    # stage1 + 3 down-sampling units x 5 convs + 13 basic units x 3 convs + conv5
    assert types.count("Conv") == 1 + 15 + 39 + 1 and types.count("SpatialBN") == 15 + 39
    assert types.count("ChannelShuffle") == 16 and types.count("Split") == 13 and types.count("Concat") == 16
    outputs = {o for op in model.net.Proto().op for o in op.output}
    assert {
        "stage2_stride2left_dwconv",
        "stage3_stride1_repeat7_right_conv2_bn",
        "stage4_stride2_ch_shuffle",
    } <= outputs
    params = {str(p) for p in model.params}
    assert "stage1_conv_w" in params and "conv5_w" in params and "last_out_L10_w" in params
    assert shufflenet.create_shufflenet(model_helper.ModelHelper(name="h36b_s2"), "data", 3, 10, is_test=True) is None


def test_forward_and_unit_plumbing():
    workspace.ResetWorkspace()
    model = model_helper.ModelHelper(name="h36b_shuffle_run")
    softmax, loss = shufflenet.create_shufflenet(model, "data", 3, 5, label="label", is_test=True)
    workspace.RunNetOnce(model.param_init_net)
    rng = np.random.RandomState(0)
    for p in model.params:
        if str(p).endswith("_riv"):
            workspace.FeedBlob(str(p), np.ones_like(workspace.FetchBlob(str(p))))
    workspace.FeedBlob("data", rng.rand(1, 3, 224, 224).astype(np.float32))
    workspace.FeedBlob("label", np.array([2], np.int32))
    workspace.RunNetOnce(model.net)
    probs = workspace.FetchBlob(str(softmax))
    assert probs.shape == (1, 5) and abs(probs.sum() - 1.0) < 1e-5 and np.isfinite(workspace.FetchBlob(str(loss)))
    right = workspace.FetchBlob("stage3_stride1_repeat2_right_conv2_bn")  # after BN and the in-place ReLU
    left = workspace.FetchBlob("stage3_stride1_repeat2_left")
    joined = np.concatenate([right, left], axis=1)
    n, c, h, w = joined.shape
    expected = joined.reshape(n, 2, c // 2, h, w).transpose(0, 2, 1, 3, 4).reshape(n, c, h, w)
    np.testing.assert_array_equal(workspace.FetchBlob("stage3_stride1_repeat2_ch_shuffle"), expected)
