"""Memory per run of every benchmarked net (MemoryReporter), with fixed input shapes.

For each net: build it in a fresh Workspace, run it to steady state, then count over
``iters`` further runs
- ``allocs/iter`` and ``bytes/iter``: buffers the framework's allocator handed out per run
  (the target is zero: ops write into reused output buffers);
- ``peak bytes``: the allocator's peak over building and running the net, above what was
  live before (feeds, parameters, activations, gradients, scratch through the allocator);
- ``transient/run``: the largest extra memory traced by ``tracemalloc`` during one run
  (numpy temporaries, which bypass the allocator, plus small Python objects). About 33 KiB
  is numpy's own ufunc iterator buffer (8192 elements) for a broadcast ``np.add``: the
  hand-written numpy floor shows the same.

Run: ``python -m bench.memory``.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import gc
import tracemalloc
from typing import Any, Callable

import numpy as np

from bench.common import markdown_table


def _mlp(batch: int) -> Callable[[], Any]:
    from bench import mlp_inference as m

    run, _, _ = m.ours(m.make_input(batch), m.make_params())
    return run


def _lenet() -> Callable[[], Any]:
    from bench import lenet

    rng = np.random.default_rng(0)
    p = lenet.params(rng)
    return lenet.our_net(rng.standard_normal((lenet.BATCH, 1, 28, 28)).astype(np.float32), p)


def _train(batch: int) -> Callable[[], Any]:
    from bench import train_step

    run, _ = train_step.framework_step(batch)
    return run


def _relu_chain() -> Callable[[], Any]:
    from bench import op_overhead
    from framework.memory.workspace import Workspace

    ws = Workspace()
    ws.feed_blob("x0", np.ones(op_overhead.SHAPE, np.float32))
    net = ws.create_net(op_overhead.relu_chain("chain"))
    net.run()
    return net.run


def _dag(kind: str) -> Callable[[], Any]:
    from bench import dag
    from framework.memory.workspace import Workspace

    ws = Workspace()
    rng = np.random.default_rng(0)
    ws.feed_blob("X", rng.standard_normal((dag.N, dag.N)).astype(np.float32))
    ws.feed_blob("W", (rng.standard_normal((dag.N, dag.N)) / np.sqrt(dag.N)).astype(np.float32))
    net = ws.create_net(dag.gemm_branches(f"mem_{kind}", kind))
    net.run()
    return net.run


def _save_load() -> Callable[[], Any]:
    import atexit
    import shutil
    import tempfile

    from bench import mlp_inference as m
    from framework.core import CreateOperator
    from framework.memory.workspace import Workspace
    from framework.proto.framework_pb2 import NetDef

    folder = tempfile.mkdtemp(prefix="bench_mem_")
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    ws = Workspace(root_folder=folder)
    names = []
    for i, (w, b) in enumerate(m.make_params()):
        ws.feed_blob(f"W{i}", w)
        ws.feed_blob(f"b{i}", b)
        names += [f"W{i}", f"b{i}"]
    net = NetDef(name="save_load", external_input=names)
    net.op.append(CreateOperator("Save", names, [], db="ckpt.minidb", db_type="minidb"))
    net.op.append(CreateOperator("Load", [], names, db="ckpt.minidb", db_type="minidb"))
    n = ws.create_net(net)
    n.run()
    return n.run


# Nets that allocate per run on purpose, with the reason (left out of the zero-allocation target).
BY_DESIGN = {
    "Save + Load (6 tensors)": "Load stages every tensor in a fresh buffer and swaps it in only when the "
    "whole checkpoint has been read (all-or-nothing loading)",
}


def nets(quick: bool = False) -> dict[str, Callable[[], Callable[[], Any]]]:
    """{label: builder} of the benchmarked nets; a builder returns the net's run()."""
    out: dict[str, Callable[[], Callable[[], Any]]] = {
        "relu chain (200 ops)": _relu_chain,
        "MLP inference b1": lambda: _mlp(1),
        "MLP inference b64": lambda: _mlp(64),
    }
    if not quick:
        out["MLP inference b1024"] = lambda: _mlp(1024)
    out["MLP train step b64"] = lambda: _train(64)
    out["LeNet b64 (simple net)"] = _lenet
    out["dag branches, simple"] = lambda: _dag("simple")
    out["dag branches, dag (2 workers)"] = lambda: _dag("dag")
    out["Save + Load (6 tensors)"] = _save_load
    return out


def measure(build: Callable[[], Callable[[], Any]], iters: int = 5, warm: int = 3) -> dict[str, float]:
    """Allocator counts per run, peak bytes and tracemalloc transient peak of one net (see module doc)."""
    from framework.memory.allocator import memory_reporter

    rep = memory_reporter()
    gc.collect()  # earlier nets' buffers must be gone, or the peak below starts too high
    rep.reset_peak()
    base = rep.current_bytes
    run = build()
    for _ in range(warm):
        run()
    a0, b0 = rep.allocations, rep.allocated_bytes
    for _ in range(iters):
        run()
    allocs = (rep.allocations - a0) / iters
    nbytes = (rep.allocated_bytes - b0) / iters
    peak = rep.peak_bytes - base
    transient = 0
    started = not tracemalloc.is_tracing()
    if started:
        tracemalloc.start()
    try:
        run()
        for _ in range(iters):
            tracemalloc.reset_peak()
            cur = tracemalloc.get_traced_memory()[0]
            run()
            transient = max(transient, tracemalloc.get_traced_memory()[1] - cur)
    finally:
        if started:
            tracemalloc.stop()
    return {"allocs_per_iter": allocs, "bytes_per_iter": nbytes, "peak_bytes": peak, "transient_bytes": transient}


def fmt_bytes(n: float) -> str:
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def measure_all(quick: bool = False, iters: int = 5) -> dict[str, dict[str, float]]:
    return {label: measure(build, iters=iters) for label, build in nets(quick).items()}


def table(results: dict[str, dict[str, float]]) -> str:
    rows = [
        [
            label,
            f"{r['allocs_per_iter']:g}",
            fmt_bytes(r["bytes_per_iter"]),
            fmt_bytes(r["peak_bytes"]),
            fmt_bytes(r["transient_bytes"]),
        ]
        for label, r in results.items()
    ]
    table = markdown_table(rows, ["net", "allocs/iter", "bytes/iter", "peak bytes", "transient/run (tracemalloc)"])
    notes = [f"- {label}: {why}." for label, why in BY_DESIGN.items() if label in results]
    return table + ("\n\nAllocating by design:\n" + "\n".join(notes) if notes else "")


def main(quick: bool = False) -> None:
    from bench.common import pin_blas_threads

    pin_blas_threads(1)
    print(table(measure_all(quick)))


if __name__ == "__main__":
    import sys

    main("--quick" in sys.argv)
