"""Time, GFLOP/s and peak memory of the six real CNNs: ours against PyTorch eager and onnxruntime.

    OPENBLAS_NUM_THREADS=1 python -m bench.real_models                      # everything
    python -m bench.real_models --models resnet20_cifar --batches 1 --threads 1 --rounds 3
    python -m bench.real_models --memory                                    # + peak memory column

For each model and batch the contenders run the same weights on the same input; their logits are
compared (max |diff| relative to max |logit|) before timing. Per thread count, contenders are timed
in interleaved rounds (bench/common.time_round_robin) and the median per-inference time is kept.
Contenders:
- ``ours``: the framework as a Predictor runs it (the inference optimization pass when it exists);
- ``ours-raw``: the plain net (``Workspace.create_net``), no rewrites;
- ``torch``: PyTorch eager under ``inference_mode``, ``torch.set_num_threads(threads)``;
- ``ort``: onnxruntime over our own ONNX export (``framework.onnx.export``), ``intra_op_num_threads = threads``.

Peak memory (``--memory``) runs each contender in a fresh subprocess (bench/real_models/memory.py):
the rise of the process's peak RSS (VmHWM, reset through /proc/self/clear_refs after the weights and
input are loaded) over creating the runner and two inferences.
"""

from __future__ import annotations

import os

for _v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import argparse  # noqa: E402
import json  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

from bench.common import markdown_table, time_round_robin  # noqa: E402
from bench.real_models.nets import BUILDERS, build, model_flops  # noqa: E402

CONTENDERS = ("ours", "ours-raw", "torch", "ort")
# Which clock times the rounds: "auto" = CPU time of the process for 1-thread rows (robust when other jobs
# share the cores: every contender then runs one compute thread), wall time for more threads.
CLOCK = "auto"
SETTLE_S = 0.15  # untimed pause before each timed block on several threads (onnxruntime's workers spin)


def set_threads(n: int) -> None:
    """Our thread count: the framework's setting when it has one, else BLAS threads."""
    import framework

    setter = getattr(framework, "set_num_threads", None)
    if setter is not None:
        setter(n)
    else:
        framework.set_blas_threads(n)


def ours_runner(model, x: np.ndarray, optimize: bool = True):
    """(run, get) over the framework: a Predictor (inference optimization pass on if ``optimize``)
    whose parent workspace wraps the weights without a copy (as torch.from_numpy does); parameters the
    pass folded into new ones are then dropped from it (the caller hands its weights over and keeps
    only what the predictor reads). The input is fed once; run() runs the predictor's net (split over
    the threads at batch > 1), get() returns the logits."""
    from framework.memory.tensor import Tensor
    from framework.memory.workspace import Workspace
    from framework.predictor.predictor import Predictor
    from framework.proto.framework_pb2 import NetDef

    params = Workspace()
    for k, v in model.weights.items():
        params.create_blob(k).get_mutable(Tensor).share_external(v)
    net_def = NetDef()
    net_def.CopyFrom(model.predict_net)
    del net_def.external_output[:]
    net_def.external_output.extend([model.logits_name, model.output_name])
    pred = Predictor(NetDef(name="init"), net_def, parent=params, optimize=optimize)
    read = {b for op in pred.optimized_net.op for b in op.input}
    for k in model.weights:
        if k not in read:
            params.remove_blob(k)
    pred.workspace.feed_blob(model.input_name, x)
    return pred.run_net, lambda: pred.workspace.fetch_blob(model.logits_name)


def make_runner(kind: str, model, x: np.ndarray, threads: int = 1):
    if kind == "ours":
        set_threads(threads)
        return ours_runner(model, x, optimize=True)
    if kind == "ours-raw":
        set_threads(threads)
        return ours_runner(model, x, optimize=False)
    from bench.real_models import torch_impl

    if kind == "torch":
        return torch_impl.torch_runner(model, x, threads)
    if kind == "ort":
        return torch_impl.ort_runner(model, x, threads)
    raise KeyError(kind)


