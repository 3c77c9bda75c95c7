"""Cold start and the default install on the real CNNs: each row a fresh process.

    python -m bench.real_models.cold_start [--models resnet50 ...] [--batch 1] [--rounds 5]

Fresh processes, each timed from its first line (interpreter start not included) to its first
prediction (wall and CPU time), then ``--rounds`` more predictions for a median of CPU time:

- ``cold`` (the first model only): the compiled kernels with an empty cache (a new user cache folder):
  they compile;
- ``warm`` (every model): the same folder after ``framework warmup`` filled it: they load;
- ``numpy``: ``FRAMEWORK_NO_JIT=1``, as the default install (no ``jit`` extra, no numba) runs;
- ``ort`` (unless ``--no-ort``): onnxruntime on our export of the same model, one intra-op thread.

1 thread, one process at a time. The user cache folder is a temporary one (``FRAMEWORK_CACHE_DIR``);
numba's own ``NUMBA_CACHE_DIR`` is removed from the children's environment so the kernels cache there.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

T0, C0 = time.perf_counter(), time.process_time()


def child(name: str, batch: int, rounds: int, kind: str = "ours") -> dict:
    """In this fresh process: seconds to import, to build the model and its Predictor (``kind`` "ours")
    or onnxruntime's session (``kind`` "ort"), to the first prediction, the kernels' compile/load
    seconds, and the median of ``rounds`` more predictions."""
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    import numpy as np

    import framework.ops  # noqa: F401
    from bench.real_models.nets import build
    from bench.real_models.runner import make_runner
    from framework.kernels import window_jit

    t_import = time.perf_counter()
    model = build(name, batch)
    run, get = make_runner(kind, model, model.input_data(), 1)
    t_built = time.perf_counter()
    run()
    get()
    t_first, c_first = time.perf_counter(), time.process_time()
    times = []  # CPU time of the process per prediction (one thread runs): other processes do not add to it
    for _ in range(rounds):
        t = time.process_time()
        run()
        times.append(time.process_time() - t)
    return {
        "import": t_import - T0,
        "build": t_built - t_import,
        "first_run": t_first - t_built,
        "to_first": t_first - T0,
        "to_first_cpu": c_first - C0,
        "compile": window_jit.compile_seconds(),
        "median": float(np.median(times)) if times else float("nan"),
        "jit": window_jit.available(),
    }


def _spawn(name: str, batch: int, rounds: int, env: dict, kind: str = "ours") -> dict:
    cmd = [sys.executable, "-m", "bench.real_models.cold_start", "--child", name, str(batch), str(rounds), kind]
    res = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800)
    for line in res.stdout.splitlines():
        if line.startswith("{"):
            return json.loads(line)
    raise RuntimeError(f"{name}: child failed:\n{res.stderr[-3000:]}")


def _env(**extra) -> dict:
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_CACHE_DIR", "FRAMEWORK_NO_JIT")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [repo, os.environ.get("PYTHONPATH")]))
    env.update(OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", **extra)
    return env


def measure(models, batch: int, rounds: int, log=print, cold_start: bool = True, ort: bool = True) -> list[dict]:
    """The rows: ``cold`` for the first model only (one empty cache for the whole run, filled by it
    and by ``framework warmup`` right after; ``cold_start`` False: warmup only), ``warm``, ``numpy``
    and (``ort``) ``ort`` for every model."""
    rows = []
    with tempfile.TemporaryDirectory() as cache:
        env = _env(FRAMEWORK_CACHE_DIR=cache)
        cold = _spawn(models[0], batch, rounds, env) if cold_start else None
        t = time.perf_counter()
        subprocess.run([sys.executable, "-m", "framework", "warmup"], env=env, capture_output=True, timeout=1800)
        log(f"(framework warmup: {time.perf_counter() - t:.1f} s)")
        for name in models:
            warm = _spawn(name, batch, rounds, env)
            numpy = _spawn(name, batch, rounds, _env(FRAMEWORK_CACHE_DIR=cache, FRAMEWORK_NO_JIT="1"))
            row = {"model": name, "batch": batch, "cold": cold if name == models[0] else None}
            row |= {"warm": warm, "numpy": numpy, "ort": _spawn(name, batch, rounds, env, "ort") if ort else None}
            rows.append(row)
            log(line(row))
    return rows


def line(r: dict) -> str:
    c, w, n, o = r["cold"], r["warm"], r["numpy"], r.get("ort")
    cold = f"{c['to_first']:.1f} s ({c['compile']:.1f} compiling; CPU {c['to_first_cpu']:.1f} s)" if c else "-"
    return (
        f"| {r['model']} | {r['batch']} | {cold} | {w['to_first']:.2f} s ({w['compile']:.2f} loading; CPU "
        f"{w['to_first_cpu']:.2f} s) | "
        f"{n['to_first']:.2f} s (CPU {n['to_first_cpu']:.2f} s) | {w['median'] * 1e3:.1f} ms | "
        f"{n['median'] * 1e3:.1f} ms | "
        f"{n['median'] / w['median']:.2f}x | "
        + (f"{o['median'] * 1e3:.1f} ms | {w['median'] / o['median']:.2f}x |" if o else "- | - |")
    )


HEADER = (
    "| model | batch | to first prediction, empty cache | after `framework warmup` | default install (numpy) "
    "| median, jit | median, numpy | numpy / jit | median, onnxruntime | jit / onnxruntime |\n"
    "|---|---|---|---|---|---|---|---|---|---|"
)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "--models",
        nargs="+",
        default=["resnet50", "squeezenet1_1", "resnet20_cifar", "shufflenet_v2", "densenet121", "alexnet"],
    )
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--no-cold", action="store_true", help="skip the empty-cache row (it compiles every kernel)")
    p.add_argument("--no-ort", action="store_true", help="skip onnxruntime's row")
    p.add_argument("--child", nargs=4, metavar=("MODEL", "BATCH", "ROUNDS", "KIND"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child[0], int(args.child[1]), int(args.child[2]), args.child[3])))
        return 0
    print(HEADER)
    measure(args.models, args.batch, args.rounds, cold_start=not args.no_cold, ort=not args.no_ort)
    return 0


if __name__ == "__main__":
    sys.exit(main())
