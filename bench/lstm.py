"""A 1-layer LSTM (input 256, hidden 256, batch 32, 50 steps), forward and forward+backward.

Contenders (one process, interleaved rounds, medians: bench/common.time_round_robin):
- ``framework``: ``rnn_cell.LSTM`` (i2h FC over the sequence + RecurrentNetwork running the
  step net: FC, Sum, LSTMUnit per step); forward+backward adds the loss sum(Y * W) and the
  gradient ops from AddGradientOperators (RecurrentNetworkGradient over the kept step workspaces);
- ``numpy``: the same computation hand-written over preallocated arrays (the floor);
- ``torch``: ``nn.LSTM`` on one thread (``inference_mode`` forward; forward+backward with autograd).

Per-step overhead = (framework - numpy) / steps, shown against the framework's time per step.
Run: ``python -m bench.lstm`` (``--quick`` for fewer rounds).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

from bench.common import fmt_time, markdown_table, pin_blas_threads, time_round_robin  # noqa: E402


def _data(T, N, D, H, seed=0):
    rng = np.random.default_rng(seed)
    f = np.float32
    return {
        "x": rng.standard_normal((T, N, D)).astype(f),
        "h0": np.zeros((1, N, H), f),
        "c0": np.zeros((1, N, H), f),
        "wy": rng.standard_normal((T, N, H)).astype(f),
        "wx": (rng.standard_normal((4 * H, D)) * 0.05).astype(f),
        "bx": np.zeros(4 * H, f),
        "wh": (rng.standard_normal((4 * H, H)) * 0.05).astype(f),
        "bh": np.zeros(4 * H, f),
    }


def framework_lstm(T, N, D, H, backward):
    from framework.caffe2.python import rnn_cell
    from framework.caffe2.python.model_helper import ModelHelper
    from framework.memory.workspace import Workspace

    d = _data(T, N, D, H)
    m = ModelHelper(name=f"lstm_bench_{int(backward)}")
    out, _, _, _ = rnn_cell.LSTM(m, "x", None, ("h0", "c0"), D, H, scope="lstm", forward_only=not backward)
    if backward:
        loss = m.net.SumElements([m.net.Mul([out, "wy"], "prod")], "loss")
        m.AddGradientOperators([loss])
    ws = Workspace()
    for k in ("x", "h0", "c0", "wy"):
        ws.feed_blob(k, d[k])
    ws.run_net_once(m.param_init_net)
    for k, name in (("wx", "i2h_w"), ("bx", "i2h_b"), ("wh", "gates_t_w"), ("bh", "gates_t_b")):
        ws.feed_blob(f"lstm/{name}", d[k])
    net = ws.create_net(m.net)
    net.run()
    return net.run, ws, str(out)


def _sig(x, out):
    np.multiply(x, 0.5, out=out)
    np.tanh(out, out=out)
    out *= 0.5
    out += 0.5
    return out


def numpy_lstm(T, N, D, H, backward):
    d = _data(T, N, D, H)
    x, wx, bx, wh, bh, wy = d["x"], d["wx"], d["bx"], d["wh"], d["bh"], d["wy"]
    wxt, wht = np.ascontiguousarray(wx.T), np.ascontiguousarray(wh.T)
    xg = np.empty((T, N, 4 * H), np.float32)
    hs = np.zeros((T + 1, N, H), np.float32)
    cs = np.zeros((T + 1, N, H), np.float32)
    acts = np.empty((T, N, 4 * H), np.float32)
    tc = np.empty((T, N, H), np.float32)
    g = np.empty((N, 4 * H), np.float32)
    dxg = np.empty((T, N, 4 * H), np.float32)
    dwh = np.empty_like(wh)
    dwx = np.empty_like(wx)
    dx = np.empty_like(x)

    def step():
        np.matmul(x.reshape(T * N, D), wxt, out=xg.reshape(T * N, 4 * H))
        xg.reshape(T * N, 4 * H).__iadd__(bx + bh)
        for t in range(T):
            np.matmul(hs[t], wht, out=g)
            np.add(g, xg[t], out=g)
            a = acts[t]
            _sig(g[:, : 3 * H], a[:, : 3 * H])
            np.tanh(g[:, 3 * H :], out=a[:, 3 * H :])
            np.multiply(a[:, H : 2 * H], cs[t], out=cs[t + 1])
            cs[t + 1] += a[:, :H] * a[:, 3 * H :]
            np.tanh(cs[t + 1], out=tc[t])
            np.multiply(a[:, 2 * H : 3 * H], tc[t], out=hs[t + 1])
        if not backward:
            return
        dh = np.zeros((N, H), np.float32)
        dc = np.zeros((N, H), np.float32)
        for t in range(T - 1, -1, -1):
            dh += wy[t]
            a = acts[t]
            i, f, o, gg = a[:, :H], a[:, H : 2 * H], a[:, 2 * H : 3 * H], a[:, 3 * H :]
            dct = dc + dh * o * (1 - tc[t] * tc[t])
            dg = dxg[t]
            dg[:, :H] = dct * gg * i * (1 - i)
            dg[:, H : 2 * H] = dct * cs[t] * f * (1 - f)
            dg[:, 2 * H : 3 * H] = dh * tc[t] * o * (1 - o)
            dg[:, 3 * H :] = dct * i * (1 - gg * gg)
            dc = dct * f
            dh = dg @ wh
        np.matmul(dxg.reshape(T * N, 4 * H).T, hs[:T].reshape(T * N, H), out=dwh)
        np.matmul(dxg.reshape(T * N, 4 * H).T, x.reshape(T * N, D), out=dwx)
        np.matmul(dxg.reshape(T * N, 4 * H), wx, out=dx.reshape(T * N, D))
        dxg.sum(axis=(0, 1))

    return step, hs


def torch_lstm(T, N, D, H, backward):
    try:
        import torch
    except ImportError:
        return None
    torch.set_num_threads(1)
    d = _data(T, N, D, H)
    lstm = torch.nn.LSTM(D, H)
    order = np.r_[0:H, H : 2 * H, 3 * H : 4 * H, 2 * H : 3 * H]
    with torch.no_grad():
        lstm.weight_ih_l0.copy_(torch.from_numpy(d["wx"][order]))
        lstm.weight_hh_l0.copy_(torch.from_numpy(d["wh"][order]))
        lstm.bias_ih_l0.zero_()
        lstm.bias_hh_l0.zero_()
    x = torch.from_numpy(d["x"])
    h0, c0, wy = torch.from_numpy(d["h0"]), torch.from_numpy(d["c0"]), torch.from_numpy(d["wy"])
    if not backward:

        def fwd():
            with torch.inference_mode():
                lstm(x, (h0, c0))

        return fwd
    xg = x.clone().requires_grad_()

    def fwd_bwd():
        lstm.zero_grad(set_to_none=True)
        y, _ = lstm(xg, (h0, c0))
        (y * wy).sum().backward()

    return fwd_bwd


def run(T=50, N=32, D=256, H=256, rounds=15, inner=2, log=print):
    pin_blas_threads(1)
    rows = []
    results = {}
    for backward in (False, True):
        label = "forward+backward" if backward else "forward"
        ours, ws, out = framework_lstm(T, N, D, H, backward)
        floor, hs = numpy_lstm(T, N, D, H, backward)
        floor()
        np.testing.assert_allclose(ws.fetch_blob(out), hs[1:], rtol=2e-3, atol=2e-4)  # same computation
        contenders = {"framework": ours, "numpy": floor}
        tl = torch_lstm(T, N, D, H, backward)
        if tl is not None:
            contenders["torch"] = tl
        times = time_round_robin(contenders, rounds=rounds, inner=inner, warmup=2, clock=time.process_time)
        per_step = times["framework"] / T
        overhead = max(times["framework"] - times["numpy"], 0.0) / T
        tt = times.get("torch")
        rows.append(
            [
                label,
                fmt_time(times["framework"]),
                fmt_time(times["numpy"]),
                fmt_time(tt) if tt else "",
                f"{times['framework'] / tt:.2f}x" if tt else "",
                f"{times['framework'] / times['numpy']:.2f}x",
                f"{fmt_time(overhead)} / {fmt_time(per_step)} ({100 * overhead / per_step:.0f}%)",
            ]
        )
        results[label] = times
    header = [
        "LSTM T=%d N=%d D=%d H=%d" % (T, N, D, H),
        "framework",
        "numpy floor",
        "PyTorch nn.LSTM (1 thread)",
        "framework / PyTorch",
        "framework / numpy",
        "per-step overhead / step time",
    ]
    table = markdown_table(rows, header)
    log(table)
    return results, table


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true")
    a = p.parse_args(argv)
    run(rounds=4 if a.quick else 15)
    return 0


if __name__ == "__main__":
    sys.exit(main())
