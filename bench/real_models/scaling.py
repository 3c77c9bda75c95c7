"""Our 2-thread speedup against what the machine gives two threads, back to back, round by round.

    python -m bench.real_models.scaling --models resnet20_cifar resnet50 --rounds 20

Each round times, in turn: plain OpenBLAS GEMMs (384x384, one BLAS thread) on one thread and then the
same work on each of two threads at once, which is the machine's own scaling; then our net at batch 16
on 1 thread and on 2 (the batch split). On a shared host (vCPUs whose speed moves with other tenants'
load) a 2-thread speedup means little alone: a round where the GEMMs scale 1.3x bounds what any code
split in two can gain in that minute. Printed per model: both series, their medians, their correlation
and the median of ours / GEMM.
"""

from __future__ import annotations

import os

for _v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import argparse  # noqa: E402
import gc  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

from bench.real_models.nets import build  # noqa: E402


def gemm_scaling(calls: int = 30, n: int = 384) -> float:
    """2 x (one thread's time for ``calls`` GEMMs) / (two threads' time for as many each)."""
    a = np.random.default_rng(0).random((n, n), np.float32)
    bufs = [(a.copy(), np.empty_like(a)) for _ in range(2)]

    def work(k: int) -> None:
        b, c = bufs[k]
        for _ in range(calls):
            np.matmul(a, b, out=c)

    t = time.perf_counter()
    work(0)
    one = time.perf_counter() - t
    th = threading.Thread(target=work, args=(1,))
    t = time.perf_counter()
    th.start()
    work(0)
    th.join()
    return 2 * one / (time.perf_counter() - t)


def rounds(name: str, batch: int, count: int, inner: int) -> np.ndarray:
    """(count, 2) array: per round the GEMM scaling and our 2-thread speedup (``inner`` calls timed)."""
    from bench.real_models.runner import make_runner, set_threads

    model = build(name, batch)
    x = model.input_data()
    run2, _ = make_runner("ours", model, x, 2)
    run2()
    run1, _ = make_runner("ours", model, x, 1)
    run1()
    out = []
    gc.collect()
    gc.disable()
    try:
        for _ in range(count):
            g = gemm_scaling()
            times = []
            for threads, run in ((1, run1), (2, run2)):
                set_threads(threads)
                run()  # untimed: a switch re-prepares the kernels
                t = time.perf_counter()
                for _ in range(inner):
                    run()
                times.append(time.perf_counter() - t)
            out.append((g, times[0] / times[1]))
    finally:
        gc.enable()
    return np.array(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", nargs="*", default=["resnet20_cifar", "resnet50"])
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=20)
    a = ap.parse_args()
    for name in a.models:
        inner = 1 if name in ("resnet50", "densenet121", "alexnet") else 8
        r = rounds(name, a.batch, a.rounds, inner)
        print(f"{name} batch {a.batch}")
        print("  GEMM scaling:      ", np.round(r[:, 0], 2).tolist())
        print("  ours, 2 vs 1 thread:", np.round(r[:, 1], 2).tolist())
        corr = np.corrcoef(r.T)[0, 1] if len(r) > 2 else float("nan")
        print(
            f"  medians: GEMM {np.median(r[:, 0]):.2f}x, ours {np.median(r[:, 1]):.2f}x; correlation {corr:.2f}; "
            f"ours / GEMM {np.median(r[:, 1] / r[:, 0]):.2f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
