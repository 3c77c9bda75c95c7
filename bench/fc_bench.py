"""FC forward and FCGradient against hand-written preallocated numpy (784 -> 512).

Run: OPENBLAS_NUM_THREADS=1 python -m bench.fc_bench
Prints medians and ratios (framework / numpy) from one round-robin run.
"""

from __future__ import annotations

import numpy as np

from bench.common import time_round_robin
from framework.core import CreateOperator
from framework.memory.workspace import Workspace
from framework.ops import create_operator
from framework.ops.nn import fc as fc_module


def bench(batch: int, k: int = 784, n: int = 512, rounds: int = 30, inner: int = 20) -> dict[str, float]:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((batch, k), dtype=np.float32)
    w = rng.standard_normal((n, k), dtype=np.float32)
    b = rng.standard_normal(n, dtype=np.float32)
    dy = rng.standard_normal((batch, n), dtype=np.float32)
    ws = Workspace()
    for name, v in {"X": x, "W": w, "b": b, "dY": dy}.items():
        ws.feed_blob(name, v)
    fc = create_operator(CreateOperator("FC", ["X", "W", "b"], ["Y"]), ws)
    fc_nopack = create_operator(CreateOperator("FC", ["X", "W", "b"], ["Y2"]), ws)
    fc_nopack._weight = lambda: fc_nopack._w_view  # the unpacked path, for comparison
    grad = create_operator(CreateOperator("FCGradient", ["X", "W", "dY"], ["dW", "db", "dX"]), ws)

    y = np.empty((batch, n), np.float32)
    wt = np.ascontiguousarray(w.T)
    dw, db, dx = np.empty_like(w), np.empty_like(b), np.empty_like(x)

    def numpy_fc():
        np.matmul(x, w.T, out=y)
        y.__iadd__(b)

    def numpy_fc_packed():
        np.matmul(x, wt, out=y)
        y.__iadd__(b)

    def numpy_grad():
        np.matmul(dy.T, x, out=dw)
        np.sum(dy, axis=0, out=db)
        np.matmul(dy, w, out=dx)

    return time_round_robin(
        {
            "framework FC": fc.run,
            "framework FC unpacked": fc_nopack.run,
            "numpy X@W.T+b": numpy_fc,
            "numpy packed": numpy_fc_packed,
            "framework FCGradient": grad.run,
            "numpy gradient": numpy_grad,
        },
        rounds=rounds,
        inner=inner,
    )


def main() -> None:
    assert fc_module._PACK_MIN_ROWS >= 1
    for batch in (1, 64, 1024):
        r = bench(batch, inner=20 if batch < 1024 else 3)
        fw, npy = r["framework FC"], r["numpy X@W.T+b"]
        print(
            f"batch {batch:5d}: FC {fw * 1e6:8.1f} us | numpy {npy * 1e6:8.1f} us | ratio {fw / npy:.3f} | "
            f"vs packed numpy {fw / r['numpy packed']:.3f} | unpacked FC / FC {r['framework FC unpacked'] / fw:.3f} | "
            f"FCGradient / numpy {r['framework FCGradient'] / r['numpy gradient']:.3f}"
        )


if __name__ == "__main__":
    main()
