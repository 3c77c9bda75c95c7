"""The benchmarks of ``python -m bench`` (bench/run.py), as functions ``bench_x(cfg) -> [Row]``.

Each builds its contenders (our net, the hand-written numpy floor, PyTorch eager, onnxruntime and
onnx's ReferenceEvaluator where they apply and are installed), checks that they compute the same
numbers, and times them in interleaved rounds with the order rotated every round. Times are
medians in seconds per call, keyed by column: ``ours``, ``numpy``, ``torch``, ``ort``, ``onnx_ref``.
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # before numpy loads BLAS

import shutil  # noqa: E402
import statistics  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402
from typing import Any, Callable  # noqa: E402

import numpy as np  # noqa: E402

from bench.common import fmt_time, time_round_robin  # noqa: E402


@dataclass
class Config:
    """How hard to measure: ``rounds`` interleaved rounds, ``scale`` times each benchmark's inner count."""

    rounds: int = 30
    scale: float = 1.0
    warmup: int = 3
    quick: bool = False

    def inner(self, n: int) -> int:
        return max(1, round(n * self.scale))

    def time(self, contenders: dict[str, Callable[[], Any]], inner: int, slow_rounds: int = 3) -> dict[str, float]:
        """Round-robin medians. Contenders slower than ``SLOW`` s per call (onnx's ReferenceEvaluator on
        a CNN, 400 MiB checkpoints) get their own short round-robin (``slow_rounds`` rounds of one call)."""
        slow = {}
        for k, fn in contenders.items():
            t0 = time.perf_counter()
            fn()
            if time.perf_counter() - t0 > SLOW:
                slow[k] = fn
        fast = {k: v for k, v in contenders.items() if k not in slow}
        out = rotated_round_robin(fast, rounds=self.rounds, inner=self.inner(inner), warmup=self.warmup)
        if slow:
            out.update(rotated_round_robin(slow, rounds=min(self.rounds, slow_rounds), inner=1, warmup=0))
        return {k: out[k] for k in contenders}


def rotated_round_robin(
    contenders: dict[str, Callable[[], Any]], rounds: int, inner: int, warmup: int
) -> dict[str, float]:
    """time_round_robin, one round at a time, with the order rotated every round.

    A contender that always runs right after the same other one inherits its cache state (the
    MLP's weights are 2.6 MB): rotating spreads that bias over all contenders alike.
    """
    names = list(contenders)
    if not names:
        return {}
    for fn in contenders.values():
        for _ in range(warmup):
            fn()
    samples: dict[str, list[float]] = {k: [] for k in names}
    for r in range(rounds):
        order = names[r % len(names) :] + names[: r % len(names)]
        for k, v in time_round_robin({k: contenders[k] for k in order}, rounds=1, inner=inner, warmup=0).items():
            samples[k].append(v)
    return {k: statistics.median(v) for k, v in samples.items()}


SLOW = 0.25
QUICK = Config(rounds=5, scale=0.2, warmup=1, quick=True)
TINY = Config(rounds=1, scale=0.0, warmup=1, quick=True)  # one call per contender: the smoke test


@dataclass
class Row:
    """One table row: seconds per call by column; ``per`` divides them for display (e.g. per op)."""

    benchmark: str
    times: dict[str, float]
    note: str = ""
    per: float = 1.0
    extra: dict[str, Any] = field(default_factory=dict)

    def ratio(self, col: str) -> float | None:
        if col in self.times and "numpy" in self.times:
            return self.times[col] / self.times["numpy"]
        return None


def optional(fn: Callable[[], Any]) -> Any:
    """fn() or None when an optional package is missing."""
    try:
        return fn()
    except ImportError:
        return None


def _add_onnx(runs: dict, gets: dict, build_model: Callable[[], Any], feeds: dict[str, np.ndarray]) -> None:
    """Add the onnxruntime and ReferenceEvaluator contenders of one model (when installed)."""
    from bench import onnx_models

    model = optional(build_model)
    if model is None:
        return
    for col, runner in (("ort", onnx_models.ort_runner), ("onnx_ref", onnx_models.reference_runner)):
        got = optional(lambda runner=runner: runner(model, feeds))
        if got is not None:
            runs[col], gets[col] = got


