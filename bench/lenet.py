"""LeNet-style inference at batch 64 through our operators, against hand-written numpy and torch.

Net: 1x28x28 -> Conv 5x5, 20 -> MaxPool 2 -> Conv 5x5, 50 -> MaxPool 2 -> FC 500 -> Relu -> FC 10
-> Softmax.

Contenders (timed round-robin in one process, medians; see bench/common.py):
- ``ops NCHW`` / ``ops NHWC``: our Operators, built once over a Workspace and run in a tight
  loop (``for run in runs: run()``);
- ``net NCHW``: the same ops as a NetDef through the simple executor;
- ``numpy NHWC``: hand-written, preallocated numpy (NHWC im2col via strided views, one GEMM per
  conv, bias added to the GEMM output, 2x2 pooling by maximum over strided slices) -- the floor of this design;
- ``torch eager``: ``torch.inference_mode`` with one intra-op thread, if torch is importable.

Run: ``OPENBLAS_NUM_THREADS=1 python -m bench.lenet``. Prints medians and ratios to numpy.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np

from bench.common import fmt_time, markdown_table, pin_blas_threads, time_round_robin

BATCH = 64


def params(rng):
    s = 0.1
    return {
        "W1": (rng.standard_normal((20, 1, 5, 5)) * s).astype(np.float32),
        "b1": (rng.standard_normal(20) * s).astype(np.float32),
        "W2": (rng.standard_normal((50, 20, 5, 5)) * s).astype(np.float32),
        "b2": (rng.standard_normal(50) * s).astype(np.float32),
        "W3": (rng.standard_normal((500, 800)) * s).astype(np.float32),
        "b3": (rng.standard_normal(500) * s).astype(np.float32),
        "W4": (rng.standard_normal((10, 500)) * s).astype(np.float32),
        "b4": (rng.standard_normal(10) * s).astype(np.float32),
    }


def lenet_ops(order: str = "NCHW"):
    """The net as OperatorDefs. FC's flattening of an NHWC blob differs from NCHW, so W3 is
    permuted accordingly by the caller."""
    from framework.core import CreateOperator

    ops = [
        CreateOperator("Conv", ["data", "W1", "b1"], ["conv1"], kernel=5, order=order),
        CreateOperator("MaxPool", ["conv1"], ["pool1"], kernel=2, stride=2, order=order),
        CreateOperator("Conv", ["pool1", "W2", "b2"], ["conv2"], kernel=5, order=order),
        CreateOperator("MaxPool", ["conv2"], ["pool2"], kernel=2, stride=2, order=order),
        CreateOperator("FC", ["pool2", "W3", "b3"], ["fc3"]),
        CreateOperator("Relu", ["fc3"], ["fc3"]),
        CreateOperator("FC", ["fc3", "W4", "b4"], ["pred"]),
    ]
    from framework.ops import has_op

    if has_op("Softmax"):
        ops.append(CreateOperator("Softmax", ["pred"], ["softmax"]))
    return ops


def _softmax_into(x, out, tmp):
    np.max(x, axis=1, keepdims=True, out=tmp)
    np.subtract(x, tmp, out=out)
    np.exp(out, out=out)
    np.sum(out, axis=1, keepdims=True, out=tmp)
    np.divide(out, tmp, out=out)


def our_ops(order: str, x_nchw, p):
    """A tight loop over our Operators' bound run methods."""
    from framework.memory.workspace import Workspace
    from framework.ops import create_operator

    ws = Workspace()
    feed = dict(p)
    if order == "NHWC":
        feed["W1"] = np.ascontiguousarray(p["W1"].transpose(0, 2, 3, 1))
        feed["W2"] = np.ascontiguousarray(p["W2"].transpose(0, 2, 3, 1))
        # FC flattens pool2 as (H, W, C) instead of (C, H, W).
        feed["W3"] = np.ascontiguousarray(p["W3"].reshape(500, 50, 4, 4).transpose(0, 2, 3, 1).reshape(500, 800))
        ws.feed_blob("data", np.ascontiguousarray(x_nchw.transpose(0, 2, 3, 1)))
    else:
        ws.feed_blob("data", x_nchw)
    for k, v in feed.items():
        ws.feed_blob(k, v)
    defs = lenet_ops(order)
    runs = [create_operator(d, ws).run for d in defs]
    extra = None
    if len(defs) == 7:  # no Softmax op registered yet: finish in numpy
        pred = ws.get_blob("pred")
        tmp = np.empty((BATCH, 1), np.float32)
        out = np.empty((BATCH, 10), np.float32)

        def extra():
            _softmax_into(pred._obj._array, out, tmp)

        runs.append(extra)

    def run_all():
        for r in runs:
            r()

    run_all()
    final = "softmax" if extra is None else None
    return run_all, (lambda: ws.fetch_blob(final)) if final else (lambda: out)


def our_net(x_nchw, p):
    from framework.memory.workspace import Workspace
    from framework.proto.framework_pb2 import NetDef

    ws = Workspace()
    ws.feed_blob("data", x_nchw)
    for k, v in p.items():
        ws.feed_blob(k, v)
    net = NetDef(name="lenet", type="simple")
    net.op.extend(lenet_ops("NCHW"))
    net.external_input.extend(["data", *p])
    n = ws.create_net(net)
    n.run()
    return n.run


