"""Ours against onnxruntime per output shape, in the same minutes: one profiled onnxruntime inference,
then one of ours timed op by op, in turn (1 thread). On a shared host whose speed moves by up to 2x
between minutes, per-op numbers from two separate runs do not compare; these do.

    OPENBLAS_NUM_THREADS=1 python -m bench.real_models.ort_shapes --models squeezenet1_1 --batches 16

Convolutions are grouped by their output's (channels, height, width): onnxruntime rewrites a net (its
NCHWc layout; test-mode BatchNormalization + Relu become a Conv of its own there), so shapes are what
the two lists share. Everything else is listed per op type (onnxruntime's with its output shape).
Times in ms per inference: ours in wall time of each op's run(), onnxruntime's from its profiler.
"""

from __future__ import annotations

import os

for _v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import argparse  # noqa: E402
import gc  # noqa: E402
import json  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections import defaultdict  # noqa: E402

from bench.real_models.nets import BUILDERS, build  # noqa: E402


def compare(model, x, runs: int) -> tuple[dict, dict]:
    """({(kind, shape): ours ms}, {(kind, shape): onnxruntime ms}) per inference, ``runs`` of each in turn."""
    import onnxruntime as ort

    from bench.real_models.runner import ours_runner, set_threads
    from bench.real_models.torch_impl import framework_onnx_model_bytes

    set_threads(1)
    run, _ = ours_runner(model, x)
    for _ in range(3):
        run()
    ops = list(run.__self__.net.ops)
    so = ort.SessionOptions()
    so.intra_op_num_threads = so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.enable_profiling = True
    with tempfile.TemporaryDirectory() as tmp:
        so.profile_file_prefix = os.path.join(tmp, "ort")
        sess = ort.InferenceSession(framework_onnx_model_bytes(model, x), so, providers=["CPUExecutionProvider"])
        feed = {model.input_name: x}
        warm = 2
        for _ in range(warm):
            sess.run(None, feed)
        ours: dict = defaultdict(float)
        keys = [_our_key(op) for op in ops]
        clock = time.perf_counter
        gc.collect()
        gc.disable()
        try:
            for _ in range(runs):
                sess.run(None, feed)
                for key, op in zip(keys, ops):
                    t = clock()
                    op.run()
                    ours[key] += (clock() - t) * 1e3 / runs
        finally:
            gc.enable()
        with open(sess.end_profiling()) as f:
            events = json.load(f)
    nodes = [e for e in events if e.get("cat") == "Node" and e["name"].endswith("_kernel_time")]
    nodes = nodes[len(nodes) * warm // (runs + warm) :]  # the timed inferences only
    theirs: dict = defaultdict(float)
    for e in nodes:
        shape = tuple(e["args"]["output_type_shape"][0]["float"][1:])
        theirs[(e["args"]["op_name"], shape)] += e["dur"] / 1e3 / runs
    return dict(ours), dict(theirs)


def _our_key(op) -> tuple:
    k = getattr(op, "_kernel", None)
    if k is not None and hasattr(k, "kind"):
        return ("Conv", (k.m, *k.geo.out))
    return (op.type, ())


def report(ours: dict, theirs: dict) -> str:
    lines = [f"ours {sum(ours.values()):.1f} ms, onnxruntime {sum(theirs.values()):.1f} ms (sums of per-op times)"]
    convs = {k for k in ours if k[0] == "Conv"} | {k for k in theirs if k[0] == "Conv"}
    for key in sorted(convs, key=lambda k: -max(ours.get(k, 0.0), theirs.get(k, 0.0))):
        a, b = ours.get(key, 0.0), theirs.get(key, 0.0)
        ratio = f"{a / b:5.2f}x" if a and b else "   --"
        lines.append(f"  conv out {str(key[1]):16s} ours {a:8.2f}  onnxruntime {b:8.2f}  {ratio}")
    lines.append("  other ops, ours: " + ", ".join(f"{k[0]} {v:.2f}" for k, v in ours.items() if k[0] != "Conv"))
    other = defaultdict(float)
    for k, v in theirs.items():
        if k[0] != "Conv":
            other[k[0]] += v
    lines.append("  other ops, onnxruntime: " + ", ".join(f"{k} {v:.2f}" for k, v in other.items()))
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", nargs="*", default=list(BUILDERS))
    ap.add_argument("--batches", nargs="*", type=int, default=[1, 16])
    ap.add_argument("--runs", type=int, default=5)
    a = ap.parse_args()
    for name in a.models:
        for batch in a.batches:
            model = build(name, batch)
            print(f"\n== {name} batch {batch}: " + report(*compare(model, model.input_data(), a.runs)), flush=True)


if __name__ == "__main__":
    main()
