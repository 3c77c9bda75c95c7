"""One training step (forward, backward, momentum SGD update) of real CNNs against PyTorch eager.

Models (built with ``brew`` on a ModelHelper, SpatialBN in training mode, a final FC and
SoftmaxWithLoss; gradient ops from ``AddGradientOperators``; momentum SGD from ``optimizer.build_sgd``):

- ``resnet20``: CIFAR ResNet-20 on 3x32x32 (the layout of ``bench/real_models/nets.py``: conv1 3x3
  unpadded, three stages of three basic blocks with 16/32/64 channels, 1x1/2 projection shortcuts,
  average pool 8, FC 10), batch 32 and 64;
- ``resnet18``: torchvision's ResNet-18 on 3x224x224 (7x7/2 conv, 3x3/2 max pool, four stages of two
  basic blocks with 64..512 channels, global average pool, FC 1000), batch 16;
- ``lstm_lm``: an LSTM language model: Gather from a 10k x 256 embedding, ``rnn_cell.LSTM`` with two
  layers of 256 (RecurrentNetwork over LSTMUnit steps), FC 256 -> 10k on the (35 * 20, 256) outputs,
  SoftmaxWithLoss; sequence 35, batch 20. torch: nn.Embedding, nn.LSTM (its gates i, f, g, o are
  Caffe2's i, f, o, g reordered), nn.Linear; the embedding's gradient is sparse here (Gather), dense there.

Contenders, timed round-robin in one process (``bench/common.py``), medians; each timed block (two steps)
after a 50 ms pause and one untimed step (``settle``): after its steps a contender's worker threads keep
spinning for a while (torch's OpenMP pool, our native pool: 300 us), and without the pause they took a core
from the other's next step (ResNet-20 at 2 threads: ours / torch 0.86-0.90 without it, 0.79-0.82 with it, in
one run), so that each block measures steps as a training loop runs them, one after another:

- ``framework``: the training net created once in a Workspace, then ``net.run()`` per step; its gradient blobs
  shared by ``memonger.share_grad_blobs`` (what Caffe2's ``data_parallel_model`` applies with
  ``optimize_gradient_memory=True``), with the shapes of a first run in a scratch workspace: blobs of one shape
  share a buffer, so the backward pass reuses a few that stay in cache;
- ``torch eager``: the same ops as ``torch.nn.functional`` calls on ``nn.Parameter``s holding the same
  initial weights, ``F.cross_entropy``, ``backward()``, ``torch.optim.SGD`` with the same momentum
  (Nesterov: the default of Caffe2's SgdOptimizer).

Before timing, one step of each from the same weights is compared: the loss and one parameter after the
update (conv1's filter; the LM's decoder weight) must agree within float tolerance. 1 thread: process
CPU time; 2 threads: wall time (``framework.set_num_threads`` / ``torch.set_num_threads``). Also reports
the buffers the framework allocates per steady-state step (MemoryReporter).
Run: ``python -m bench.train_models [--models resnet20] [--threads 1,2] [--rounds 7]``; ``--profile`` prints
ours per op type instead (at each of ``--threads``: 1 thread, CPU time of each callable of the compiled
net; more, its wall time), then the ops that took longest with their input's shape.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from bench.common import allocations_per_run, fmt_time, markdown_table, pin_blas_threads, time_round_robin

LR = 0.01
SETTLE = 0.05  # seconds of pause before each timed block (see the doc)
MOMENTUM = 0.9
BN_MOMENTUM = 0.9

# name -> (image size, classes, stem, stage widths, blocks per stage, batches)
MODELS = {
    "resnet20": (32, 10, "cifar", (16, 32, 64), 3, (32, 64)),
    "resnet18": (224, 1000, "imagenet", (64, 128, 256, 512), 2, (16,)),
    "lstm_lm": None,  # see LM
}
# LSTM language model: vocabulary, embedding, hidden size, layers, sequence length, batch
LM = dict(vocab=10000, emb=256, hidden=256, layers=2, seq=35, batch=20)


def _bn(m, x, out, c):
    from framework.caffe2.python import brew

    return brew.spatial_bn(m, x, out, c, epsilon=1e-5, momentum=BN_MOMENTUM, is_test=0)


def _block(m, x, name, cin, cout, stride):
    from framework.caffe2.python import brew

    h = brew.conv(m, x, f"{name}_conv_1", cin, cout, kernel=3, stride=stride, pad=1, no_bias=1)
    h = _bn(m, h, f"{name}_bn_1", cout)
    h = brew.relu(m, h, h)
    h = brew.conv(m, h, f"{name}_conv_2", cout, cout, kernel=3, pad=1, no_bias=1)
    h = _bn(m, h, f"{name}_bn_2", cout)
    sc = x
    if cout != cin or stride != 1:
        sc = brew.conv(m, x, f"{name}_shortcut", cin, cout, kernel=1, stride=stride, no_bias=1)
        sc = _bn(m, sc, f"{name}_shortcut_bn", cout)
    s = brew.sum(m, [sc, h], f"{name}_sum")
    return brew.relu(m, s, s)


def build_model(name: str):
    """(ModelHelper with the forward net and loss, input shape without batch, classes)."""
    from framework.caffe2.python import brew
    from framework.caffe2.python.model_helper import ModelHelper

    size, classes, stem, widths, blocks, _ = MODELS[name]
    m = ModelHelper(f"train_{name}", arg_scope={"order": "NCHW"})
    h = m.net.StopGradient("data", "data")  # no gradient for the input batch (torch computes none either)
    if stem == "cifar":
        h = brew.conv(m, h, "conv1", 3, widths[0], kernel=3, no_bias=1)
        h = _bn(m, h, "conv1_bn", widths[0])
        h = brew.relu(m, h, h)
    else:
        h = brew.conv(m, h, "conv1", 3, widths[0], kernel=7, stride=2, pad=3, no_bias=1)
        h = _bn(m, h, "conv1_bn", widths[0])
        h = brew.relu(m, h, h)
        h = brew.max_pool(m, h, "pool1", kernel=3, stride=2, pad=1)
    cin, k = widths[0], 0
    for g, w in enumerate(widths):
        for b in range(blocks):
            h = _block(m, h, f"res_{k}", cin, w, 2 if (b == 0 and g > 0) else 1)
            cin, k = w, k + 1
    h = brew.average_pool(m, h, "final_avg", global_pooling=True)
    h = brew.fc(m, h, "last_out", cin, classes)
    m.net.SoftmaxWithLoss([h, "label"], ["softmax", "loss"])
    return m, (3, size, size), classes


def build_lm():
    """The LSTM LM: Gather from an embedding table, rnn_cell.LSTM over ``layers`` layers (RecurrentNetwork,
    LSTMUnit), an FC over the vocabulary on the (seq * batch, hidden) outputs, SoftmaxWithLoss."""
    from framework.caffe2.python import brew, rnn_cell
    from framework.caffe2.python.model_helper import ModelHelper

    v, e, h, n_layers = LM["vocab"], LM["emb"], LM["hidden"], LM["layers"]
    m = ModelHelper("train_lstm_lm")
    emb = m.create_param("emb", [v, e])
    x = m.net.Gather([emb, "tokens"], "embedded")
    states = [f"{k}0_{i}" for i in range(n_layers) for k in ("h", "c")]
    out, *_ = rnn_cell.LSTM(m, x, None, states, e, [h] * n_layers, scope="lstm")
    flat = m.net.Reshape([out], ["lstm_flat", "lstm_old_shape"], shape=[-1, h])[0]
    logits = brew.fc(m, flat, "decoder", h, v)
    m.net.SoftmaxWithLoss([logits, "targets"], ["softmax", "loss"])
    return m, states


def training_net(m, feeds: dict, before_init: dict | None = None):
    """(step callable, workspace): ``m``'s loss with its gradient ops and momentum SGD, in a workspace where
    ``before_init`` is fed, ``m``'s init net run, then copies of ``feeds`` fed; the gradient blobs shared by
    ``memonger.share_grad_blobs`` (Caffe2's ``optimize_gradient_memory``) with their shapes from one run in a
    scratch workspace: only blobs of one shape share a buffer."""
    from framework.caffe2.python import memonger, optimizer
    from framework.memory.workspace import Workspace

    def fill(ws) -> None:
        for k, v in (before_init or {}).items():
            ws.feed_blob(k, v.copy())
        ws.run_net_once(m.param_init_net)
        for k, v in feeds.items():
            ws.feed_blob(k, v.copy())

    grads = m.AddGradientOperators(["loss"])
    optimizer.build_sgd(m, LR, momentum=MOMENTUM)
    proto = m.net.Proto()
    scratch = Workspace()
    fill(scratch)
    scratch.create_net(proto).run()
    shapes = {b: scratch.fetch_blob(b).shape for op in proto.op for b in op.output if _is_array(scratch, b)}
    param_grads = [str(grads[p]) for p in m.params if p in grads]
    proto = memonger.share_grad_blobs(m.net, ["loss"], param_grads, "", blob_shapes=shapes)
    ws = Workspace()
    fill(ws)
    return ws.create_net(proto).run, ws


def _is_array(ws, blob: str) -> bool:
    return ws.has_blob(blob) and isinstance(ws.fetch_blob(blob), np.ndarray)


def make_lm_case(seed: int = 0):
    """(model helper, parameters, initial states, tokens (seq, batch), targets (seq * batch,))."""
    m, states = build_lm()
    rng = np.random.default_rng(seed)
    f32 = np.float32
    params = {}
    for p in m.params:
        shape = tuple(m._parameters_info[str(p)].shape)
        scale = f32(0.1) if str(p) == "emb" else f32(1.0 / np.sqrt(LM["hidden"]))
        params[str(p)] = ((rng.random(shape, dtype=f32) * 2 - 1) * scale).astype(f32)
    zeros = np.zeros((1, LM["batch"], LM["hidden"]), f32)
    init = {k: zeros for k in states}
    tokens = rng.integers(0, LM["vocab"], size=(LM["seq"], LM["batch"])).astype(np.int32)
    targets = rng.integers(0, LM["vocab"], size=LM["seq"] * LM["batch"]).astype(np.int32)
    return m, params, init, tokens, targets


def _lm_to_torch(params: dict) -> dict:
    """Caffe2's LSTM weights (gates i, f, o, g; i2h and gates_t FCs) as torch.nn.LSTM's (gates i, f, g, o)."""
    h = LM["hidden"]
    order = np.concatenate([np.arange(0, 2 * h), np.arange(3 * h, 4 * h), np.arange(2 * h, 3 * h)])
    out = {}
    for layer in range(LM["layers"]):
        pre = "lstm/" if layer == 0 else f"lstm/layer_{layer}/"
        rec = f"lstm/layer_{layer}/"
        out[f"weight_ih_l{layer}"] = params[pre + "i2h_w"][order]
        out[f"bias_ih_l{layer}"] = params[pre + "i2h_b"][order]
        out[f"weight_hh_l{layer}"] = params[rec + "gates_t_w"][order]
        out[f"bias_hh_l{layer}"] = params[rec + "gates_t_b"][order]
    return out


def framework_lm_step(seed: int = 0):
    m, params, init, tokens, targets = make_lm_case(seed)
    feeds = {**params, **init, "tokens": tokens, "targets": targets}
    # "emb" has no filler: the init net's momentum fill reads it
    return training_net(m, feeds, before_init={"emb": params["emb"]})


def torch_lm_step(seed: int = 0):
    import torch

    _, params, _, tokens, targets = make_lm_case(seed)
    emb = torch.nn.Embedding(LM["vocab"], LM["emb"])
    lstm = torch.nn.LSTM(LM["emb"], LM["hidden"], LM["layers"])
    dec = torch.nn.Linear(LM["hidden"], LM["vocab"])
    with torch.no_grad():
        emb.weight.copy_(torch.from_numpy(params["emb"]))
        for k, v in _lm_to_torch(params).items():
            getattr(lstm, k).copy_(torch.from_numpy(np.ascontiguousarray(v)))
        dec.weight.copy_(torch.from_numpy(params["decoder_w"]))
        dec.bias.copy_(torch.from_numpy(params["decoder_b"]))
    mods = torch.nn.ModuleList([emb, lstm, dec])
    opt = torch.optim.SGD(mods.parameters(), lr=LR, momentum=MOMENTUM, nesterov=True)
    tt, yt = torch.from_numpy(tokens.astype(np.int64)), torch.from_numpy(targets.astype(np.int64))
    last = {}

    def step() -> None:
        opt.zero_grad(set_to_none=False)
        out, _ = lstm(emb(tt))
        loss = torch.nn.functional.cross_entropy(dec(out.reshape(-1, LM["hidden"])), yt)
        loss.backward()
        opt.step()
        last["loss"] = loss

    named = {"decoder_w": dec.weight, "emb": emb.weight}
    return step, lambda: float(last["loss"].detach()), named


def _random_weight(name: str, shape: tuple, rng: np.random.Generator) -> np.ndarray:
    f32 = np.float32
    if name.endswith("_s"):
        return rng.random(shape, dtype=f32) + f32(0.5)
    if name.endswith("_b"):
        return rng.standard_normal(shape, dtype=f32) * f32(0.05)
    fan_in = int(np.prod(shape[1:])) or 1
    return rng.standard_normal(shape, dtype=f32) * f32(np.sqrt(2.0 / fan_in))


def make_case(name: str, batch: int, seed: int = 0):
    """(model helper, weights, running stats, data, labels) with seeded values."""
    m, chw, classes = build_model(name)
    rng = np.random.default_rng(seed)
    weights = {str(p): _random_weight(str(p), tuple(m._parameters_info[str(p)].shape), rng) for p in m.params}
    stats = {}
    for p, info in m._parameters_info.items():
        if p.endswith("_rm"):
            stats[p] = np.zeros(info.shape, np.float32)
        elif p.endswith("_riv"):
            stats[p] = np.ones(info.shape, np.float32)
    x = rng.standard_normal((batch, *chw), dtype=np.float32)
    y = rng.integers(0, classes, size=batch).astype(np.int32)
    return m, weights, stats, x, y


def framework_step(name: str, batch: int, seed: int = 0):
    """(step callable, workspace) of the framework's training net for ``name`` at ``batch``."""
    m, weights, stats, x, y = make_case(name, batch, seed)
    return training_net(m, {**weights, **stats, "data": x, "label": y})


def torch_step(name: str, batch: int, seed: int = 0):
    """(step callable, loss getter, parameter dict) of the same model in PyTorch eager."""
    import torch
    import torch.nn.functional as F

    m, weights, stats, x, y = make_case(name, batch, seed)
    ops = [(op.type, list(op.input), list(op.output), _args(op)) for op in m.net.Proto().op]
    params = {k: torch.nn.Parameter(torch.from_numpy(v.copy())) for k, v in weights.items()}
    buffers = {k: torch.from_numpy(v.copy()) for k, v in stats.items()}
    xt, yt = torch.from_numpy(x), torch.from_numpy(y.astype(np.int64))
    opt = torch.optim.SGD(params.values(), lr=LR, momentum=MOMENTUM, nesterov=True)  # Caffe2's SGD default
    last = {}

    def forward():
        env = {"data": xt, "label": yt, **params, **buffers}
        for t, ins, outs, a in ops:
            v = [env[i] for i in ins]
            if t == "StopGradient":
                y_ = v[0]
            elif t == "Conv":
                s, p = a.get("stride", 1), a.get("pad", 0)
                y_ = F.conv2d(v[0], v[1], v[2] if len(v) > 2 else None, stride=s, padding=p)
            elif t == "SpatialBN":
                y_ = F.batch_norm(v[0], v[3], v[4], v[1], v[2], True, 1.0 - a["momentum"], a["epsilon"])
            elif t == "Relu":
                y_ = F.relu(v[0])
            elif t == "MaxPool":
                y_ = F.max_pool2d(v[0], a["kernel"], a["stride"], a.get("pad", 0))
            elif t == "AveragePool":
                y_ = F.adaptive_avg_pool2d(v[0], 1)
            elif t == "Sum":
                y_ = v[0] + v[1]
            elif t == "FC":
                y_ = F.linear(v[0].flatten(1), v[1], v[2])
            elif t == "SoftmaxWithLoss":
                y_ = F.cross_entropy(v[0], v[1])
                outs = outs[1:]
            else:
                raise NotImplementedError(t)
            env[outs[0]] = y_
        return env["loss"]

    def step() -> None:
        opt.zero_grad(set_to_none=False)
        loss = forward()
        loss.backward()
        opt.step()
        last["loss"] = loss

    return step, lambda: float(last["loss"].detach()), params


def _args(op) -> dict:
    """{name: value} of ``op``'s arguments (strings decoded), read by the framework's one argument reader."""
    from framework.ops.arg_reader import ArgReader

    reader = ArgReader(op)
    return {a.name: reader.value(a.name) for a in op.arg}


def steps(name: str, batch: int):
    """(framework step, its workspace, torch step, torch loss getter, torch parameters by our names,
    initial parameter values, the parameter compared after one step)."""
    if name == "lstm_lm":
        fw, ws = framework_lm_step()
        ts, tloss, tparams = torch_lm_step()
        return fw, ws, ts, tloss, tparams, make_lm_case()[1], "decoder_w"
    fw, ws = framework_step(name, batch)
    ts, tloss, tparams = torch_step(name, batch)
    return fw, ws, ts, tloss, tparams, make_case(name, batch)[1], "conv1_w"


def compare_one_step(name: str, batch: int) -> tuple[float, float]:
    """One step of each contender from the same state: (relative loss difference, relative difference of
    one parameter's update). Raises AssertionError beyond float tolerance."""
    import torch

    torch.set_num_threads(1)
    fw, ws, ts, tloss, tparams, w0, key = steps(name, batch)
    fw()
    ts()
    loss_f, loss_t = float(ws.fetch_blob("loss")), tloss()
    w_f = ws.fetch_blob(key)
    w_t = tparams[key].detach().numpy()
    dw_f, dw_t = w_f - w0[key], w_t - w0[key]
    d_loss = abs(loss_f - loss_t) / abs(loss_t)
    d_w = float(np.abs(dw_f - dw_t).max() / np.abs(dw_t).max())
    if d_loss > 1e-4 or d_w > 2e-2:
        raise AssertionError(f"{name} b{batch}: loss {loss_f} vs torch {loss_t}; update differs by {d_w:.2e}")
    return d_loss, d_w


def set_threads(n: int) -> None:
    import torch

    import framework

    framework.set_num_threads(n)
    torch.set_num_threads(n)


def bench(name: str, batch: int, threads_list, rounds: int, log=print) -> list[list[str]]:
    import torch

    rows = []
    d_loss, d_w = compare_one_step(name, batch)
    log(f"{name} b{batch}: one step agrees (loss {d_loss:.1e}, parameter update {d_w:.1e})")
    fw, _, ts, _, _, _, _ = steps(name, batch)
    fw()
    allocs = allocations_per_run(fw)
    for threads in threads_list:
        set_threads(threads)
        clock = time.process_time if threads == 1 else time.perf_counter
        fns = {"framework": fw, "torch eager": ts}
        times = time_round_robin(fns, rounds=rounds, inner=2, warmup=1, clock=clock, settle=SETTLE)
        ratio = times["framework"] / times["torch eager"]
        clk = "cpu" if threads == 1 else "wall"
        rows.append(
            [name, str(batch), f"{threads} ({clk})", fmt_time(times["framework"]), fmt_time(times["torch eager"]),
             f"{ratio:.2f}x", f"{allocs:g}"]
        )  # fmt: skip
        log(" | ".join(rows[-1]))
    set_threads(1)
    torch.set_num_threads(1)
    return rows


def profile_step(name: str, batch: int, rounds: int = 3, threads: int = 1, slowest: list | None = None):
    """Per op type of the framework's training net: (type, seconds per step, count), timing each callable of
    the net's program as ``net.run()`` runs them, after warm-up steps; at 1 thread CPU
    time, at more wall time. ``slowest``, if given, receives (seconds, type, first input, its shape) of each
    op, slowest first."""
    import collections

    from framework.runtime.state import RUNTIME

    set_threads(threads)
    run, _ = framework_lm_step() if name == "lstm_lm" else framework_step(name, batch)
    for _ in range(2):
        run()
    net = run.__self__
    types = [op.op_def.type for op in net.ops]
    tot: dict[str, float] = collections.defaultdict(float)
    per_op = [0.0] * len(types)
    clock = time.process_time if threads == 1 else time.perf_counter
    for _ in range(rounds):
        # as net.run(): BLAS threads set for the run, and the program's callables (the versions of the tensors its
        # compiled ops write bumped, so that the kernels keeping a transformed filter redo it, as each step does)
        RUNTIME.enter_net()
        try:
            for i, (t, f) in enumerate(zip(types, net.program.callables())):
                t0 = clock()
                f()
                d = clock() - t0
                tot[t] += d
                per_op[i] += d
        finally:
            RUNTIME.exit_net()
    set_threads(1)
    if slowest is not None:
        ws = net.workspace
        for i in sorted(range(len(types)), key=lambda i: -per_op[i]):
            first = net.ops[i].op_def.input[0] if net.ops[i].op_def.input else ""
            shape = tuple(np.shape(ws.fetch_blob(first))) if first and ws.has_blob(first) else ()
            slowest.append((per_op[i] / rounds, types[i], first, shape))
    count = collections.Counter(types)
    return sorted(((t, v / rounds, count[t]) for t, v in tot.items()), key=lambda r: -r[1])


def main(argv=None) -> list[list[str]]:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--models", default="resnet20,resnet18,lstm_lm")
    p.add_argument("--batches", default="", help="comma-separated batches (default: each model's own)")
    p.add_argument("--threads", default="1,2")
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--profile", action="store_true", help="print ours per op type (at each --threads) instead")
    p.add_argument("--slowest", type=int, default=8, help="with --profile: how many of the slowest ops to list")
    a = p.parse_args(argv)
    pin_blas_threads(1)
    if a.profile:
        for name in a.models.split(","):
            batch = LM["batch"] if name == "lstm_lm" else int(a.batches.split(",")[0] or MODELS[name][5][0])
            for threads in [int(t) for t in a.threads.split(",")]:
                slowest: list = []
                prof = profile_step(name, batch, min(a.rounds, 3), threads, slowest)
                clock = "cpu" if threads == 1 else "wall"
                print(
                    f"{name} b{batch}, {threads} thread(s): {sum(r[1] for r in prof) * 1e3:.1f} ms ({clock}) summed"
                    " per op"
                )
                for t, sec, n in prof[:12]:
                    print(f"  {t:28s} {sec * 1e3:9.2f} ms  x{n}")
                print("  slowest ops (input, shape):")
                for sec, t, first, shape in slowest[: a.slowest]:
                    print(f"    {t:26s} {sec * 1e3:9.2f} ms  {first} {shape}")
        return []
    threads = [int(t) for t in a.threads.split(",")]
    rows = []
    for name in a.models.split(","):
        if name == "lstm_lm":
            batches = [LM["batch"]]
        else:
            batches = [int(b) for b in a.batches.split(",")] if a.batches else MODELS[name][5]
        for batch in batches:
            rows += bench(name, batch, threads, a.rounds)
    header = ["model", "batch", "threads (clock)", "framework", "torch eager", "framework / torch", "allocs/step"]
    print(markdown_table(rows, header))
    return rows


if __name__ == "__main__":
    main()