def _check(gets: dict, ref: np.ndarray, what: str, rtol: float = 2e-4, atol: float = 1e-6) -> None:
    for col, get in gets.items():
        np.testing.assert_allclose(np.asarray(get()), ref, rtol=rtol, atol=atol, err_msg=f"{what}: {col}")


# -- benchmarks --------------------------------------------------------------------------------------


def bench_op_overhead(cfg: Config) -> list[Row]:
    from bench import onnx_models, op_overhead

    fns = op_overhead.contenders()
    loop_int = fns.pop("numpy loop")  # np.maximum(a, 0, out=b): the Python 0 is converted on every call
    arrs = [np.zeros(op_overhead.SHAPE, np.float32) for _ in range(op_overhead.N_OPS + 1)]
    pairs = list(zip(arrs[:-1], arrs[1:]))
    zero, inf, maximum = np.zeros((), np.float32), np.array(np.inf, np.float32), np.maximum
    clip = np._core.umath.clip  # the ufunc behind np.clip: what our Relu calls for floats

    def numpy_loop() -> None:  # the floor: the fastest hand-written Relu loop, the same call our op makes
        for a, b in pairs:
            clip(a, zero, inf, b)

    def maximum_loop() -> None:
        for a, b in pairs:
            maximum(a, zero, out=b)

    runs = {
        "ours": fns.pop("simple net"),
        "numpy": numpy_loop,
        "dag": fns.pop("dag net (1 worker)"),
        "nocompile": fns.pop("simple net, run() only"),
        "loop_int": loop_int,
        "loop_max": maximum_loop,
    }
    if "torch eager" in fns:
        runs["torch"] = fns.pop("torch eager")
    gets: dict = {}
    x = np.random.default_rng(0).standard_normal(op_overhead.SHAPE).astype(np.float32)
    _add_onnx(runs, gets, lambda: onnx_models.exported(op_overhead.relu_chain("onnx"), {}, {"x0": x}), {"x0": x})
    _check(gets, np.maximum(x, 0), "relu chain")
    t = cfg.time(runs, inner=20)
    n = op_overhead.N_OPS
    dag_t, nocomp, li, lm = t.pop("dag"), t.pop("nocompile"), t.pop("loop_int"), t.pop("loop_max")
    note = (
        f"per op; floor: clip(a, 0, inf, b) over prebound 0-d bounds; dag (1 worker) {fmt_time(dag_t / n)}, "
        f"simple without compile() {fmt_time(nocomp / n)}; loops of np.maximum(a, zero, out=b) "
        f"{fmt_time(lm / n)}, of np.maximum(a, 0, out=b) (bench/op_overhead.py) {fmt_time(li / n)}"
    )
    extra = {"per_op": t["ours"] / n, "vs_int_loop": t["ours"] / li}
    return [Row(f"per-op overhead ({n} chained Relu, float32 {op_overhead.SHAPE})", t, note, per=n, extra=extra)]


def bench_add_chain(cfg: Config) -> list[Row]:
    """200 chained Add ops (x_{i+1} = x_i + c) on float32 (4,): the per-op overhead of a binary op."""
    from bench import onnx_models, op_overhead
    from framework.core import CreateOperator
    from framework.memory.workspace import Workspace
    from framework.proto.framework_pb2 import NetDef

    n, shape = op_overhead.N_OPS, op_overhead.SHAPE
    rng = np.random.default_rng(0)
    x, c = rng.standard_normal(shape).astype(np.float32), np.full(shape, 0.5, np.float32)
    ws = Workspace()
    ws.feed_blob("x0", x)
    ws.feed_blob("c", c)
    net_def = NetDef(name="add_chain", external_input=["x0", "c"], external_output=[f"x{n}"])
    net_def.op.extend(CreateOperator("Add", [f"x{i}", "c"], [f"x{i + 1}"]) for i in range(n))
    net = ws.create_net(net_def)
    net.run()
    arrs = [x] + [np.empty(shape, np.float32) for _ in range(n)]
    pairs = list(zip(arrs[:-1], arrs[1:]))
    add = np.add

    def numpy_loop() -> None:  # positional out: numpy's fastest call form
        for a, b in pairs:
            add(a, c, b)

    runs: dict = {"ours": net.run, "numpy": numpy_loop}
    gets: dict = {"ours": lambda: ws.fetch_blob(f"x{n}")}
    torch = optional(lambda: __import__("torch"))
    if torch is not None:
        ts = [torch.from_numpy(x.copy())] + [torch.empty(shape) for _ in range(n)]
        tc, tpairs = torch.from_numpy(c), list(zip(ts[:-1], ts[1:]))

        def torch_eager() -> None:
            with torch.inference_mode():
                for a, b in tpairs:
                    torch.add(a, tc, out=b)

        runs["torch"], gets["torch"] = torch_eager, lambda: ts[-1].numpy()
    _add_onnx(runs, gets, lambda: onnx_models.exported(net_def, {"c": c}, {"x0": x}), {"x0": x})
    t = cfg.time(runs, inner=20)
    _check(gets, x + np.float32(0.5) * n, "add chain", rtol=1e-5, atol=1e-5)
    note = "per op; floor: np.add(a, c, b) over prebound arrays"
    return [Row(f"per-op overhead ({n} chained Add, float32 {shape})", t, note, per=n, extra={"per_op": t["ours"] / n})]


