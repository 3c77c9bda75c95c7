"""data_parallel_model.Parallelize_GPU on a machine without GPUs: replicas named ``gpu_<d>/`` (Caffe2's
names) train on the CPU; two replicas with half a batch each take the same SGD step as a numpy reference
of the whole batch. Optimizer.get_gpu_blob_name / get_cpu_blob_name name blobs as Caffe2."""

import numpy as np

from framework import workspace
from framework.caffe2.python import brew, data_parallel_model, model_helper, optimizer


def test_parallelize_gpu_runs_on_cpu_with_gpu_names():
    workspace.ResetWorkspace()
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 3)).astype(np.float32)
    y = rng.standard_normal((4, 1)).astype(np.float32)
    model = model_helper.ModelHelper("h36c_dpm_gpu")

    def add_forward(m, loss_scale):
        pred = brew.fc(m, "x", "pred", dim_in=3, dim_out=1)
        dist = m.net.SquaredL2Distance([pred, "y"], "dist")
        loss = m.net.AveragedLoss(dist, "loss")
        return [m.net.Scale(loss, "loss_scaled", scale=loss_scale)]

    def add_sgd(m):
        optimizer.build_sgd(m, base_learning_rate=0.1, policy="fixed")

    data_parallel_model.Parallelize_GPU(
        model, lambda m: None, add_forward, optimizer_builder_fun=add_sgd, devices=[0, 1]
    )
    for d in (0, 1):
        workspace.FeedBlob(f"gpu_{d}/x", x[2 * d : 2 * d + 2])
        workspace.FeedBlob(f"gpu_{d}/y", y[2 * d : 2 * d + 2])
    data_parallel_model.RunInitNet(model)
    w0, b0 = workspace.FetchBlob("gpu_0/pred_w").copy(), workspace.FetchBlob("gpu_0/pred_b").copy()
    np.testing.assert_array_equal(workspace.FetchBlob("gpu_1/pred_w"), w0)
    data_parallel_model.RunNet(model, 1)
    # reference: loss = mean over the batch of 0.5 * (xw + b - y)^2; one SGD step of 0.1 on the whole batch
    r = x @ w0.T + b0 - y
    w_ref = w0 - 0.1 * (r.T @ x) / 4
    b_ref = b0 - 0.1 * r.sum(0) / 4
    for d in (0, 1):
        np.testing.assert_allclose(workspace.FetchBlob(f"gpu_{d}/pred_w"), w_ref, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(workspace.FetchBlob(f"gpu_{d}/pred_b"), b_ref, rtol=1e-5, atol=1e-6)
    workspace.ResetWorkspace()


def test_optimizer_device_blob_names():
    opt = optimizer.SgdOptimizer(base_learning_rate=0.1)
    k = opt._instance_num
    assert opt.get_gpu_blob_name("lr", 1, "node") == f"SgdOptimizer_{k}_lrnode_gpu1"
    assert opt.get_cpu_blob_name("lr") == f"SgdOptimizer_{k}_lr_cpu"
