"""Peak memory of one contender on one model, measured in this (fresh) process.

    python -m bench.real_models.memory MODEL BATCH CONTENDER [THREADS]

Prints one JSON line ``{"peak_mib": ...}``: the peak resident set (VmHWM) during two inferences, over
the process's resident set before the weights were built. The caller builds the weights (numpy), creates
the contender's runner, then drops its own references to the weights, and the peak is reset (through
/proc/self/clear_refs, Linux only) before the inferences: so each contender is charged for the weights
it keeps (shared like torch.from_numpy, or its own copies like onnxruntime's session and our folded
convolutions), its buffers and its working memory, not for construction transients.
"""

from __future__ import annotations

import os

for _v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import gc  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402


def _status(key: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"{key} not in /proc/self/status")


def measure(name: str, batch: int, kind: str, threads: int = 1) -> float:
    from bench.real_models.nets import build
    from bench.real_models.runner import make_runner

    if kind in ("torch", "ort"):  # import the libraries before the baseline: their code is not working memory
        import torch  # noqa: F401

        if kind == "ort":
            import onnxruntime  # noqa: F401
    import framework.ops  # noqa: F401

    if kind.startswith("ours"):  # numba and the compiled kernels are library code too, as torch's
        from framework.kernels import window_jit

        window_jit.warm_up()

    gc.collect()
    base = _status("VmRSS")
    model = build(name, batch)
    x = model.input_data()
    run, get = make_runner(kind, model, x, threads)
    model.weights.clear()
    gc.collect()
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    run()
    run()
    get()
    return (_status("VmHWM") - base) / 2**20


def main() -> int:
    name, batch, kind = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    threads = int(sys.argv[4]) if len(sys.argv) > 4 else 1
    print(json.dumps({"peak_mib": measure(name, batch, kind, threads)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
