"""Run a net at one intra-op thread and at two and compare: the shared check of the ops that split their work.

``run_threads(net_def, feeds, outputs)`` creates the net in a fresh workspace per thread count, runs it
``runs`` times (the first runs bind, the later ones take the compiled fast path), and returns
{threads: {blob: value}}; with ``min_work`` it lowers ``framework.runtime.parallel.SPLIT_MIN_WORK`` so small
cases split too. It also reports how many tasks ran through ``run_parallel`` or as native jobs
(``framework.kernels.native_pool.run``) at two threads (a test asserts the split happened) and the buffers
allocated per steady-state run.
"""

from __future__ import annotations

import numpy as np

import framework
import framework.runtime.parallel as parallel
from framework.kernels import native_pool
from framework.memory.allocator import memory_reporter
from framework.memory.workspace import Workspace


def run_threads(net_def, feeds: dict, outputs, *, runs: int = 3, min_work: int | None = None, threads=(1, 2)):
    """({threads: {blob: value after the last run}}, tasks run in parallel at the last count, allocations
    per run after the first runs at the last count)."""
    old_threads, old_min, old_task = framework.get_num_threads(), parallel.SPLIT_MIN_WORK, parallel._task
    old_native = native_pool.run
    counted = [0]

    def counting_task(fn, caller):
        counted[0] += 1
        old_task(fn, caller)

    def counting_native(fn, block, n):
        counted[0] += n if n > 1 else 0
        old_native(fn, block, n)

    results, allocs = {}, 0.0
    try:
        if min_work is not None:
            parallel.SPLIT_MIN_WORK = min_work
        parallel._task, native_pool.run = counting_task, counting_native
        for n in threads:
            framework.set_num_threads(n)
            counted[0] = 0
            ws = Workspace()
            for k, v in feeds.items():
                ws.feed_blob(k, v.copy() if isinstance(v, np.ndarray) else v)
            net = ws.create_net(net_def)
            for _ in range(runs - 1):
                net.run()
            before = memory_reporter().allocations
            net.run()
            allocs = memory_reporter().allocations - before
            results[n] = {b: np.array(ws.fetch_blob(b), copy=True) for b in outputs}
    finally:
        parallel.SPLIT_MIN_WORK, parallel._task, native_pool.run = old_min, old_task, old_native
        framework.set_num_threads(old_threads)
    return results, counted[0], allocs


def assert_same(results: dict, rtol: float = 0.0, atol: float = 0.0) -> None:
    """Every blob equal across thread counts (bit for bit with the default tolerances)."""
    counts = sorted(results)
    for n in counts[1:]:
        for blob, ref in results[counts[0]].items():
            got = results[n][blob]
            if rtol == 0.0 and atol == 0.0:
                np.testing.assert_array_equal(got, ref, err_msg=f"{blob} at {n} threads")
            else:
                np.testing.assert_allclose(got, ref, rtol=rtol, atol=atol, err_msg=f"{blob} at {n} threads")
