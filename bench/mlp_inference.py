"""MLP 784-512-512-10 inference (FC-Relu-FC-Relu-FC-Softmax) at batch 1, 64 and 1024.

Contenders (timed round-robin in one process, medians; see bench/common.py):
- ``ours``: the net as a NetDef (FC, in-place Relu, Softmax) run by the ``simple`` executor;
- ``numpy``: hand-written preallocated numpy, the floor: one GEMM per layer into a reused
  buffer, bias and Relu (clip's ufunc) in place, softmax with ufunc reductions into a reused row buffer.
  The weight operand is W's own row-major layout at batch 1 (a GEMV) and a contiguous W^T
  copy above (the layout BLAS prefers for GEMM), the best of both for hand-written code;
- ``torch``: PyTorch eager under ``torch.inference_mode`` (F.linear, relu, softmax), one thread;
- ``ort`` / ``onnx_ref``: onnxruntime (one thread) and onnx's ReferenceEvaluator on the same
  model built with ``onnx.helper`` (Gemm transB=1, Relu, Softmax).

Every contender's output is checked against the numpy floor before timing.
Run: ``python -m bench.mlp_inference [--quick]``.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np

from bench.common import fmt_time, markdown_table, pin_blas_threads, time_round_robin

DIMS = (784, 512, 512, 10)
BATCHES = (1, 64, 1024)


def make_params(seed: int = 0) -> list[tuple[np.ndarray, np.ndarray]]:
    """[(W, b)] per layer, W as Caffe2's (N, K)."""
    rng = np.random.default_rng(seed)
    out = []
    for din, dout in zip(DIMS[:-1], DIMS[1:]):
        w = (rng.standard_normal((dout, din)) * np.sqrt(2.0 / din)).astype(np.float32)
        out.append((w, (rng.standard_normal(dout) * 0.1).astype(np.float32)))
    return out


