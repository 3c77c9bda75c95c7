"""One training step of an MLP 784-512-512-10 (forward, backward, softmax
cross-entropy, plain SGD update) at batch 64 and 256.

Contenders (timed round-robin in one process, medians; see bench/common.py):
- ``framework``: a ModelHelper/brew net (StopGradient on the data, FC, Relu,
  SoftmaxWithLoss, gradient ops from AddGradientOperators, Iter + LearningRate + WeightedSum from
  optimizer.build_sgd) created once, then ``net.run()``;
- ``framework, compile_ops=0``: the same net without the executor's compiled fast path;
- ``numpy``: the same step hand-written over preallocated numpy arrays (the floor);
- ``torch eager``: nn.Linear layers, F.cross_entropy, backward, SGD step (if importable).

BLAS and torch run on one thread. Also reports the buffers the framework allocates
per steady-state step (MemoryReporter). Run: ``python -m bench.train_step``.
"""

from __future__ import annotations

import numpy as np

from bench.common import allocations_per_run, fmt_time, markdown_table, pin_blas_threads, time_round_robin

DIMS = (784, 512, 512, 10)
LR = 0.01


def _data(batch: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((batch, DIMS[0])).astype(np.float32)
    y = rng.integers(0, DIMS[-1], size=batch).astype(np.int32)
    params = []
    for din, dout in zip(DIMS[:-1], DIMS[1:]):
        params.append((rng.standard_normal((dout, din)) * np.sqrt(2.0 / din)).astype(np.float32))
        params.append(np.zeros(dout, np.float32))
    return x, y, params


def framework_step(batch: int, compile_ops: bool = True):
    """(step callable, workspace) of the framework's training net (``compile_ops``: the net's fast path)."""
    from framework.caffe2.python import brew, optimizer
    from framework.caffe2.python.model_helper import ModelHelper
    from framework.memory.workspace import Workspace

    x, y, params = _data(batch)
    m = ModelHelper(f"mlp_bench_{batch}_{int(compile_ops)}", init_params=False)
    h = m.net.StopGradient("data", "data")  # Caffe2's idiom: no gradient for the input batch
    n_layers = len(DIMS) - 1
    for k in range(n_layers):
        h = brew.fc(m, h, f"fc{k + 1}", dim_in=DIMS[k], dim_out=DIMS[k + 1])
        if k < n_layers - 1:
            h = brew.relu(m, h, h)
    m.net.SoftmaxWithLoss([h, "label"], ["softmax", "loss"])
    m.AddGradientOperators(["loss"])
    optimizer.build_sgd(m, LR)
    ws = Workspace()
    ws.run_net_once(m.param_init_net)  # ONE, optimizer_iteration
    for p, v in zip(m.params, params):
        ws.feed_blob(str(p), v)
    ws.feed_blob("data", x)
    ws.feed_blob("label", y)
    net_def = m.net.Proto()
    if not compile_ops:
        from framework.proto.args import make_argument

        net_def.arg.append(make_argument("compile_ops", 0))
    net = ws.create_net(net_def)
    net.run()
    return net.run, ws


def numpy_step(batch: int):
    """A hand-written training step over preallocated arrays."""
    x, y, params = _data(batch)
    w1, b1, w2, b2, w3, b3 = params
    h1 = np.empty((batch, DIMS[1]), np.float32)
    h2 = np.empty((batch, DIMS[2]), np.float32)
    z = np.empty((batch, DIMS[3]), np.float32)
    zmax = np.empty((batch, 1), np.float32)
    zsum = np.empty((batch, 1), np.float32)
    dz = np.empty_like(z)
    dh2 = np.empty_like(h2)
    dh1 = np.empty_like(h1)
    m1 = np.empty(h1.shape, bool)
    m2 = np.empty(h2.shape, bool)
    grads = [np.empty_like(p) for p in params]
    gw1, gb1, gw2, gb2, gw3, gb3 = grads
    rows = np.arange(batch)
    lr = np.float32(LR)
    inv_b = np.float32(1.0 / batch)

    def step() -> float:
        np.dot(x, w1.T, out=h1)
        np.add(h1, b1, out=h1)
        np.maximum(h1, 0, out=h1)
        np.dot(h1, w2.T, out=h2)
        np.add(h2, b2, out=h2)
        np.maximum(h2, 0, out=h2)
        np.dot(h2, w3.T, out=z)
        np.add(z, b3, out=z)
        # softmax cross-entropy
        np.max(z, axis=1, keepdims=True, out=zmax)
        np.subtract(z, zmax, out=dz)
        np.exp(dz, out=dz)
        np.sum(dz, axis=1, keepdims=True, out=zsum)
        np.divide(dz, zsum, out=dz)
        loss = -float(np.log(np.maximum(dz[rows, y], 1e-20)).mean())
        dz[rows, y] -= 1.0
        np.multiply(dz, inv_b, out=dz)
        # backward
        np.dot(dz.T, h2, out=gw3)
        np.sum(dz, axis=0, out=gb3)
        np.dot(dz, w3, out=dh2)
        np.greater(h2, 0, out=m2)
        np.multiply(dh2, m2, out=dh2)
        np.dot(dh2.T, h1, out=gw2)
        np.sum(dh2, axis=0, out=gb2)
        np.dot(dh2, w2, out=dh1)
        np.greater(h1, 0, out=m1)
        np.multiply(dh1, m1, out=dh1)
        np.dot(dh1.T, x, out=gw1)
        np.sum(dh1, axis=0, out=gb1)
        # SGD
        for p, g in zip(params, grads):
            g *= lr
            p -= g
        return loss

    return step


def torch_step(batch: int):
    import torch

    torch.set_num_threads(1)
    x, y, params = _data(batch)
    layers = []
    for k, (din, dout) in enumerate(zip(DIMS[:-1], DIMS[1:])):
        lin = torch.nn.Linear(din, dout)
        with torch.no_grad():
            lin.weight.copy_(torch.from_numpy(params[2 * k]))
            lin.bias.copy_(torch.from_numpy(params[2 * k + 1]))
        layers.append(lin)
        if k < len(DIMS) - 2:
            layers.append(torch.nn.ReLU())
    model = torch.nn.Sequential(*layers)
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    xt, yt = torch.from_numpy(x), torch.from_numpy(y.astype(np.int64))

    def step() -> None:
        opt.zero_grad(set_to_none=False)
        loss = torch.nn.functional.cross_entropy(model(xt), yt)
        loss.backward()
        opt.step()

    return step


def main() -> dict:
    pin_blas_threads(1)
    results = {}
    rows = []
    for batch in (64, 256):
        fw, _ = framework_step(batch)
        fns = {"framework": fw, "framework, compile_ops=0": framework_step(batch, False)[0], "numpy": numpy_step(batch)}
        try:
            fns["torch eager"] = torch_step(batch)
        except ImportError:  # torch is optional
            pass
        times = time_round_robin(fns, rounds=25, inner=5)
        allocs = allocations_per_run(fw)
        results[batch] = (times, allocs)
        base = times["numpy"]
        for name, t in times.items():
            rows.append([str(batch), name, fmt_time(t), f"{t / base:.2f}x"])
        if "torch eager" in times:
            ratio = times["framework"] / times["torch eager"]
            rows.append([str(batch), "framework / torch eager", "", f"{ratio:.2f}x"])
        rows.append([str(batch), "framework buffers allocated per step", f"{allocs:g}", ""])
    print(markdown_table(rows, ["batch", "contender", "median", "vs numpy"]))
    return results


if __name__ == "__main__":
    main()