def rel_diff(a: np.ndarray, b: np.ndarray) -> float:
    a, b = np.asarray(a, np.float64).reshape(-1), np.asarray(b, np.float64).reshape(-1)
    return float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-30))


def _available(kind: str) -> bool:
    try:
        if kind == "torch":
            import torch  # noqa: F401
        elif kind == "ort":
            import onnx  # noqa: F401
            import onnxruntime  # noqa: F401
    except ImportError:
        return False
    return True


def bench_model(name: str, batch: int, threads_list, rounds: int, contenders, log=print) -> list[dict]:
    """Rows (one per thread count) of median seconds per contender for ``name`` at ``batch``."""
    model = build(name, batch)
    x = model.input_data()
    flops = model_flops(model)
    rows = []
    for threads in threads_list:
        runs, outs = {}, {}
        for kind in contenders:
            t0 = time.perf_counter()
            run, get = make_runner(kind, model, x, threads)
            run()
            outs[kind] = get().copy()
            log(f"  {name} b{batch} t{threads} {kind}: set up + first run {time.perf_counter() - t0:.1f}s")
            runs[kind] = run
        before = {}
        if threads > 1 and "ours" in runs:
            # Our own 1-thread speed in the same interleaved rounds and on the same clock (the 2-thread
            # target is a ratio to it). The thread setting is global: it is switched before each timed
            # block, followed by one untimed run (a switch rebuilds the per-thread copies of the net
            # and re-prepares the kernels; steady state is what is timed).
            run1, get1 = make_runner("ours", model, x, 1)
            run1()
            outs["ours-1t"] = get1().copy()
            runs["ours-1t"] = run1
            before = {
                "ours": lambda run_t=runs["ours"], n=threads: (set_threads(n), run_t()),
                "ours-1t": lambda run1=run1: (set_threads(1), run1()),
            }
        ref = outs.get("torch", outs[contenders[0]])
        diffs = {k: rel_diff(v, ref) for k, v in outs.items()}
        # Big models: few rounds of one call; small ones: more calls per round.
        inner = 1 if flops * batch > 2e9 else 3
        set_threads(threads)
        clock = time.process_time if (CLOCK == "cpu" or CLOCK == "auto" and threads == 1) else time.perf_counter
        # On several threads, a pause before each block lets onnxruntime's spinning workers go idle, so
        # they do not take a core from the next block (see time_round_robin).
        settle = SETTLE_S if threads > 1 else 0.0
        times = time_round_robin(runs, rounds=rounds, inner=inner, warmup=1, clock=clock, before=before, settle=settle)
        rows.append(
            dict(
                model=name,
                batch=batch,
                threads=threads,
                gflop=flops / 1e9,
                times=times,
                diffs=diffs,
                load=os.getloadavg()[0],
                clock="cpu" if clock is time.process_time else "wall",
            )
        )
        log(f"  {name} b{batch} t{threads}: " + ", ".join(f"{k} {v * 1e3:.1f} ms" for k, v in times.items()))
    return rows


def peak_memory(name: str, batch: int, kind: str, threads: int = 1) -> float | None:
    """Peak RSS rise in MiB of one contender in a fresh process (see bench/real_models/memory.py)."""
    cmd = [sys.executable, "-m", "bench.real_models.memory", name, str(batch), kind, str(threads)]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [_repo(), os.environ.get("PYTHONPATH")])))
    res = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)
    for line in res.stdout.splitlines():
        if line.startswith("{"):
            return json.loads(line)["peak_mib"]
    sys.stderr.write(res.stderr[-2000:])
    return None


