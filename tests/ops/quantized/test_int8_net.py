"""A whole int8 net as Caffe2's quantized models are laid out: an init net of Int8GivenTensorFill /
Int8GivenIntTensorFill weights, a predict net Int8Quantize -> Int8ConvRelu -> Int8MaxPool -> Int8FC ->
Int8Dequantize, run by the simple and dag executors, close to the float net; the weights survive a
checkpoint; net shape inference sees the int8 blobs."""

from __future__ import annotations

import numpy as np
import pytest

from framework import core, workspace
from framework.net.inference import infer_net, specs_from_workspace

f32 = np.float32
XS, XZ, WS, WZ, YS, YZ, FS, FZ = 0.02, 128, 0.01, 128, 0.05, 0, 0.1, 100


def nets(w_conv, b_conv, w_fc, b_fc, executor):
    init = core.Net("int8_init")
    init.Int8GivenTensorFill([], "wc", values=w_conv.tobytes(), shape=list(w_conv.shape), Y_scale=WS, Y_zero_point=WZ)
    init.Int8GivenIntTensorFill([], "bc", values=b_conv.tolist(), shape=[len(b_conv)], Y_scale=XS * WS)
    init.Int8GivenTensorFill([], "wf", values=w_fc.tobytes(), shape=list(w_fc.shape), Y_scale=WS, Y_zero_point=WZ)
    init.Int8GivenIntTensorFill([], "bf", values=b_fc.tolist(), shape=[len(b_fc)], Y_scale=YS * WS)
    net = core.Net("int8_predict")
    net.Proto().type = executor
    net.Int8Quantize("x", "xq", Y_scale=XS, Y_zero_point=XZ)
    net.Int8ConvRelu(["xq", "wc", "bc"], "c", kernel=3, pad=1, order="NHWC", Y_scale=YS, Y_zero_point=YZ)
    net.Int8MaxPool("c", "p", kernel=2, stride=2, order="NHWC", Y_scale=YS, Y_zero_point=YZ)
    net.Int8FC(["p", "wf", "bf"], "fq", Y_scale=FS, Y_zero_point=FZ)
    net.Int8Dequantize("fq", "y")
    return init, net


def float_net(x, w_conv, b_conv, w_fc, b_fc):
    def deq(q, s, z):
        return ((q.astype(np.int32) - z) * f32(s)).astype(f32)

    workspace.FeedBlob("fx", x)
    workspace.FeedBlob("fwc", deq(w_conv, WS, WZ))
    workspace.FeedBlob("fbc", (b_conv * f32(XS * WS)).astype(f32))
    workspace.FeedBlob("fwf", deq(w_fc, WS, WZ))
    workspace.FeedBlob("fbf", (b_fc * f32(YS * WS)).astype(f32))
    net = core.Net("float")
    net.Conv(["fx", "fwc", "fbc"], "fc1", kernel=3, pad=1, order="NHWC")
    net.Relu("fc1", "fr")
    net.MaxPool("fr", "fp", kernel=2, stride=2, order="NHWC")
    net.FC(["fp", "fwf", "fbf"], "fy")
    workspace.RunNetOnce(net)
    return workspace.FetchBlob("fy")


@pytest.mark.parametrize("executor", ["simple", "dag"])
def test_int8_net_runs_close_to_the_float_net(executor, tmp_path):
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, (2, 6, 6, 3)).astype(f32)
    w_conv = rng.integers(100, 156, (4, 3, 3, 3)).astype(np.uint8)
    b_conv = rng.integers(-200, 200, 4).astype(np.int32)
    w_fc = rng.integers(100, 156, (5, 36)).astype(np.uint8)
    b_fc = rng.integers(-200, 200, 5).astype(np.int32)
    workspace.ResetWorkspace(str(tmp_path))
    init, net = nets(w_conv, b_conv, w_fc, b_fc, executor)
    workspace.RunNetOnce(init)
    workspace.FeedBlob("x", x)
    specs = infer_net(net.Proto(), specs_from_workspace(workspace.C()))
    workspace.RunNetOnce(net)
    y = workspace.FetchBlob("y")
    assert y.shape == (2, 5) and specs["y"].shape == (2, 5) and specs["c"].shape == (2, 6, 6, 4)
    assert specs["fq"].dtype == np.uint8
    expected = float_net(x, w_conv, b_conv, w_fc, b_fc)
    assert np.max(np.abs(y - expected)) < 2 * FS  # two output steps through three requantizations

    # the int8 weights round-trip through a checkpoint
    save = core.CreateOperator("Save", ["wc", "bc"], [], db="w.minidb", db_type="minidb")
    workspace.RunOperatorOnce(save)
    before = workspace.FetchInt8Blob("wc"), workspace.FetchInt8Blob("bc")
    workspace.ResetWorkspace(str(tmp_path))
    workspace.RunOperatorOnce(core.CreateOperator("Load", [], ["wc", "bc"], db="w.minidb", db_type="minidb"))
    for old, name in zip(before, ["wc", "bc"]):
        new = workspace.FetchInt8Blob(name)
        np.testing.assert_array_equal(new.data, old.data)
        assert new.data.dtype == old.data.dtype and (new.scale, new.zero_point) == (old.scale, old.zero_point)
    workspace.ResetWorkspace()
