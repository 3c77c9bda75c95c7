"""rnn_cell.LSTMWithAttention (Regular, Recurrent, Dot) against a numpy loop, and central differences."""

import numpy as np
import pytest

from framework import rnn_cell
from framework.attention import AttentionType
from framework.memory.workspace import Workspace
from framework.model_helper import ModelHelper

T, N, DIN, H, TE, E = 3, 2, 3, 4, 5, 4


def sig(x):
    return 1 / (1 + np.exp(-x))


def build(att_type):
    model = ModelHelper(name="att")
    res = rnn_cell.LSTMWithAttention(
        model, "dec_in", None, "h0", "c0", "ctx0", E, "enc", None, DIN, H, scope="s", attention_type=att_type
    )
    loss = model.net.SumElements([model.net.Mul([res[0], "wy"], "prod")], "loss")
    return model, res, loss


def feeds(rng, dtype):
    return {
        "dec_in": rng.standard_normal((T, N, DIN)).astype(dtype),
        "enc": rng.standard_normal((TE, N, E)).astype(dtype),
        "h0": rng.standard_normal((1, N, H)).astype(dtype),
        "c0": rng.standard_normal((1, N, H)).astype(dtype),
        "ctx0": rng.standard_normal((1, N, E)).astype(dtype),
        "wy": rng.standard_normal((T, N, H)).astype(dtype),
    }


def make_ws(model, f, dtype, rng):
    ws = Workspace()
    for k, v in f.items():
        ws.feed_blob(k, v)
    ws.run_net_once(model.param_init_net)
    for p in model.params:
        v = ws.fetch_blob(str(p))
        ws.feed_blob(str(p), (v + 0.3 * rng.standard_normal(v.shape)).astype(dtype))
    ws.feed_blob("s/attention_decoder/attention_zeros", np.zeros(1, dtype))
    return ws


def reference(ws, f, att_type):
    g = ws.fetch_blob
    a = "s/attention_decoder"
    h, c, ctx = f["h0"][0], f["c0"][0], f["ctx0"][0]
    enc = f["enc"]
    weo = enc @ g(f"{a}/weighted_encoder_outputs_w").T + g(f"{a}/weighted_encoder_outputs_b") if att_type != 2 else None
    hs, ctxs = [], []
    for t in range(T):
        x = f["dec_in"][t] @ g("s/decoder/i2h_w").T + g("s/decoder/i2h_b")
        gates = np.concatenate([h, ctx], 1) @ g("s/decoder/gates_t_w").T + g("s/decoder/gates_t_b") + x
        i, ff, o, gg = (
            sig(gates[:, :H]),
            sig(gates[:, H : 2 * H]),
            sig(gates[:, 2 * H : 3 * H]),
            np.tanh(gates[:, 3 * H :]),
        )
        c = ff * c + i * gg
        h = o * np.tanh(c)
        if att_type == AttentionType.Dot:
            hw = h  # no projection: decoder and encoder dims are equal here
            logits = np.einsum("tne,ne->nt", enc, hw)
        else:
            hw = h @ g(f"{a}/weighted_decoder_hidden_state_w").T + g(f"{a}/weighted_decoder_hidden_state_b")
            summed = weo + hw[None]
            if att_type == AttentionType.Recurrent:
                summed = (
                    summed
                    + (
                        ctx @ g(f"{a}/weighted_prev_attention_context_w").T
                        + g(f"{a}/weighted_prev_attention_context_b")
                    )[None]
                )
            logits = (np.tanh(summed) @ g(f"{a}/attention_v").T)[..., 0].T  # (N, TE)
        w = np.exp(logits - logits.max(1, keepdims=True))
        w /= w.sum(1, keepdims=True)
        ctx = np.einsum("tne,nt->ne", enc, w)
        hs.append(h)
        ctxs.append(ctx)
    return np.concatenate([np.stack(hs), np.stack(ctxs)], axis=2)


@pytest.mark.parametrize("att_type", [AttentionType.Regular, AttentionType.Recurrent, AttentionType.Dot])
def test_lstm_with_attention_forward(att_type):
    rng = np.random.default_rng(att_type)
    model, res, _ = build(att_type)
    f = feeds(rng, np.float32)
    ws = make_ws(model, f, np.float32, rng)
    ws.create_net(model.net).run()
    out_seq = [op for op in model.net.Proto().op if op.type == "Concat"][-1].output[0]
    np.testing.assert_allclose(ws.fetch_blob(out_seq), reference(ws, f, att_type), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("att_type", [AttentionType.Regular, AttentionType.Dot])
def test_lstm_with_attention_gradients_numeric(att_type):
    rng = np.random.default_rng(7)
    model, res, loss = build(att_type)
    grads = model.AddGradientOperators({loss: "loss_seed"})  # a float64 seed (ConstantFill's is float32)
    f = feeds(rng, np.float64)
    ws = make_ws(model, f, np.float64, rng)
    ws.feed_blob("loss_seed", np.array(1.0))
    net = ws.create_net(model.net)
    net.run()
    for name in ("enc", "dec_in", "ctx0", "s/decoder/gates_t_w"):
        analytic = ws.fetch_blob(str(grads[name])).reshape(-1).copy()
        base = ws.fetch_blob(name).copy()
        for j in range(0, base.size, 3):
            vals = []
            for sgn in (1e-6, -1e-6):
                p = base.copy().reshape(-1)
                p[j] += sgn
                ws.feed_blob(name, p.reshape(base.shape))
                net.run()
                vals.append(float(ws.fetch_blob("loss")))
            num = (vals[0] - vals[1]) / 2e-6
            assert abs(analytic[j] - num) < 1e-5 + 1e-4 * abs(num), (name, j, analytic[j], num)
        ws.feed_blob(name, base)