def make_input(batch: int, seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((batch, DIMS[0])).astype(np.float32)


def mlp_net_def(name: str = "mlp", net_type: str = "simple"):
    """The NetDef: data -> FC -> Relu (in place) -> FC -> Relu -> FC -> Softmax -> prob."""
    from framework.core import CreateOperator
    from framework.proto.framework_pb2 import NetDef

    n = len(DIMS) - 1
    net = NetDef(name=name, type=net_type, external_input=["data"], external_output=["prob"])
    prev = "data"
    for i in range(n):
        net.external_input.extend([f"W{i}", f"b{i}"])
        net.op.append(CreateOperator("FC", [prev, f"W{i}", f"b{i}"], [f"fc{i}"]))
        if i < n - 1:
            net.op.append(CreateOperator("Relu", [f"fc{i}"], [f"fc{i}"]))
        prev = f"fc{i}"
    net.op.append(CreateOperator("Softmax", [prev], ["prob"]))
    return net


def ours(x: np.ndarray, params, ws=None):
    """(run, get_output, net) of the framework net over a fresh (or given) workspace."""
    from framework.memory.workspace import Workspace

    ws = ws if ws is not None else Workspace()
    ws.feed_blob("data", x)
    for i, (w, b) in enumerate(params):
        ws.feed_blob(f"W{i}", w)
        ws.feed_blob(f"b{i}", b)
    net = ws.create_net(mlp_net_def(f"mlp_{x.shape[0]}"))
    net.run()
    return net.run, lambda: ws.fetch_blob("prob"), net


def numpy_floor(x: np.ndarray, params):
    """Hand-written preallocated numpy (see module doc)."""
    batch = x.shape[0]
    ws_ = [w.T if batch == 1 else np.ascontiguousarray(w.T) for w, _ in params]
    bs = [b for _, b in params]
    hs = [np.empty((batch, w.shape[0]), np.float32) for w, _ in params]
    h0, h1, h2 = hs
    w0, w1, w2 = ws_
    b0, b1, b2 = bs
    out = np.empty_like(h2)
    row = np.empty((batch, 1), np.float32)
    zero, inf = np.zeros((), np.float32), np.array(np.inf, np.float32)
    matmul, add, subtract, exp, divide = np.matmul, np.add, np.subtract, np.exp, np.divide
    clip = np._core.umath.clip  # Relu: the ufunc behind np.clip has a SIMD loop, maximum-by-a-scalar not
    rmax, rsum = np.maximum.reduce, np.add.reduce

    def run() -> None:
        matmul(x, w0, out=h0)
        add(h0, b0, out=h0)
        clip(h0, zero, inf, h0)
        matmul(h0, w1, out=h1)
        add(h1, b1, out=h1)
        clip(h1, zero, inf, h1)
        matmul(h1, w2, out=h2)
        add(h2, b2, out=h2)
        rmax(h2, axis=1, keepdims=True, out=row)
        subtract(h2, row, out=out)
        exp(out, out=out)
        rsum(out, axis=1, keepdims=True, out=row)
        divide(out, row, out=out)

    run()
    return run, lambda: out


def torch_eager(x: np.ndarray, params):
    import torch
    import torch.nn.functional as F

    torch.set_num_threads(1)
    xt = torch.from_numpy(x)
    tp = [(torch.from_numpy(w), torch.from_numpy(b)) for w, b in params]
    (w0, b0), (w1, b1), (w2, b2) = tp
    res: list = [None]
    linear, relu, softmax, mode = F.linear, torch.relu, torch.softmax, torch.inference_mode

    def run() -> None:
        with mode():
            res[0] = softmax(linear(relu(linear(relu(linear(xt, w0, b0)), w1, b1)), w2, b2), 1)

    run()
    return run, lambda: res[0].numpy()


def contenders(batch: int) -> tuple[dict, dict]:
    """({column: run}, {column: get_output}) for one batch size; optional columns skipped when not importable."""
    params = make_params()
    x = make_input(batch)
    runs, gets = {}, {}
    runs["numpy"], gets["numpy"] = numpy_floor(x, params)
    runs["ours"], gets["ours"], _ = ours(x, params)
    try:
        runs["torch"], gets["torch"] = torch_eager(x, params)
    except ImportError:
        pass
    try:
        from bench.onnx_models import exported, ort_runner, reference_runner

        weights = {f"{k}{i}": v for i, wb in enumerate(params) for k, v in zip("Wb", wb)}
        model = exported(mlp_net_def(f"mlp_{batch}"), weights, {"data": x})
        try:
            runs["ort"], gets["ort"] = ort_runner(model, {"data": x})
        except ImportError:
            pass
        runs["onnx_ref"], gets["onnx_ref"] = reference_runner(model, {"data": x})
    except ImportError:
        pass
    ref = gets["numpy"]()
    for k, get in gets.items():
        np.testing.assert_allclose(np.asarray(get()), ref, rtol=2e-4, atol=1e-6, err_msg=f"MLP batch {batch}: {k}")
    return runs, gets


def measure(batch: int, rounds: int = 30, quick: bool = False) -> dict[str, float]:
    """Median seconds per inference of each contender at ``batch``."""
    runs, _ = contenders(batch)
    inner = max(1, {1: 50, 64: 10}.get(batch, 2) // (5 if quick else 1))
    return time_round_robin(runs, rounds=rounds, inner=inner, warmup=1 if quick else 3)


def main(quick: bool = False) -> None:
    pin_blas_threads(1)
    rows = []
    for batch in BATCHES:
        t = measure(batch, rounds=5 if quick else 30, quick=quick)
        base = t["numpy"]
        for k, v in t.items():
            rows.append([str(batch), k, fmt_time(v), f"{v / base:.3f}x"])
    print("MLP 784-512-512-10 inference, 1 BLAS/torch/ort thread (medians, round-robin)")
    print(markdown_table(rows, ["batch", "contender", "median", "vs numpy"]))


if __name__ == "__main__":
    import sys

    main("--quick" in sys.argv)