def bench_mlp(cfg: Config) -> list[Row]:
    from bench import mlp_inference as m

    rows = []
    batches = m.BATCHES
    for batch in batches:
        runs, _ = m.contenders(batch)
        t = cfg.time(runs, inner={1: 50, 64: 10}.get(batch, 2))
        rows.append(Row(f"MLP 784-512-512-10 inference, batch {batch}", t, "simple net: FC-Relu-FC-Relu-FC-Softmax"))
    return rows


def bench_train_step(cfg: Config) -> list[Row]:
    from bench import train_step

    rows = []
    for batch in (64,) if cfg.quick else (64, 256):
        runs = {"ours": train_step.framework_step(batch)[0], "numpy": train_step.numpy_step(batch)}
        torch_run = optional(lambda batch=batch: train_step.torch_step(batch))
        if torch_run is not None:
            runs["torch"] = torch_run
        t = cfg.time(runs, inner=5)
        rows.append(
            Row(
                f"MLP training step, batch {batch}",
                t,
                "fwd + bwd + softmax xent + SGD; torch: nn.Linear + autograd + optim.SGD",
            )
        )
    return rows


def bench_lenet(cfg: Config) -> list[Row]:
    from bench import lenet, onnx_models
    from framework.proto.framework_pb2 import NetDef

    rng = np.random.default_rng(0)
    p = lenet.params(rng)
    x = rng.standard_normal((lenet.BATCH, 1, 28, 28)).astype(np.float32)
    runs, gets = {}, {}
    runs["numpy"], get_ref = lenet.numpy_nhwc(x, p)
    runs["ours"] = lenet.our_net(x, p)
    got = optional(lambda: lenet.torch_eager(x, p))
    if got is not None:
        runs["torch"], gets["torch"] = got
    lenet_def = NetDef(
        name="lenet", op=lenet.lenet_ops("NCHW"), external_input=["data", *p], external_output=["softmax"]
    )
    _add_onnx(runs, gets, lambda: onnx_models.exported(lenet_def, p, {"data": x}), {"data": x})
    _check(gets, get_ref(), "LeNet", rtol=1e-3, atol=1e-5)
    t = cfg.time(runs, inner=5)
    note = "Conv5-Pool-Conv5-Pool-FC500-Relu-FC10-Softmax, NCHW net; floor: NHWC im2col numpy"
    return [Row(f"LeNet CNN inference, batch {lenet.BATCH}", t, note)]


def bench_dag(cfg: Config) -> list[Row]:
    from bench import dag
    from framework.memory.workspace import Workspace

    ws = Workspace()
    rng = np.random.default_rng(0)
    ws.feed_blob("X", rng.standard_normal((dag.N, dag.N)).astype(np.float32))
    ws.feed_blob("W", (rng.standard_normal((dag.N, dag.N)) / np.sqrt(dag.N)).astype(np.float32))
    runs = {}
    for kind, col in (("dag", "ours"), ("simple", "simple")):
        net = ws.create_net(dag.gemm_branches(f"bench_{kind}", kind))
        net.run()
        runs[col] = net.run
    runs["numpy"] = dag.numpy_serial(ws.fetch_blob("X"), ws.fetch_blob("W"))
    # 15 back-to-back runs per round: a vCPU left idle while another contender ran on one core wakes
    # slowly, and with few runs per round the first dag run's start-up cost hides the speed-up.
    t = cfg.time(runs, inner=15)
    simple = t.pop("simple")
    # Process CPU time over wall time while the dag net runs: about 2 when both branches really ran at
    # once, about 1 when the cores were taken by other processes.
    w0, c0 = time.perf_counter(), time.process_time()
    for _ in range(cfg.inner(10)):
        runs["ours"]()
    parallelism = (time.process_time() - c0) / max(time.perf_counter() - w0, 1e-9)
    note = (
        f"2 workers x 1 BLAS thread (threads are the subject); simple net {fmt_time(simple)}, "
        f"dag speed-up over simple {simple / t['ours']:.2f}x, process CPU / wall during dag runs "
        f"{parallelism:.2f}; floor: serial numpy"
    )
    title = f"dag vs simple: 2 independent branches of {dag.DEPTH} MatMul {dag.N}x{dag.N}"
    return [Row(title, t, note, extra={"speedup": simple / t["ours"]})]


