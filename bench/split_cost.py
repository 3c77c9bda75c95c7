"""What a split over two intra-op threads costs: a job of two equal tasks on two threads against one task
alone, for Python tasks (``runtime.parallel.run_parallel``) and native jobs (``kernels.native_pool``).

    python -m bench.split_cost [--rounds 9] [--inner 200]

Each task spins a compiled loop for a set time (numba, GIL released, as the kernels do). Rows: the task's
time alone on one thread, then the wall time of two such tasks split over two threads, with the pool's
workers polling (the split right after the last) or asleep (after a 2 ms gap: they poll 300 us). Ideal is
the task's own time; everything above it is the split's cost. Medians of interleaved rounds, wall time.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from bench.common import markdown_table, pin_blas_threads, time_round_robin


def _spin_kernel():
    from numba import cfunc, njit, types

    from framework.kernels import native_pool_kernels as npk

    @njit(nogil=True)
    def spin(n):
        s = 0.0
        for i in range(n):
            s += i * 1e-9
        return s

    @cfunc(types.void(types.int64, types.int64))
    def task(block, k):
        b = npk.block_of(block)
        b[2 + k] = int(spin(b[1]))  # kept: the loop is not dropped as unused

    return spin, task


def _iterations(spin, seconds: float) -> int:
    spin(1000)
    n = 1_000_000
    t0 = time.perf_counter()
    spin(n)
    per = (time.perf_counter() - t0) / n
    return max(1, int(seconds / per))


def _gap() -> None:
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < 2e-3:
        pass


def _row(spin, task, us: float, rounds: int, inner: int) -> list[str]:
    from framework.kernels import native_pool
    from framework.runtime.parallel import run_parallel

    n = _iterations(spin, us * 1e-6)
    blk = native_pool.Block(3)
    blk.data[1] = n
    python_tasks = [lambda: spin(n), lambda: spin(n)]
    contenders = {
        "one task alone": lambda: spin(n),
        "Python tasks": lambda: run_parallel(python_tasks, steal=True),
        "native job": lambda: native_pool.run(task.address, blk.data, 2),
    }
    times = time_round_robin(contenders, rounds=rounds, inner=inner, warmup=3)
    row = [f"{us:g} us", f"{times['one task alone'] * 1e6:.1f} us"]
    for name in ("Python tasks", "native job"):
        samples = []
        for _ in range(max(1, inner // 4)):
            _gap()
            t0 = time.perf_counter()
            contenders[name]()
            samples.append(time.perf_counter() - t0)
        row += [f"{times[name] * 1e6:.1f} us", f"{float(np.median(samples)) * 1e6:.1f} us"]
    return row


def main(argv=None) -> list[list[str]]:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=9)
    p.add_argument("--inner", type=int, default=200)
    p.add_argument("--tasks-us", default="2,10,40,160", help="comma-separated task lengths in microseconds")
    a = p.parse_args(argv)
    pin_blas_threads(1)
    import framework

    spin, task = _spin_kernel()
    framework.set_num_threads(2)
    rows = []
    for us in [float(v) for v in a.tasks_us.split(",")]:
        rows.append(_row(spin, task, us, a.rounds, a.inner))
        print(" | ".join(rows[-1]), flush=True)
    framework.set_num_threads(1)
    head = [
        "task",
        "one task alone",
        "2 Python tasks, workers polling",
        "2 Python tasks, after a 2 ms gap",
        "native job of 2, workers polling",
        "native job of 2, after a 2 ms gap",
    ]
    print(markdown_table(rows, head))
    return rows


if __name__ == "__main__":
    main()
