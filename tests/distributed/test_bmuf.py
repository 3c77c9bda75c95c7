"""Parallelize_BMUF: replicas train alone for a block, then the block's update is filtered through a
block momentum (checked against a numpy simulation); over MPI, 2 ranks x 1 device equal 1 process x 2
devices."""

import numpy as np
import pytest

from framework import workspace
from framework.caffe2.python import brew, data_parallel_model, model_helper, optimizer
from framework.errors import FrameworkError

from .test_data_parallel import train

LR, BLOCK_LR, STEPS, BLOCKS = 0.1, 0.8, 3, 4


def _data(replicas, n=4):
    rng = np.random.default_rng(5)
    x = rng.standard_normal((BLOCKS, replicas, n, 3)).astype(np.float32)
    y = rng.standard_normal((BLOCKS, replicas, n, 2)).astype(np.float32)
    return x, y


def _build(devices, nesterov, block_momentum=None):
    workspace.ResetWorkspace()
    model = model_helper.ModelHelper("bmuf")

    def add_forward(m, loss_scale):
        pred = brew.fc(m, "x", "pred", dim_in=3, dim_out=2)
        dist = m.net.SquaredL2Distance([pred, "y"], "dist")
        loss = m.net.AveragedLoss(dist, "loss")
        return [m.net.Scale(loss, "loss_scaled", scale=loss_scale)]

    def add_sgd(m):
        optimizer.build_sgd(m, base_learning_rate=LR, policy="fixed")

    data_parallel_model.Parallelize_CPU_BMUF(
        model,
        lambda m: None,
        add_forward,
        add_sgd,
        devices=devices,
        block_learning_rate=BLOCK_LR,
        block_momentum=block_momentum,
        nesterov=nesterov,
        net_type="simple",
    )
    return model


def _simulate(w, b, x, y, nesterov, block_momentum):
    """Plain numpy: each replica runs STEPS SGD steps on its shard, then the BMUF update."""
    replicas = x.shape[1]
    g_w, g_b, v_w, v_b = w.copy(), b.copy(), np.zeros_like(w), np.zeros_like(b)
    p_w, p_b = np.zeros_like(w), np.zeros_like(b)
    for k in range(BLOCKS):
        ws, bs = [], []
        for r in range(replicas):
            wr, br = g_w.copy(), g_b.copy()
            for _ in range(STEPS):
                pred = x[k, r] @ wr.T + br
                d = (pred - y[k, r]) / len(pred) / replicas  # d(mean(0.5|pred-y|^2) / replicas)
                wr, br = wr - LR * d.T @ x[k, r], br - LR * d.sum(0)
            ws.append(wr)
            bs.append(br)
        for avg, g, v, prev in ((np.mean(ws, 0), g_w, v_w, p_w), (np.mean(bs, 0), g_b, v_b, p_b)):
            v *= block_momentum
            v += BLOCK_LR * (avg - g)
            g += v
            if nesterov:
                prev[...] = block_momentum * (v - prev)
                g -= prev
                prev[...] = v
    return g_w, g_b


@pytest.mark.parametrize("nesterov, block_momentum", [(False, None), (True, 0.6)])
def test_bmuf_matches_a_numpy_simulation(nesterov, block_momentum):
    devices = [0, 1]
    x, y = _data(len(devices))
    model = _build(devices, nesterov, block_momentum)
    for d in devices:
        workspace.FeedBlob(f"cpu_{d}/x", x[0, d])
        workspace.FeedBlob(f"cpu_{d}/y", y[0, d])
    data_parallel_model.RunInitNet(model)
    w0, b0 = workspace.FetchBlob("cpu_0/pred_w").copy(), workspace.FetchBlob("cpu_0/pred_b").copy()
    np.testing.assert_array_equal(workspace.FetchBlob("cpu_1/pred_w"), w0)  # replicas start equal
    for k in range(BLOCKS):
        for d in devices:
            workspace.FeedBlob(f"cpu_{d}/x", x[k, d])
            workspace.FeedBlob(f"cpu_{d}/y", y[k, d])
        data_parallel_model.RunNet(model, STEPS)
    want_w, want_b = _simulate(w0, b0, x, y, nesterov, 1 - 1 / 2 if block_momentum is None else block_momentum)
    for d in devices:
        np.testing.assert_allclose(workspace.FetchBlob(f"cpu_{d}/pred_w"), want_w, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(workspace.FetchBlob(f"cpu_{d}/pred_b"), want_b, rtol=1e-5, atol=1e-6)
    ckpt = data_parallel_model.GetCheckpointParams(model)
    assert {"cpu_0/pred_w_v", "cpu_0/pred_w_g"} <= ckpt and not any(n.startswith("cpu_1/") for n in ckpt)


def test_bmuf_warmup_and_errors():
    model = _build([0, 1], False)
    with pytest.raises(FrameworkError, match="RunWarmup"):
        data_parallel_model.RunWarmup(model)
    with pytest.raises(FrameworkError, match="master_device 3"):
        data_parallel_model.Parallelize_BMUF(
            model_helper.ModelHelper("m"), lambda m: None, lambda m, s: [], lambda m: None, devices=[0], master_device=3
        )


def test_bmuf_two_ranks_equal_one_process_with_two_devices(tmp_path, run_ranks):
    one = train(tmp_path, run_ranks, 1, 2, "one", mode="bmuf")
    many = train(tmp_path, run_ranks, 2, 1, "many", mode="bmuf")
    for k in one:
        np.testing.assert_allclose(many[k], one[k], rtol=2e-5, atol=2e-6, err_msg=k)
