"""FC, FCGradient and SoftmaxWithLoss on one and two intra-op threads against numpy and PyTorch.

The shapes of a training step's small products (a recurrent step's 20 x 256 by 256 x 1024, its transposed
input gradient, MLP layers) and the LM's loss over 700 x 10k logits. ``framework``: the op's run() (native
jobs through numpy's own CBLAS on two threads, kernels/native_gemm.py; the loss in one compiled pass per row);
``numpy``: the same products as preallocated ``np.matmul`` calls plus the bias (one BLAS thread: numpy has no
split of its own here); ``torch``: ``F.linear`` / the gradient's two ``mm`` and a sum / ``F.cross_entropy``,
``torch.set_num_threads``. Wall-time medians, interleaved rounds (bench/common.py), each block after a 50 ms
pause (torch's OpenMP threads spin on after its calls) and 50 untimed calls (on this VM an idle vCPU takes a few
milliseconds of work to come up to speed: the first calls after a pause ran 1.5-2.5x slower on two threads);
BLAS pinned to one thread as a net's run pins it (``RUNTIME.enter_net``).

Run: ``python -m bench.split_products [--rounds 15]``.
"""

from __future__ import annotations

import argparse

import numpy as np

from bench.common import fmt_time, markdown_table, time_round_robin

# (label, op, M, K, N): FC / FCTransposed Y (M, N) from X (M, K); FCGradient of an FC of those dims
PRODUCTS = [
    ("LSTM step, gates", "FC", 20, 256, 1024),
    ("LSTM step, dX", "FCTransposed", 20, 1024, 256),
    ("LSTM step, gradient", "FCGradient", 20, 256, 1024),
    ("MLP layer", "FC", 64, 512, 512),
    ("MLP layer, gradient", "FCGradient", 64, 512, 512),
    ("wide layer", "FC", 128, 1024, 1024),
    ("small layer", "FC", 32, 256, 256),
]
LOSS = (700, 10000)  # the LM's logits


def _product_case(op_type: str, m: int, k: int, n: int):
    """(a maker of the framework's callable, numpy callable, torch callable) of one product on the same values."""
    import torch

    from framework.core import CreateOperator
    from framework.memory.workspace import Workspace
    from framework.ops import create_operator

    rng = np.random.default_rng(0)
    x = rng.standard_normal((m, k), dtype=np.float32)
    w = rng.standard_normal((k, n) if op_type == "FCTransposed" else (n, k), dtype=np.float32)
    b = rng.standard_normal(n, dtype=np.float32)
    dy = rng.standard_normal((m, n), dtype=np.float32)
    ws = Workspace()
    for name, v in (("X", x), ("W", w), ("B", b), ("dY", dy)):
        ws.feed_blob(name, v)
    if op_type == "FCGradient":
        op = create_operator(CreateOperator(op_type, ["X", "W", "dY"], ["dW", "dB", "dX"]), ws)
        dw, db, dx, ones = np.empty_like(w), np.empty_like(b), np.empty_like(x), np.ones(m, np.float32)
        tx, tw, tdy = torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(dy)

        def numpy_run() -> None:
            np.matmul(dy.T, x, out=dw)
            np.matmul(ones, dy, out=db)
            np.matmul(dy, w, out=dx)

        def torch_run() -> None:
            tdy.t().mm(tx), tdy.sum(0), tdy.mm(tw)

        return (lambda: op.run), numpy_run, torch_run
    op = create_operator(CreateOperator(op_type, ["X", "W", "B"], ["Y"]), ws)
    y = np.empty((m, n), np.float32)
    wk = w if op_type == "FCTransposed" else w.T
    tx, tw, tb = torch.from_numpy(x), torch.from_numpy(np.ascontiguousarray(wk.T)), torch.from_numpy(b)

    def numpy_fc() -> None:
        np.matmul(x, wk, out=y)
        np.add(y, b, out=y)

    return (lambda: op.run), numpy_fc, lambda: torch.nn.functional.linear(tx, tw, tb)


def _loss_case(n: int, d: int):
    import torch

    from framework.core import CreateOperator
    from framework.memory.workspace import Workspace
    from framework.ops import create_operator
    from framework.ops.nn.softmax import _softmax_xent_closure

    rng = np.random.default_rng(1)
    x = (rng.standard_normal((n, d)) * 3).astype(np.float32)
    labels = rng.integers(0, d, n).astype(np.int32)
    ws = Workspace()
    ws.feed_blob("x", x)
    ws.feed_blob("l", labels)
    op = create_operator(CreateOperator("SoftmaxWithLoss", ["x", "l"], ["p", "loss"]), ws)
    op.run()
    p, rows, picked = np.empty_like(x), np.empty((2, n, 1), np.float32), np.empty(n, np.float32)
    xent, idx = _softmax_xent_closure(x, p, rows, picked), np.arange(n) * d + labels  # numpy's six passes
    tx, tl = torch.from_numpy(x), torch.from_numpy(labels.astype(np.int64))
    return op.compile, lambda: xent(idx), lambda: torch.nn.functional.cross_entropy(tx, tl)


def _repeat(fn, n: int):
    def run() -> None:
        for _ in range(n):
            fn()

    return run


def main(argv=None) -> list[list[str]]:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=15)
    args = p.parse_args(argv)
    import torch

    import framework
    from framework.runtime.state import RUNTIME

    cases = [(f"{label}: {op} {m} x {k} -> {n}", _product_case(op, m, k, n)) for label, op, m, k, n in PRODUCTS]
    cases.append((f"LM loss: SoftmaxWithLoss {LOSS[0]} x {LOSS[1]}", _loss_case(*LOSS)))
    rows = []
    RUNTIME.enter_net()  # BLAS at one thread per intra-op thread, as in a net's run
    try:
        for name, (make_ours, numpy_run, torch_run) in cases:
            times = {}
            for threads in (1, 2):
                framework.set_num_threads(threads)
                torch.set_num_threads(threads)
                ours = make_ours()  # run(), or the compiled closure made for this thread count
                ours()
                fns = {"ours": ours, "numpy": numpy_run, "torch": torch_run}
                # each block after a pause (torch's OpenMP threads spin on after its calls and would take a core
                # from the next contender) and 50 untimed calls: the idle second vCPU needs a few ms of work to
                # come up to speed, which a training step's continuous work gives it
                warm = {k: _repeat(f, 50) for k, f in fns.items()}
                t = time_round_robin(fns, rounds=args.rounds, inner=20, settle=0.05, before=warm)
                times[threads] = t
            t1, t2 = times[1], times[2]
            rows.append(
                [name, fmt_time(t1["ours"]), fmt_time(t2["ours"]), f"{t1['ours'] / t2['ours']:.2f}x",
                 f"{t2['ours'] / t1['numpy']:.2f}", fmt_time(t2["torch"]), f"{t2['ours'] / t2['torch']:.2f}"]
            )  # fmt: skip
            print(" | ".join(rows[-1]))
    finally:
        RUNTIME.exit_net()
        framework.set_num_threads(1)
        torch.set_num_threads(1)
    header = ["case", "ours, 1 thread", "ours, 2 threads", "2-thread gain", "ours 2t / numpy", "torch, 2 threads",
              "ours / torch, 2 threads"]  # fmt: skip
    print(markdown_table(rows, header))
    return rows


if __name__ == "__main__":
    main()
