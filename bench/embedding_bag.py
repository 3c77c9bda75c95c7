"""Embedding-bag forward and sparse training step: SparseLengthsSum on a 1,000,000 x 64 float32 table,
2,048 bags of 30 ids (docs/sparse.md's benchmark).

Rows:
- ``forward``: the pooled embeddings of one batch.
  - ``framework``: a net of one ``SparseLengthsSum(table, ids, lengths)``, ``net.run()``;
  - ``numpy``: hand-written ``np.take`` into a preallocated buffer + one sum over the bag axis (the floor);
  - ``torch``: ``nn.EmbeddingBag(mode="sum")`` on ``(ids, offsets)`` under ``no_grad``.
- ``train step``: forward, the gradient of the pooled output (dY given), and the optimizer update of the
  rows looked up.
  - ``framework``: SparseLengthsSum, its gradient op (``SparseLengthsIndicesInGradientSumGradient``:
    a GradientSlice) and ``RowWiseSparseAdagrad``, in place on the table;
  - ``numpy``: the same three steps hand-written (row-wise Adagrad with repeated ids in order);
  - ``torch Adagrad`` / ``torch SparseAdam``: ``EmbeddingBag(sparse=True)``, ``backward(dY)``, the
    optimizer's ``step()`` (PyTorch has no row-wise Adagrad: its Adagrad keeps one accumulator per
    element, SparseAdam two moments per element).

All contenders are timed in interleaved rounds in one process (medians, bench/common.py); BLAS and torch on
one thread. Also: framework buffers allocated per steady-state run (MemoryReporter). Run:
``python -m bench.embedding_bag`` (``--quick`` for a small table).
"""

from __future__ import annotations

import os
import sys

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402

from bench.common import allocations_per_run, fmt_time, markdown_table, pin_blas_threads, time_round_robin  # noqa: E402

ROWS, DIM, BAGS, BAG = 1_000_000, 64, 2048, 30
LR, EPS = 0.01, 1e-5