def numpy_nhwc(x_nchw, p):
    """Hand-written preallocated numpy, NHWC im2col."""
    from numpy.lib.stride_tricks import as_strided

    x = np.ascontiguousarray(x_nchw.transpose(0, 2, 3, 1))  # (64, 28, 28, 1)
    w1 = np.ascontiguousarray(p["W1"].transpose(2, 3, 1, 0).reshape(25, 20))
    w2 = np.ascontiguousarray(p["W2"].transpose(2, 3, 1, 0).reshape(500, 50))
    w3 = np.ascontiguousarray(p["W3"].reshape(500, 50, 4, 4).transpose(2, 3, 1, 0).reshape(800, 500))
    w4 = np.ascontiguousarray(p["W4"].T)
    b1, b2, b3, b4 = p["b1"], p["b2"], p["b3"], p["b4"]
    n = x.shape[0]
    col1 = np.empty((n, 24, 24, 5, 5, 1), np.float32)
    c1 = np.empty((n, 24, 24, 20), np.float32)
    p1 = np.empty((n, 12, 12, 20), np.float32)
    col2 = np.empty((n, 8, 8, 5, 5, 20), np.float32)
    c2 = np.empty((n, 8, 8, 50), np.float32)
    p2 = np.empty((n, 4, 4, 50), np.float32)
    f3 = np.empty((n, 500), np.float32)
    f4 = np.empty((n, 10), np.float32)
    out = np.empty((n, 10), np.float32)
    tmp = np.empty((n, 1), np.float32)

    def win(a, k):
        s = a.strides
        oh, ow = a.shape[1] - k + 1, a.shape[2] - k + 1
        return as_strided(a, (a.shape[0], oh, ow, k, k, a.shape[3]), (s[0], s[1], s[2], s[1], s[2], s[3]))

    v1 = win(x, 5)
    v2 = win(p1, 5)
    c1m, c2m = c1.reshape(-1, 20), c2.reshape(-1, 50)
    col1m, col2m = col1.reshape(-1, 25), col2.reshape(-1, 500)
    c1r, c2r = c1.reshape(n, 12, 2, 12, 2, 20), c2.reshape(n, 4, 2, 4, 2, 50)
    # 2x2 max pooling as three maximum calls over strided slices (faster than np.max over axes).
    q1 = [c1r[:, :, i, :, j] for i in (0, 1) for j in (0, 1)]
    q2 = [c2r[:, :, i, :, j] for i in (0, 1) for j in (0, 1)]
    p2m = p2.reshape(n, 800)

    def run():
        np.copyto(col1, v1)
        np.matmul(col1m, w1, out=c1m)
        np.add(c1m, b1, out=c1m)
        np.maximum(q1[0], q1[1], out=p1)
        np.maximum(p1, q1[2], out=p1)
        np.maximum(p1, q1[3], out=p1)
        np.copyto(col2, v2)
        np.matmul(col2m, w2, out=c2m)
        np.add(c2m, b2, out=c2m)
        np.maximum(q2[0], q2[1], out=p2)
        np.maximum(p2, q2[2], out=p2)
        np.maximum(p2, q2[3], out=p2)
        np.matmul(p2m, w3, out=f3)
        np.add(f3, b3, out=f3)
        np.maximum(f3, 0, out=f3)
        np.matmul(f3, w4, out=f4)
        np.add(f4, b4, out=f4)
        _softmax_into(f4, out, tmp)

    run()
    return run, lambda: out


def torch_eager(x_nchw, p):
    import torch
    import torch.nn.functional as F

    torch.set_num_threads(1)
    t = {k: torch.from_numpy(v) for k, v in p.items()}
    xt = torch.from_numpy(x_nchw)
    res = {}

    def run():
        with torch.inference_mode():
            h = F.max_pool2d(F.conv2d(xt, t["W1"], t["b1"]), 2)
            h = F.max_pool2d(F.conv2d(h, t["W2"], t["b2"]), 2)
            h = F.relu(F.linear(h.reshape(h.shape[0], -1), t["W3"], t["b3"]))
            res["y"] = torch.softmax(F.linear(h, t["W4"], t["b4"]), dim=1)

    run()
    return run, lambda: res["y"].numpy()


def main() -> None:
    pin_blas_threads(1)
    rng = np.random.default_rng(0)
    p = params(rng)
    x = rng.standard_normal((BATCH, 1, 28, 28)).astype(np.float32)
    contenders, results = {}, {}
    for label, (fn, get) in (
        ("numpy NHWC", numpy_nhwc(x, p)),
        ("ops NCHW", our_ops("NCHW", x, p)),
        ("ops NHWC", our_ops("NHWC", x, p)),
    ):
        contenders[label] = fn
        results[label] = get
    try:
        contenders["net NCHW"] = our_net(x, p)
    except Exception as e:
        print(f"(net NCHW skipped: {type(e).__name__}: {e})")
    try:
        fn, get = torch_eager(x, p)
        contenders["torch eager"] = fn
        results["torch eager"] = get
    except ImportError:
        print("(torch not importable: torch eager skipped)")
    ref = results["numpy NHWC"]()
    for label, get in results.items():
        np.testing.assert_allclose(get(), ref, rtol=1e-3, atol=1e-5, err_msg=label)
    med = time_round_robin(contenders, rounds=40, inner=10)
    base = med["numpy NHWC"]
    rows = [[k, fmt_time(v), f"{v / base:.2f}"] for k, v in med.items()]
    print(f"LeNet batch {BATCH}, OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS')}, torch threads 1")
    print(markdown_table(rows, ["contender", "median", "ratio to numpy"]))
    if "torch eager" in med:
        for k in ("ops NCHW", "ops NHWC", "net NCHW"):
            if k in med:
                print(f"{k} / torch eager = {med[k] / med['torch eager']:.2f}")


if __name__ == "__main__":
    main()
