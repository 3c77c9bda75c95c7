"""A small CNN trained with brew + AddGradientOperators + momentum SGD gives the same losses on the compiled
training paths (ConvGradient's dX as a forward conv, SpatialBN's one-pass kernels) as on the numpy paths
they replaced, and the losses go down."""

from __future__ import annotations

import numpy as np
import pytest

from framework.caffe2.python import brew, optimizer
from framework.caffe2.python.model_helper import ModelHelper
from framework.kernels import bn_train
from framework.memory.workspace import Workspace
from framework.ops.nn import conv_grad_data


def _train(steps: int = 6) -> list[float]:
    rng = np.random.default_rng(0)
    m = ModelHelper("small_cnn", arg_scope={"order": "NCHW"})
    h = m.net.StopGradient("data", "data")
    h = brew.conv(m, h, "c1", 3, 8, kernel=3, pad=1, no_bias=1)
    h = brew.spatial_bn(m, h, "bn1", 8, epsilon=1e-5, momentum=0.9, is_test=0)
    h = brew.relu(m, h, h)
    s = brew.conv(m, h, "c2", 8, 8, kernel=3, pad=1, no_bias=1)
    s = brew.spatial_bn(m, s, "bn2", 8, epsilon=1e-5, momentum=0.9, is_test=0)
    h = brew.sum(m, [h, s], "sum")
    h = brew.relu(m, h, h)
    h = brew.conv(m, h, "c3", 8, 16, kernel=3, stride=2, pad=1)
    h = brew.relu(m, h, h)
    h = brew.average_pool(m, h, "pool", global_pooling=True)
    h = brew.fc(m, h, "fc", 16, 4)
    m.net.SoftmaxWithLoss([h, "label"], ["softmax", "loss"])
    m.AddGradientOperators(["loss"])
    optimizer.build_sgd(m, 0.05, momentum=0.9)
    ws = Workspace()
    ws.run_net_once(m.param_init_net)
    for p in m.params:  # seeded values (the init net's fillers are random)
        shape = ws.fetch_blob(str(p)).shape
        v = rng.standard_normal(shape).astype(np.float32) * np.float32(0.3)
        if str(p).endswith("_s"):
            v = np.ones(shape, np.float32)
        ws.feed_blob(str(p), v)
    x = rng.standard_normal((8, 3, 10, 10)).astype(np.float32)
    y = (np.arange(8) % 4).astype(np.int32)
    x += y.reshape(8, 1, 1, 1).astype(np.float32)  # learnable
    ws.feed_blob("data", x)
    ws.feed_blob("label", y)
    net = ws.create_net(m.net.Proto())
    losses = []
    for _ in range(steps):
        net.run()
        losses.append(float(ws.fetch_blob("loss")))
    return losses


def test_same_losses_on_compiled_and_numpy_paths():
    fast = _train()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(conv_grad_data, "plan", lambda *a, **k: None)
        for name in ("spatial_bn_job", "spatial_bn_grad_job"):
            mp.setattr(bn_train, name, lambda *a: None)
        slow = _train()
    np.testing.assert_allclose(fast, slow, rtol=1e-4)
    assert fast[-1] < fast[0]
