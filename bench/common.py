"""Timing helpers shared by the benchmarks: round-robin medians in one process.

Contenders are timed in interleaved rounds (A, B, C, A, B, C, ...) so that
machine noise hits them alike; each round times ``inner`` calls and the
result is the median per-call time over rounds. Ratios are computed from
those medians.
"""

from __future__ import annotations

import gc
import os
import statistics
import time
from typing import Callable


def time_round_robin(
    contenders: dict[str, Callable[[], object]],
    rounds: int = 30,
    inner: int = 10,
    warmup: int = 3,
    clock: Callable[[], float] = time.perf_counter,
    before: dict[str, Callable[[], object]] | None = None,
    settle: float = 0.0,
) -> dict[str, float]:
    """Median seconds per call of each contender, timed in interleaved rounds. ``clock``:
    wall time by default; ``time.process_time`` (CPU time of the process) measures single-threaded
    work robustly on a machine shared with other jobs. ``before[name]``, when given, runs (untimed)
    before each of that contender's timed blocks: e.g. switching a global setting and one warm-up
    call, so what is timed is the steady state under that setting. ``settle`` seconds of sleep precede
    each block, followed by ``before`` or else one untimed call: a contender whose thread pool keeps
    spinning after its calls (onnxruntime's workers spin for 40-60 ms after a run on 2 threads,
    measured) would otherwise take a core from whichever contender runs next.

    Python's cyclic garbage collector is off while the rounds run (as ``timeit`` does), after one
    full collection: otherwise the first full collection after the contenders' set-up (tens of ms
    with torch, onnx and numba loaded: measured 60-70 ms in one ShuffleNet run of 9 ms) lands in
    whichever contender happens to be running."""
    before = before or {}
    for name, fn in contenders.items():
        if name in before:
            before[name]()
        for _ in range(warmup):
            fn()
    samples: dict[str, list[float]] = {k: [] for k in contenders}
    gc.collect()
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        for _ in range(rounds):
            for name, fn in contenders.items():
                if settle:
                    time.sleep(settle)
                if name in before:
                    before[name]()
                elif settle:
                    fn()  # untimed: the block starts warm, as after the previous contender without a pause
                t0 = clock()
                for _ in range(inner):
                    fn()
                samples[name].append((clock() - t0) / inner)
    finally:
        if was_enabled:
            gc.enable()
    return {k: statistics.median(v) for k, v in samples.items()}


def fmt_time(seconds: float) -> str:
    if seconds < 1e-3:
        return f"{seconds * 1e6:.1f} us"
    if seconds < 1:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds:.2f} s"


def markdown_table(rows: list[list[str]], header: list[str]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def pin_blas_threads(n: int = 1) -> None:
    """Set BLAS threads (before numpy starts, via env; after, via threadpoolctl)."""
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(var, str(n))
    try:
        from threadpoolctl import threadpool_limits

        threadpool_limits(n)
    except ImportError:
        pass


def allocations_per_run(run: Callable[[], object], n: int = 5, warm: int = 1) -> float:
    """Buffers the framework's allocator hands out per call of ``run`` (mean over ``n`` calls), after ``warm``
    calls that may still size the buffers: 0 is a steady state that allocates nothing."""
    from framework.memory.allocator import memory_reporter

    for _ in range(warm):
        run()
    before = memory_reporter().allocations
    for _ in range(n):
        run()
    return (memory_reporter().allocations - before) / n