def _inputs(rows: int, dim: int, bags: int, bag: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    table = (rng.standard_normal((rows, dim)) * 0.1).astype(np.float32)
    ids = rng.integers(0, rows, bags * bag).astype(np.int64)
    lengths = np.full(bags, bag, np.int32)
    dy = rng.standard_normal((bags, dim)).astype(np.float32)
    return table, ids, lengths, dy


def framework_nets(table, ids, lengths, dy):
    """(forward run, train-step run, workspace) over one workspace holding a copy of the table."""
    from framework.core import CreateOperator
    from framework.memory.workspace import Workspace
    from framework.proto.framework_pb2 import NetDef

    ws = Workspace()
    for name, v in (("table", table.copy()), ("ids", ids), ("lengths", lengths), ("pooled_grad", dy)):
        ws.feed_blob(name, v)
    ws.feed_blob("moment", np.zeros(table.shape[0], np.float32))
    ws.feed_blob("lr", np.array([-LR], np.float32))
    fwd = NetDef(name="emb_forward")
    fwd.op.append(CreateOperator("SparseLengthsSum", ["table", "ids", "lengths"], ["pooled"]))
    step = NetDef(name="emb_step")
    step.op.append(CreateOperator("SparseLengthsSum", ["table", "ids", "lengths"], ["pooled"]))
    step.op.append(
        CreateOperator(
            "SparseLengthsIndicesInGradientSumGradient", ["pooled_grad", "lengths", "ids"], ["table_grad_values"]
        )
    )
    step.op.append(
        CreateOperator(
            "RowWiseSparseAdagrad",
            ["table", "moment", "ids", "table_grad_values", "lr"],
            ["table", "moment"],
            epsilon=EPS,
        )
    )
    f, s = ws.create_net(fwd), ws.create_net(step)
    f.run()
    return f.run, s.run, ws


def numpy_fns(table, ids, lengths, dy):
    """Hand-written forward and train step over preallocated arrays."""
    table = table.copy()
    moment = np.zeros(table.shape[0], np.float32)
    bags, dim = len(lengths), table.shape[1]
    bag = int(lengths[0])
    rows = np.empty((ids.size, dim), np.float32)
    pooled = np.empty((bags, dim), np.float32)
    grad = np.empty((ids.size, dim), np.float32)

    item = np.dtype((np.void, dim * 4))  # whole rows as opaque items, no bounds buffering: numpy's fastest gather
    table_rows, rows_items = table.view(item).reshape(-1), rows.view(item).reshape(-1)

    def forward() -> np.ndarray:
        np.take(table_rows, ids, out=rows_items, mode="clip")
        return np.sum(rows.reshape(bags, bag, dim), axis=1, out=pooled)

    def step() -> None:
        forward()
        np.copyto(grad.reshape(bags, bag, dim), dy[:, None])  # d pooled / d row = 1 for every row of the bag
        # row-wise Adagrad, repeated ids in order: distinct rows in one step, repeated ones by running sums
        msq = np.einsum("ij,ij->i", grad, grad) / dim
        dup = np.bincount(ids, minlength=table.shape[0])[ids] > 1
        u = np.flatnonzero(~dup)
        r = ids[u]
        hr = moment[r] + msq[u]
        moment[r] = hr
        table[r] += grad[u] * (-LR / (np.sqrt(hr) + EPS))[:, None]
        d = np.flatnonzero(dup)
        order = d[np.argsort(ids[d], kind="stable")]
        s, g, ms = ids[order], grad[order], msq[order]
        starts = np.flatnonzero(np.r_[True, s[1:] != s[:-1]])
        run = np.cumsum(ms)
        hk = moment[s] + run - np.repeat(run[starts] - ms[starts], np.diff(np.r_[starts, s.size]))
        g *= (-LR / (np.sqrt(hk) + EPS))[:, None]
        table[s[starts]] += np.add.reduceat(g, starts, axis=0)
        moment[s[starts]] = hk[np.r_[starts[1:], s.size] - 1]

    return forward, step, table, moment


def torch_fns(table, ids, lengths, dy):
    import torch

    torch.set_num_threads(1)
    offsets = torch.from_numpy((np.cumsum(lengths) - lengths).astype(np.int64))
    idt, dyt = torch.from_numpy(ids), torch.from_numpy(dy)
    fns = {}
    bag = torch.nn.EmbeddingBag.from_pretrained(torch.from_numpy(table.copy()), freeze=False, mode="sum")

    def forward():
        with torch.no_grad():
            return bag(idt, offsets)

    fns["forward"] = forward
    for name, make in (
        ("Adagrad", lambda p: torch.optim.Adagrad(p, lr=LR, eps=EPS)),
        ("SparseAdam", lambda p: torch.optim.SparseAdam(p, lr=LR)),
    ):
        mod = torch.nn.EmbeddingBag.from_pretrained(
            torch.from_numpy(table.copy()), freeze=False, mode="sum", sparse=True
        )
        opt = make(list(mod.parameters()))

        def step(mod=mod, opt=opt):
            opt.zero_grad(set_to_none=True)
            mod(idt, offsets).backward(dyt)
            opt.step()

        fns[f"step {name}"] = step
    return fns


def check_same_numbers(fw_forward, ws, np_forward, torch_forward) -> None:
    fw_forward()
    ours = ws.fetch_blob("pooled")
    np.testing.assert_allclose(ours, np_forward(), rtol=1e-4, atol=1e-5)
    if torch_forward is not None:
        np.testing.assert_allclose(ours, torch_forward().numpy(), rtol=1e-4, atol=1e-5)


def main(
    rows: int = ROWS,
    dim: int = DIM,
    bags: int = BAGS,
    bag: int = BAG,
    rounds: int = 15,
    inner: int = 3,
    use_torch: bool = True,
) -> dict:
    pin_blas_threads(1)
    table, ids, lengths, dy = _inputs(rows, dim, bags, bag)
    fw_fwd, fw_step, ws = framework_nets(table, ids, lengths, dy)
    np_fwd, np_step, _, _ = numpy_fns(table, ids, lengths, dy)
    th = {}
    if use_torch:
        try:
            th = torch_fns(table, ids, lengths, dy)
        except ImportError:  # torch is optional
            pass
    check_same_numbers(fw_fwd, ws, np_fwd, th.get("forward"))
    fwd = time_round_robin(
        {"framework": fw_fwd, "numpy": np_fwd, **({"torch": th["forward"]} if th else {})}, rounds=rounds, inner=inner
    )
    steps = {"framework": fw_step, "numpy": np_step}
    steps.update({f"torch {k[5:]}": v for k, v in th.items() if k.startswith("step ")})
    step = time_round_robin(steps, rounds=rounds, inner=inner)
    allocs = {"forward": allocations_per_run(fw_fwd), "train step": allocations_per_run(fw_step)}
    out_rows = []
    for what, times in (("forward", fwd), ("train step", step)):
        for name, t in times.items():
            out_rows.append([what, name, fmt_time(t), f"{t / times['numpy']:.2f}x"])
        for name, t in times.items():
            if name.startswith("torch"):
                out_rows.append([what, f"framework / {name}", "", f"{times['framework'] / t:.2f}x"])
        out_rows.append([what, "framework buffers allocated per run", f"{allocs[what]:g}", ""])
    print(f"SparseLengthsSum: table {rows:,} x {dim}, {bags:,} bags x {bag} ids")
    print(markdown_table(out_rows, ["row", "contender", "median", "vs numpy"]))
    return {"forward": fwd, "train step": step, "allocations": allocs}


if __name__ == "__main__":
    if "--quick" in sys.argv:
        main(rows=20_000, dim=16, bags=64, bag=8, rounds=3, inner=1)
    else:
        main()
