"""Where the time of one real-model inference goes: ours per op kind against PyTorch's per aten op.

    OPENBLAS_NUM_THREADS=1 python -m bench.real_models.profile --models resnet20_cifar --batches 16

Ours: the Predictor's optimized net run whole, in order (after warm-up; an op run again on its own
output, in place, would time other data), each op timed in process CPU time, grouped by op type and,
for convolutions, by kernel (pointwise/im2col/winograd/direct/depthwise, blocked or not), window and
group; GFLOP/s per group from the op's cost. PyTorch: ``torch.profiler`` self CPU time per
aten op over the same number of inferences (1 thread). Both lists are printed as ms per inference.
"""

from __future__ import annotations

import os

for _v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import argparse  # noqa: E402
import gc  # noqa: E402
import time  # noqa: E402
from collections import defaultdict  # noqa: E402

from bench.real_models.nets import BUILDERS, build  # noqa: E402


def op_label(op) -> str:
    """Group label of one created op: type, and for convolutions the kernel that runs it."""
    k = getattr(op, "_kernel", None)
    if k is None or not hasattr(k, "kind"):
        return op.type
    geo = k.geo
    kind = k.kind + (" blocked" if getattr(k, "blocked", False) else "")
    g = "dw" if k.kind == "depthwise" else (f"g{k.g}" if k.g > 1 else "")
    return f"{op.type} {geo.kernel[0]}x{geo.kernel[1]}/s{geo.stride[0]} {g} {kind} M{k.m} P{k.p}".replace("  ", " ")


def profile_ours(model, x, runs: int) -> dict[str, list[float]]:
    """label -> [CPU seconds per inference, FLOPs per inference, op count]."""
    from bench.real_models.runner import ours_runner, set_threads

    set_threads(1)
    run, _ = ours_runner(model, x)
    for _ in range(2):
        run()
    from framework.predictor.predictor import Predictor  # noqa: F401  (the runner built one)

    net = run.__self__.net
    out: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0])
    labels = [op_label(op) for op in net.ops]
    for lab, op in zip(labels, net.ops):
        out[lab][1] += _flops(op)
        out[lab][2] += 1
    clock = time.process_time
    gc.collect()  # no collection pause inside an op's time (see bench.common.time_round_robin)
    gc.disable()
    for _ in range(runs):
        for lab, op in zip(labels, net.ops):
            t = clock()
            op.run()
            out[lab][0] += (clock() - t) / runs
    gc.enable()
    return out


def _flops(op) -> float:
    k = getattr(op, "_kernel", None)
    if k is None or not hasattr(k, "kind"):
        return 0.0
    return 2.0 * k.n * k.m * k.p * k.kg


def profile_torch(model, x, runs: int) -> dict[str, float]:
    import torch
    from torch.profiler import ProfilerActivity, profile

    from bench.real_models.torch_impl import make_torch_net

    torch.set_num_threads(1)
    net = make_torch_net(model.predict_net, model.weights, model.logits_name)
    xt = torch.from_numpy(x)
    with torch.inference_mode():
        for _ in range(2):
            net(xt)
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            for _ in range(runs):
                net(xt)
    return {e.key: e.self_cpu_time_total / 1e6 / runs for e in prof.key_averages() if e.self_cpu_time_total > 0}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", nargs="*", default=list(BUILDERS))
    ap.add_argument("--batches", nargs="*", type=int, default=[1, 16])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--no-torch", action="store_true")
    a = ap.parse_args()
    from framework.runtime.blas_kernel import blas_kernel_info

    print(f"load average {os.getloadavg()}; numpy's BLAS: {blas_kernel_info()}")
    for name in a.models:
        for batch in a.batches:
            model = build(name, batch)
            x = model.input_data()
            ours = profile_ours(model, x, a.runs)
            total = sum(v[0] for v in ours.values())
            print(f"\n== {name} batch {batch}: ours {total * 1e3:.1f} ms CPU (sum of the ops' times)")
            for lab, (t, f, cnt) in sorted(ours.items(), key=lambda kv: -kv[1][0]):
                gf = f" {f / t / 1e9:6.1f} GFLOP/s" if f else ""
                print(f"  {t * 1e3:8.2f} ms {100 * t / total:5.1f}%  x{cnt:<3d} {lab}{gf}")
            if a.no_torch:
                continue
            tt = profile_torch(model, x, a.runs)
            ttotal = sum(tt.values())
            print(f"  -- torch {ttotal * 1e3:.1f} ms self CPU")
            for k, t in sorted(tt.items(), key=lambda kv: -kv[1])[:10]:
                print(f"  {t * 1e3:8.2f} ms {100 * t / ttotal:5.1f}%  {k}")


if __name__ == "__main__":
    main()
