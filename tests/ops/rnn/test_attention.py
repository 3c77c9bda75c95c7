"""rnn_cell.LSTMWithAttention (Regular, Recurrent, Dot, SoftCoverage; with and without
encoder_lengths) against a numpy loop written here, and central differences of its gradients."""

import numpy as np
import pytest

from framework import core
from framework.caffe2.python import rnn_cell
from framework.caffe2.python.attention import AttentionType
from framework.caffe2.python.model_helper import ModelHelper
from framework.memory.workspace import Workspace
from framework.proto.args import make_argument

T, N, DIN, H, TE, E = 3, 2, 3, 4, 5, 4
TYPES = [AttentionType.Regular, AttentionType.Recurrent, AttentionType.Dot, AttentionType.SoftCoverage]
LENGTHS = np.array([5, 2], np.int32)


def sig(x):
    return 1 / (1 + np.exp(-x))


def build(att_type, lengths, memory_optimization=False):
    model = ModelHelper(name="att")
    res = rnn_cell.LSTMWithAttention(
        model,
        "dec_in",
        None,
        "h0",
        "c0",
        "ctx0",
        E,
        "enc",
        "enc_len" if lengths else None,
        DIN,
        H,
        scope="s",
        attention_type=att_type,
        attention_memory_optimization=memory_optimization,
    )
    prods = [model.net.Mul([res[0], "wy"], "prod_h"), model.net.Mul([res[4], "wc"], "prod_c")]
    loss = model.net.SumElements([model.net.Sum(prods, "prod")], "loss")
    return model, res, loss


def feeds(rng, dtype):
    return {
        "dec_in": rng.standard_normal((T, N, DIN)).astype(dtype),
        "enc": rng.standard_normal((TE, N, E)).astype(dtype),
        "h0": rng.standard_normal((1, N, H)).astype(dtype),
        "c0": rng.standard_normal((1, N, H)).astype(dtype),
        "ctx0": rng.standard_normal((1, N, E)).astype(dtype),
        "wy": rng.standard_normal((T, N, H)).astype(dtype),
        "wc": rng.standard_normal((T, N, E)).astype(dtype),
        "enc_len": LENGTHS,
    }


def make_ws(model, f, dtype, rng):
    ws = Workspace()
    for k, v in f.items():
        ws.feed_blob(k, v)
    ws.run_net_once(model.param_init_net)
    for p in model.params:  # random parameters (the frozen attention_logits bias stays 0)
        v = ws.fetch_blob(str(p))
        ws.feed_blob(str(p), (v + 0.3 * rng.standard_normal(v.shape)).astype(dtype))
    ws.feed_blob("s/attention_logits_b", np.zeros(1, dtype))
    return ws


def fc(g, name, x):
    return x @ g(name + "_w").T + g(name + "_b")


def reference(ws, f, att_type, lengths):
    """(hidden states [T, N, H], contexts [T, N, E]) of the decoder with attention, in numpy."""
    g = ws.fetch_blob
    h, c, ctx = f["h0"][0], f["c0"][0], f["ctx0"][0]
    enc = f["enc"]
    weo = fc(g, "s/weighted_encoder_outputs", enc) if att_type != AttentionType.Dot else None
    cw = fc(g, "s/coverage_weights", enc) if att_type == AttentionType.SoftCoverage else None
    cov = np.zeros((N, TE))
    hs, ctxs = [], []
    for t in range(T):
        gates = np.concatenate([h, ctx], 1) @ g("s/decoder/gates_t_w").T + g("s/decoder/gates_t_b")
        gates = gates + fc(g, "s/decoder/i2h", f["dec_in"][t])
        i, ff, o, gg = (
            sig(gates[:, :H]),
            sig(gates[:, H : 2 * H]),
            sig(gates[:, 2 * H : 3 * H]),
            np.tanh(gates[:, 3 * H :]),
        )
        c = ff * c + i * gg
        h = o * np.tanh(c)
        if att_type == AttentionType.Dot:
            logits = np.einsum("tne,ne->nt", enc, h)  # decoder and encoder dims are equal: no projection
        else:
            summed = weo + fc(g, "s/weighted_decoder_hidden_state", h)[None]
            if att_type == AttentionType.Recurrent:
                summed = summed + fc(g, "s/weighted_prev_attention_context", ctx)[None]
            if att_type == AttentionType.SoftCoverage:
                summed = summed + cw * cov.T[:, :, None]
            logits = (np.tanh(summed) @ g("s/attention_logits_w").T)[..., 0].T  # (N, TE)
        if lengths:
            logits = np.where(np.arange(TE)[None, :] >= LENGTHS[:, None], -np.inf, logits)
        w = np.exp(logits - logits.max(1, keepdims=True))
        w /= w.sum(1, keepdims=True)
        cov = cov + w
        ctx = np.einsum("tne,nt->ne", enc, w)
        hs.append(h)
        ctxs.append(ctx)
    return np.stack(hs), np.stack(ctxs), cov