def jit_first_use_seconds() -> dict:
    """Seconds the first use of the compiled kernels (framework/kernels/window_jit.py) costs a fresh
    process: ``cold`` compiling them (an empty numba cache), ``cached`` loading them from the cache."""
    import tempfile

    code = "from framework.kernels import window_jit as w; print(w.warm_up() if w.available() else -1)"
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        for key, extra in (("cold", {"NUMBA_CACHE_DIR": tmp}), ("cached", {})):
            env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [_repo(), os.environ.get("PYTHONPATH")])))
            env.update(extra)
            if key == "cached":  # fill the normal cache first, then time a second fresh process
                subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, timeout=600)
            res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
            out[key] = float(res.stdout.strip() or "nan")
    return out


def _repo() -> str:
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def table(rows: list[dict], mem: dict | None = None) -> str:
    header = ["model", "batch", "threads", "ours", "ours-raw", "torch", "ort", "ours GFLOP/s", "ours/ort", "ours/torch"]
    header.append("ours speedup vs 1 thread")
    if mem:
        header += ["peak MiB ours / raw / torch / ort"]
    out = []
    for r in rows:
        t = r["times"]

        def ms(k, t=t):
            return f"{t[k] * 1e3:.1f} ms" if k in t else ""

        line = [r["model"], str(r["batch"]), str(r["threads"]), ms("ours"), ms("ours-raw"), ms("torch"), ms("ort")]
        line.append(f"{r['gflop'] / t['ours']:.1f}" if "ours" in t else "")
        line.append(f"{t['ours'] / t['ort']:.2f}" if "ours" in t and "ort" in t else "")
        line.append(f"{t['ours'] / t['torch']:.2f}" if "ours" in t and "torch" in t else "")
        line.append(f"{t['ours-1t'] / t['ours']:.2f}" if "ours-1t" in t else "")
        if mem:
            m = mem.get((r["model"], r["batch"]), {})
            line.append(" / ".join("?" if m.get(k) is None else f"{m[k]:.0f}" for k in CONTENDERS))
        out.append(line)
    return markdown_table(out, header)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", nargs="*", default=list(BUILDERS))
    ap.add_argument("--batches", nargs="*", type=int, default=[1, 16])
    ap.add_argument("--threads", nargs="*", type=int, default=[1, 2])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--contenders", nargs="*", default=None)
    ap.add_argument("--memory", action="store_true", help="also measure peak memory (subprocess per contender)")
    ap.add_argument("--json", help="write the rows as JSON here")
    ap.add_argument("--clock", choices=["auto", "cpu", "wall"], default="auto", help="see CLOCK")
    a = ap.parse_args(argv)
    global CLOCK
    CLOCK = a.clock
    contenders = [c for c in (a.contenders or CONTENDERS) if c.startswith("ours") or _available(c)]
    from framework.runtime.blas_kernel import blas_kernel_info

    print(f"numpy's BLAS: {blas_kernel_info()}", flush=True)
    rows, mem = [], {}
    for name in a.models:
        for batch in a.batches:
            rows += bench_model(name, batch, a.threads, a.rounds, contenders, log=lambda s: print(s, flush=True))
            if a.memory:
                mem[(name, batch)] = {k: peak_memory(name, batch, k) for k in contenders}
                print(f"  {name} b{batch} peak MiB: {mem[(name, batch)]}", flush=True)
    print()
    print(table(rows, mem if a.memory else None))
    print(f"\nload average at the end: {' '.join(f'{v:.1f}' for v in os.getloadavg())}")
    jit = jit_first_use_seconds()
    print(
        f"compiled kernels (numba), first use in a fresh process: {jit['cold']:.2f} s compiling, "
        f"{jit['cached']:.2f} s from the cache (-1: numba not installed)"
    )
    for r in rows:
        bad = {k: v for k, v in r["diffs"].items() if v > 1e-3}
        if bad:
            print(f"WARNING {r['model']} b{r['batch']}: logits differ from torch by {bad}")
    if a.json:
        with open(a.json, "w") as f:
            mem_rows = {f"{k[0]}:{k[1]}": v for k, v in mem.items()}
            json.dump({"rows": rows, "memory": mem_rows, "jit_first_use_s": jit}, f, indent=1)
    return 0
