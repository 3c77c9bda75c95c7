"""Distributed benchmarks (MPI, this machine's cores):

1. Allreduce bandwidth, 2 ranks, 1 KiB to 64 MiB of float32: a net of k in-place ``Allreduce`` ops on k
   buffers (as a gradient-sync net holds one per gradient; k = 16 up to 1 MiB) against k raw ``mpi4py``
   ``comm.Allreduce(IN_PLACE, buf)`` calls, and one ``AllreduceBuckets`` over the k buffers (what
   ``train --distributed`` emits); time per tensor. Target >= 0.9x.
2. Training throughput of a compute-bound CNN with ``data_parallel_model``: 2 ranks x batch B against
   1 rank x batch B (images per second). Target >= 1.6x on 2 cores.

    python -m bench.distributed [--rounds 15]

Each part re-runs this file under ``mpiexec`` and prints a markdown table of medians.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

import numpy as np

SIZES = [1 << 10, 16 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20]


def _mpiexec(n: int, *args: str) -> str:
    from framework.distributed.launcher import find_mpiexec

    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", HYDRA_IFACE="lo", MPIEXEC_TIMEOUT="900")
    cmd = [find_mpiexec(), "-n", str(n), sys.executable, "-m", "bench.distributed", *args]
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if p.returncode:
        raise SystemExit(p.stdout + p.stderr)
    return p.stdout


def allreduce_rank(rounds: int) -> None:
    from mpi4py import MPI

    from framework.core import CreateOperator
    from framework.memory.workspace import Workspace
    from framework.net.api import run_operator_once

    comm = MPI.COMM_WORLD
    ws = Workspace()
    run_operator_once(ws, CreateOperator("CreateCommonWorld", [], ["cw"]))
    raw_comm = comm.Dup()
    rows = []
    for nbytes in SIZES:
        # A gradient-sync net holds one Allreduce per gradient: k ops on k buffers against k raw calls.
        k = max(1, min(16, (16 << 20) // nbytes))
        bufs = [np.ones(nbytes // 4, np.float32) for _ in range(k)]
        net_def = _net_of([CreateOperator("Allreduce", ["cw", f"x{i}"], [f"x{i}"]) for i in range(k)])
        for i in range(k):
            ws.feed_blob(f"x{i}", np.ones(nbytes // 4, np.float32))
        net = ws.create_net(net_def, overwrite=True)
        names = [f"x{i}" for i in range(k)]
        bucket_def = _net_of([CreateOperator("AllreduceBuckets", ["cw", *names], names)])
        bucket_def.name = "buckets"
        bucket = ws.create_net(bucket_def, overwrite=True)

        def raw(bufs=bufs):
            for b in bufs:
                raw_comm.Allreduce(MPI.IN_PLACE, b)

        inner = max(1, min(100, (4 << 20) // (nbytes * k)))
        samples: dict[str, list[float]] = {"op": [], "mpi4py": [], "buckets": []}
        for r in range(rounds + 1):
            for name, fn in (("op", net.run), ("mpi4py", raw), ("buckets", bucket.run)):
                comm.Barrier()
                t = time.perf_counter()
                for _ in range(inner):
                    fn()
                if r:
                    samples[name].append((time.perf_counter() - t) / (inner * k))
        op, raw_t, bk = (statistics.median(samples[c]) for c in ("op", "mpi4py", "buckets"))
        rows.append((nbytes, op, raw_t, bk, k))
    if comm.rank == 0:
        head = ["size", "tensors", "Allreduce op", "AllreduceBuckets", "raw mpi4py", "GB/s (op)", "op / mpi4py"]
        print("| " + " | ".join(head + ["buckets / mpi4py"]) + " |")
        print("|---|---|---|---|---|---|---|---|")
        for nbytes, op, raw, bk, k in rows:
            size = f"{nbytes >> 10} KiB" if nbytes < (1 << 20) else f"{nbytes >> 20} MiB"
            print(
                f"| {size} | {k} | {op * 1e6:.1f} us | {bk * 1e6:.1f} us | {raw * 1e6:.1f} us | "
                f"{nbytes / op / 2**30:.2f} | {raw / op:.2f}x | {raw / bk:.2f}x |"
            )


def _net_of(ops):
    from framework.proto import framework_pb2 as pb

    net = pb.NetDef(name="allreduce")
    net.op.extend(ops)
    return net


def cnn_rank(rounds: int, batch: int) -> None:
    from framework import distributed, workspace
    from framework.caffe2.python import brew, data_parallel_model, model_helper, optimizer

    rank, size = distributed.rank_and_size()
    model = model_helper.ModelHelper("cnn")

    def forward(m, loss_scale):
        h = brew.conv(m, "data", "c1", dim_in=3, dim_out=32, kernel=3, pad=1)
        h = brew.relu(m, h, "r1")
        h = brew.conv(m, h, "c2", dim_in=32, dim_out=64, kernel=3, pad=1)
        h = brew.relu(m, h, "r2")
        h = m.net.AveragePool(h, "p", kernel=32)
        h = brew.fc(m, h, "fc", dim_in=64, dim_out=10)
        sm, loss = m.net.SoftmaxWithLoss([h, "label"], ["sm", "loss"])
        return [m.net.Scale(loss, "loss_s", scale=loss_scale)]

    data_parallel_model.Parallelize_CPU(
        model,
        lambda m: None,
        forward,
        optimizer_builder_fun=lambda m: optimizer.build_sgd(m, 0.01),
        devices=[0],
        rendezvous=distributed.rendezvous(),
        net_type="simple",
    )
    rng = np.random.default_rng(rank)
    workspace.FeedBlob("cpu_0/data", rng.standard_normal((batch, 3, 32, 32)).astype(np.float32))
    workspace.FeedBlob("cpu_0/label", rng.integers(0, 10, batch).astype(np.int32))
    data_parallel_model.RunInitNet(model)
    data_parallel_model.RunNet(model, 2)
    times = []
    for _ in range(rounds):
        t = time.perf_counter()
        data_parallel_model.RunNet(model, 1)
        times.append(time.perf_counter() - t)
    if rank == 0:
        step = statistics.median(times)
        print(f"RESULT {size} {step:.6f} {size * batch / step:.1f}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--part", choices=["allreduce", "cnn"], help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.part == "allreduce":
        allreduce_rank(args.rounds)
        return 0
    if args.part == "cnn":
        cnn_rank(args.rounds, args.batch)
        return 0
    print("## Allreduce, 2 ranks (float32, in place; medians)\n")
    print(_mpiexec(2, "--part", "allreduce", "--rounds", str(args.rounds)))
    results = {}
    for n in (1, 2):
        line = [
            x
            for x in _mpiexec(n, "--part", "cnn", "--rounds", str(args.rounds), "--batch", str(args.batch)).splitlines()
            if x.startswith("RESULT")
        ][0].split()
        results[n] = (float(line[2]), float(line[3]))
    print(f"## CNN training (conv 3-32-64 on 32x32, batch {args.batch} per rank, SGD; medians)\n")
    print("| ranks | step time | images/s | speed-up |\n|---|---|---|---|")
    for n, (step, ips) in results.items():
        print(f"| {n} | {step * 1e3:.1f} ms | {ips:.0f} | {ips / results[1][1]:.2f}x |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
