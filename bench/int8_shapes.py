"""Int8Conv / Int8FC per shape class on the integer GEMM kernel against the exact float32 GEMM path they had
before (the same op objects, the kernel switched off for the float rounds), 1 thread, process CPU time, medians
of interleaved rounds; each case's codes are compared between the two paths before timing.

    OPENBLAS_NUM_THREADS=1 python -m bench.int8_shapes [--rounds 7]

Classes: FC at batch 1 and larger, 1x1 convs (the GEMM reads the NHWC input itself), 3x3 convs (windows read in
place: implicit GEMM), the 3-channel stem (windows copied as rows), grouped convs (one GEMM per group). Random
codes, weights at zero point 128.
"""

from __future__ import annotations

import os

for _v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import argparse  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

from bench.common import markdown_table, time_round_robin  # noqa: E402

# (label, op type, X shape, W shape, conv arguments)
CASES = [
    ("FC 1 x 128 -> 1000", "Int8FC", (1, 128), (1000, 128), {}),
    ("FC 1 x 1024 -> 1024", "Int8FC", (1, 1024), (1024, 1024), {}),
    ("FC 64 x 1024 -> 1024", "Int8FC", (64, 1024), (1024, 1024), {}),
    ("1x1 conv 7x7x512 -> 512", "Int8Conv", (1, 7, 7, 512), (512, 1, 1, 512), {}),
    ("1x1 conv 60x60x128 -> 768", "Int8Conv", (1, 60, 60, 128), (768, 1, 1, 128), {}),
    ("1x1 conv 80x107x16 -> 16", "Int8Conv", (1, 80, 107, 16), (16, 1, 1, 16), {}),
    ("3x3 conv 56x56x64 -> 64", "Int8Conv", (1, 56, 56, 64), (64, 3, 3, 64), {"pad": 1}),
    ("3x3 conv 7x7x512 -> 512", "Int8Conv", (1, 7, 7, 512), (512, 3, 3, 512), {"pad": 1}),
    ("3x3 s2 conv 224x224x3 -> 32", "Int8Conv", (1, 224, 224, 3), (32, 3, 3, 3), {"pad": 1, "stride": 2}),
    ("1x1 conv 28x28x240 -> 240, 3 groups", "Int8Conv", (1, 28, 28, 240), (240, 1, 1, 80), {"group": 3}),
    ("3x3 conv 28x28x128 -> 128, 4 groups", "Int8Conv", (1, 28, 28, 128), (128, 3, 3, 32), {"pad": 1, "group": 4}),
]


def _op(kind: str, x_shape: tuple, w_shape: tuple, args: dict, rng):
    from framework.core import CreateOperator
    from framework.memory.int8_tensor import Int8TensorCPU
    from framework.memory.workspace import Workspace
    from framework.ops import create_operator

    ws = Workspace()
    ws.feed_blob("X", Int8TensorCPU.from_numpy(rng.integers(0, 256, x_shape).astype(np.uint8), 0.02, 7))
    ws.feed_blob("W", Int8TensorCPU.from_numpy(rng.integers(0, 256, w_shape).astype(np.uint8), 0.01, 128))
    bias = rng.integers(-500, 500, w_shape[0]).astype(np.int32)
    ws.feed_blob("b", Int8TensorCPU.from_numpy(bias, 0.0002, 0))
    if kind == "Int8Conv":
        args = dict(args, kernel=w_shape[1], order="NHWC")
    op = create_operator(CreateOperator(kind, ["X", "W", "b"], ["Y"], Y_scale=0.5, Y_zero_point=3, **args), ws)
    return ws, op


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--inner", type=int, default=5)
    a = p.parse_args(argv)
    from framework.kernels import int8_gemm_path

    if not int8_gemm_path.available():
        print("the integer GEMM kernel cannot run here (no AVX-512 VNNI, or no numba): nothing to compare")
        return
    real = int8_gemm_path.available
    rng = np.random.default_rng(0)
    rows = []
    try:
        for label, kind, xs, wsh, args in CASES:
            ws, op = _op(kind, xs, wsh, args, rng)

            def kernel(op=op):
                int8_gemm_path.available = real
                op.run()

            def float_path(op=op):
                int8_gemm_path.available = lambda: False
                op.run()

            codes = []
            for run in (kernel, float_path):
                run()
                codes.append(ws.get_blob("Y")._obj.t.array.copy())
            assert np.array_equal(*codes), f"{label}: the two paths disagree"
            t = time_round_robin({"kernel": kernel, "float": float_path}, rounds=a.rounds, inner=a.inner,
                                 clock=time.process_time)  # fmt: skip
            ratio = t["kernel"] / t["float"]
            rows.append([label, f"{t['kernel'] * 1e3:.3f}", f"{t['float'] * 1e3:.3f}", f"{ratio:.2f}"])
    finally:
        int8_gemm_path.available = real
    print(markdown_table(rows, ["shape class (1 thread)", "integer kernel ms", "float32 GEMM ms", "kernel / float"]))


if __name__ == "__main__":
    main()
