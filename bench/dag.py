"""dag vs simple on two independent GEMM-heavy branches (BLAS threads = 1).

Each branch is a chain of ``DEPTH`` MatMul ops on float32 ``N x N`` matrices
followed by a Relu; the branches share only the input. numpy releases the
GIL inside BLAS, so the dag executor with 2 workers can run both branches at
once. Contenders run round-robin in one process (medians, bench/common.py).

Run: ``python -m bench.dag``. Prints ms per run and the speed-up of dag.
"""

from __future__ import annotations

import numpy as np

from bench.common import fmt_time, markdown_table, pin_blas_threads, time_round_robin

N = 256
DEPTH = 6


def gemm_branches(name: str, net_type: str):
    from framework.core import CreateOperator
    from framework.proto.framework_pb2 import NetDef

    net = NetDef(name=name, type=net_type, external_input=["X", "W"])
    if net_type != "simple":
        net.num_workers = 2
    for b in ("a", "b"):
        prev = "X"
        for d in range(DEPTH):
            out = f"{b}{d}"
            net.op.append(CreateOperator("MatMul", [prev, "W"], [out]))
            prev = out
        net.op.append(CreateOperator("Relu", [prev], [f"{b}_out"]))
    return net


def numpy_serial(x: np.ndarray, w: np.ndarray):
    """The floor: both branches by hand, one after the other, into preallocated buffers."""
    bufs = [np.empty((N, N), np.float32) for _ in range(DEPTH)]

    def run() -> None:
        for _ in range(2):
            prev = x
            for buf in bufs:
                np.matmul(prev, w, out=buf)
                prev = buf
            np.maximum(prev, 0, out=prev)

    return run


def main() -> dict[str, float]:
    pin_blas_threads(1)
    from framework.memory.workspace import Workspace

    ws = Workspace()
    rng = np.random.default_rng(0)
    ws.feed_blob("X", rng.standard_normal((N, N)).astype(np.float32))
    ws.feed_blob("W", (rng.standard_normal((N, N)) / np.sqrt(N)).astype(np.float32))
    fns = {}
    for kind in ("simple", "dag"):
        net = ws.create_net(gemm_branches(f"gemm_{kind}", kind))
        net.run()
        fns[kind] = net.run
    fns["numpy serial"] = numpy_serial(ws.fetch_blob("X"), ws.fetch_blob("W"))
    # 15 runs in a row per round: an idle vCPU wakes slowly, which hides the overlap at 3 (see bench/suite.py)
    times = time_round_robin(fns, rounds=15, inner=15)
    rows = [[k, fmt_time(v), f"{times['simple'] / v:.2f}x"] for k, v in times.items()]
    print(f"two independent branches of {DEPTH} MatMul ({N}x{N} float32) + Relu, BLAS threads 1")
    print(markdown_table(rows, ["contender", "per run", "speed-up vs simple"]))
    return times


if __name__ == "__main__":
    main()