@pytest.mark.parametrize("lengths", [False, True])
@pytest.mark.parametrize("att_type", TYPES)
def test_lstm_with_attention_forward(att_type, lengths):
    rng = np.random.default_rng(att_type + 10 * lengths)
    model, res, _ = build(att_type, lengths)
    assert len(res) == (8 if att_type == AttentionType.SoftCoverage else 6)
    f = feeds(rng, np.float32)
    ws = make_ws(model, f, np.float32, rng)
    net = ws.create_net(model.net)
    net.run()
    hs, ctxs, cov = reference(ws, f, att_type, lengths)
    out_seq = [op for op in model.net.Proto().op if op.type == "Concat"][-1].output[0]
    tol = dict(rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(ws.fetch_blob(out_seq), np.concatenate([hs, ctxs], axis=2), **tol)
    np.testing.assert_allclose(ws.fetch_blob(str(res[1])), hs[-1:], **tol)  # hidden_last
    np.testing.assert_allclose(ws.fetch_blob(str(res[5])), ctxs[-1:], **tol)  # context_last
    if att_type == AttentionType.SoftCoverage:
        np.testing.assert_allclose(ws.fetch_blob(str(res[7]))[0], cov, **tol)  # coverage_last
    if lengths:  # masked encoder positions get no weight: changing them changes nothing
        before = ws.fetch_blob(out_seq).copy()
        enc = f["enc"].copy()
        enc[2:, 1] += 5.0
        ws.feed_blob("enc", enc)
        net.run()
        np.testing.assert_array_equal(ws.fetch_blob(out_seq)[:, 1], before[:, 1])


@pytest.mark.parametrize(
    "att_type,lengths",
    [
        (AttentionType.Regular, False),
        (AttentionType.Recurrent, True),
        (AttentionType.Dot, True),
        (AttentionType.SoftCoverage, True),
    ],
)
def test_lstm_with_attention_gradients_numeric(att_type, lengths):
    rng = np.random.default_rng(7)
    model, res, loss = build(att_type, lengths)
    for op in model.net.Proto().op:  # the initial coverage in double precision too
        if op.output[0] == "s/initial_coverage":
            op.arg.extend([make_argument("dtype", core.DataType.DOUBLE)])
    grads = model.AddGradientOperators({loss: "loss_seed"})  # a float64 seed (ConstantFill's is float32)
    f = feeds(rng, np.float64)
    ws = make_ws(model, f, np.float64, rng)
    ws.feed_blob("loss_seed", np.array(1.0))
    net = ws.create_net(model.net)
    net.run()
    names = ["enc", "dec_in", "ctx0", "h0", "s/decoder/gates_t_w"]
    if att_type != AttentionType.Dot:
        names.append("s/attention_logits_w")
    if att_type == AttentionType.SoftCoverage:
        names.append("s/coverage_weights_w")
    for name in names:
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
    if lengths:  # encoder positions past a row's length get no gradient
        assert np.all(ws.fetch_blob(str(grads["enc"]))[2:, 1] == 0)


def test_attention_rejects_unknown_type_and_coverage_without_setup():
    with pytest.raises(ValueError, match="unknown attention type"):
        rnn_cell.LSTMWithAttentionCell(E, "enc", None, DIN, H, "s", attention_type=9)
    cell = rnn_cell.LSTMWithAttentionCell(E, "enc", None, DIN, H, "s", attention_type=AttentionType.SoftCoverage)
    model = ModelHelper(name="att")
    with pytest.raises(ValueError, match="build_initial_coverage"):
        cell.apply_over_sequence(model, "dec_in", None, ["h0", "c0", "ctx0", "cov0"])


@pytest.mark.parametrize("att_type", [AttentionType.Regular, AttentionType.SoftCoverage])
def test_attention_memory_optimization_recomputes_the_same_gradients(att_type):
    """attention_memory_optimization: the match blobs are recomputed in the backward step net."""
    grads_of = {}
    for opt in (False, True):
        rng = np.random.default_rng(21)
        model, _, loss = build(att_type, True, memory_optimization=opt)
        rnn = [op for op in model.net.Proto().op if op.type == "RecurrentNetwork"][0]
        recompute = [list(a.strings) for a in rnn.arg if a.name == "recompute_blobs_on_backward"]
        grads = model.AddGradientOperators([loss])
        f = feeds(rng, np.float32)
        ws = make_ws(model, f, np.float32, rng)
        prng = np.random.default_rng(5)  # the same parameters in both builds (the init fills are random)
        for p in sorted(str(p) for p in model.params):
            ws.feed_blob(p, (0.5 * prng.standard_normal(ws.fetch_blob(p).shape)).astype(np.float32))
        ws.run_net_once(model.net)
        grads_of[opt] = {n: ws.fetch_blob(str(grads[n])) for n in ("enc", "dec_in", "s/decoder/gates_t_w")}
        assert bool(recompute and recompute[0]) == opt
    for n, g in grads_of[False].items():
        np.testing.assert_allclose(grads_of[True][n], g, rtol=1e-5, atol=1e-6)