def bench_save_load(cfg: Config) -> list[Row]:
    """Save and Load ops (minidb) of bench/save_load.py's 100 tensors of 4 MiB, vs its atomic plain file.

    Quick runs use 8 tensors. lmdb (framework.db.blobs) is timed alongside and reported in the notes.
    """
    from bench import save_load as sl
    from framework.core import CreateOperator
    from framework.db.blobs import read_blobs, write_blobs
    from framework.memory.workspace import Workspace
    from framework.proto.framework_pb2 import NetDef

    n_full = sl.N_TENSORS
    sl.N_TENSORS = 8 if cfg.quick else n_full
    folder = tempfile.mkdtemp(prefix="bench_run_save_load_")
    try:
        tensors = sl.make_tensors()
        names = [n for n, _ in tensors]
        nbytes = sum(t.nbytes for _, t in tensors)
        ws = Workspace(root_folder=folder)
        for n, t in tensors:
            ws.feed_blob(n, t.data())
        save = NetDef(name="save", external_input=names)
        save.op.append(CreateOperator("Save", names, [], db="ckpt.minidb", db_type="minidb"))
        load = NetDef(name="load")
        load.op.append(CreateOperator("Load", [], names, db="ckpt.minidb", db_type="minidb"))
        save_net = ws.create_net(save)
        save_net.run()
        load_net = ws.create_net(load)
        plain, lmdb = os.path.join(folder, "plain.bin"), os.path.join(folder, "ckpt.lmdb")
        sl.plain_save(plain, tensors)
        write_blobs("lmdb", lmdb, tensors)
        load_net.run()
        for n, t in tensors:
            np.testing.assert_array_equal(ws.fetch_blob(n), t.data(), err_msg=f"Save/Load: {n}")
        wanted = {n: n for n in names}
        saves = cfg.time(
            {
                "ours": save_net.run,
                "numpy": lambda: sl.plain_save(plain, tensors),
                "lmdb": lambda: write_blobs("lmdb", lmdb, tensors),
            },
            inner=1,
            slow_rounds=7,
        )
        loads = cfg.time(
            {
                "ours": load_net.run,
                "numpy": lambda: sl.plain_load(plain),
                "lmdb": lambda: read_blobs([("lmdb", lmdb)], wanted),
            },
            inner=1,
            slow_rounds=7,
        )
    finally:
        sl.N_TENSORS = n_full
        shutil.rmtree(folder, ignore_errors=True)
    gb = nbytes / 2**30
    rows = []
    for kind, t in (("Save", saves), ("Load", loads)):
        lm = t.pop("lmdb")
        note = (
            f"{len(names)} x 4 MiB; minidb {gb / t['ours']:.2f} GB/s, plain file {gb / t['numpy']:.2f} GB/s, "
            f"lmdb {gb / lm:.2f} GB/s (target: minidb >= 0.8 GB/s); floor: atomic plain-file "
            + ("write + fsync + rename" if kind == "Save" else "read into fresh arrays")
        )
        rows.append(Row(f"{kind} op, minidb ({gb * 1024:.0f} MiB checkpoint)", t, note, extra={"gbps": gb / t["ours"]}))
    return rows


BENCHMARKS: dict[str, Callable[[Config], list[Row]]] = {
    "op_overhead": bench_op_overhead,
    "add_chain": bench_add_chain,
    "mlp": bench_mlp,
    "train_step": bench_train_step,
    "lenet": bench_lenet,
    "dag": bench_dag,
    "save_load": bench_save_load,
}
