"""Run by test_data_parallel.py: train a small MLP with data_parallel_model on this job's ranks,
each reading its shard of a global batch; print the final weights' digest so runs can be compared.

    python dpm_rank.py GLOBAL_BATCH STEPS DEVICES OUT.npz [sync|bmuf]

sync: Parallelize_CPU (gradients averaged every step); bmuf: Parallelize_CPU_BMUF, blocks of 3 local steps.
"""

import os
import signal
import sys

import numpy as np

from framework import distributed, workspace
from framework.caffe2.python import brew, data_parallel_model, model_helper, optimizer


def main():
    global_batch, steps, n_devices, out = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    mode = sys.argv[5] if len(sys.argv) > 5 else "sync"
    rank, size = distributed.rank_and_size()
    rng = np.random.default_rng(0)
    X = rng.standard_normal((steps, global_batch, 6)).astype(np.float32)
    Y = (X @ rng.standard_normal((6, 1)).astype(np.float32) + 0.1).astype(np.float32)
    model = model_helper.ModelHelper("dpm")
    devices = list(range(n_devices))
    shard = global_batch // (size * n_devices)

    def add_input(m):
        pass  # data is fed per step below

    def add_forward(m, loss_scale):
        h = brew.fc(m, "x", "h", dim_in=6, dim_out=8)
        h = brew.relu(m, h, "h_relu")
        pred = brew.fc(m, h, "pred", dim_in=8, dim_out=1)
        dist = m.net.SquaredL2Distance([pred, "y"], "dist")
        loss = m.net.AveragedLoss(dist, "loss")
        return [m.net.Scale(loss, "loss_scaled", scale=loss_scale)]

    def add_sgd(m):
        optimizer.build_sgd(m, base_learning_rate=0.05, policy="fixed", momentum=0.9)

    workspace.ResetWorkspace()
    rdv = distributed.rendezvous()
    if mode == "bmuf":
        data_parallel_model.Parallelize_CPU_BMUF(
            model, add_input, add_forward, add_sgd, devices=devices, rendezvous=rdv
        )
    else:
        data_parallel_model.Parallelize_CPU(
            model, add_input, add_forward, optimizer_builder_fun=add_sgd, devices=devices, rendezvous=rdv
        )
    # Seeded fills: rank 0's init is the same as the one-process run's; other ranks start elsewhere, so
    # only the Broadcast of rank 0's parameters can make them train alike.
    for i, op in enumerate(model.param_init_net.Proto().op):
        if op.type.endswith("Fill"):
            op.device_option.random_seed = 1000 + i + 7919 * rank
    for d in devices:
        workspace.FeedBlob(f"cpu_{d}/x", np.zeros((shard, 6), np.float32))
        workspace.FeedBlob(f"cpu_{d}/y", np.zeros((shard, 1), np.float32))
    data_parallel_model.RunInitNet(model)
    die_at = int(os.environ.get("DPM_DIE_AT_STEP", "-1"))
    for s in range(steps):
        if s == die_at and rank == size - 1:
            os.kill(os.getpid(), signal.SIGKILL)  # a rank lost mid-training
        for d in devices:
            part = (rank * n_devices + d) * shard
            workspace.FeedBlob(f"cpu_{d}/x", X[s, part : part + shard])
            workspace.FeedBlob(f"cpu_{d}/y", Y[s, part : part + shard])
        data_parallel_model.RunNet(model, 3 if mode == "bmuf" else 1)
    names = sorted(data_parallel_model.GetCheckpointParams(model))
    wanted = ("h_w", "h_b", "pred_w", "pred_b")
    scoped = [n for n in names if "/" in n]  # the unscoped ones are iteration counters
    params = {n.split("/", 1)[1]: workspace.FetchBlob(n) for n in scoped if n.split("/", 1)[1] in wanted}
    for d in devices[1:]:  # every replica holds the same weights
        for k, v in params.items():
            np.testing.assert_array_equal(workspace.FetchBlob(f"cpu_{d}/{k}"), v)
    if rank == 0:
        np.savez(out, **params)
    print(f"OK rank {rank} of {size}", flush=True)


if __name__ == "__main__":
    main()
