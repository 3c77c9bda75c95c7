"""rnn_cell's UnrolledCell (static_rnn_unroll_size), DropoutCell, layered_LSTM, InitFromLSTMParams
and MILSTMWithAttentionCell: numpy loops written here, and the unrolled net's gradients against
central differences."""

import numpy as np
import pytest

from framework import core, workspace
from framework.caffe2.python import brew, rnn_cell
from framework.caffe2.python.attention import AttentionType
from framework.caffe2.python.model_helper import ModelHelper
from framework.memory.workspace import Workspace
from framework.ops.testing import assert_gradient_checks
from framework.proto.args import make_argument
from tests.ops.rnn.lstm_reference import lstm_loop, sig

T, N, D, H = 3, 2, 3, 4


def setup_ws(model, rng, dtype, extra=()):
    ws = Workspace()
    feeds = {
        "x": rng.standard_normal((T, N, D)).astype(dtype),
        "h0": rng.standard_normal((1, N, H)).astype(dtype),
        "c0": rng.standard_normal((1, N, H)).astype(dtype),
        "wy": rng.standard_normal((T, N, H)).astype(dtype),
        "len": np.array([T, 1], np.int32),
    }
    for k, v in feeds.items():
        ws.feed_blob(k, v)
    ws.run_net_once(model.param_init_net)
    p = {}
    for name in model.params:
        v = (ws.fetch_blob(str(name)) + 0.5 * rng.standard_normal(ws.fetch_blob(str(name)).shape)).astype(dtype)
        ws.feed_blob(str(name), v)
        p[str(name)] = v
    return ws, feeds, p


@pytest.mark.parametrize("with_lengths", [False, True])
def test_unrolled_lstm_matches_loop_and_writes_no_recurrent_network(with_lengths):
    model = ModelHelper(name="unrolled")
    res = rnn_cell.LSTM(
        model, "x", "len" if with_lengths else None, ("h0", "c0"), D, H, scope="u", static_rnn_unroll_size=T
    )
    assert "RecurrentNetwork" not in {op.type for op in model.net.Proto().op}
    ws, f, p = setup_ws(model, np.random.default_rng(3), np.float32)
    ws.run_net_once(model.net)
    hs, cs = lstm_loop(
        f["x"],
        f["h0"][0],
        f["c0"][0],
        p["u/i2h_w"],
        p["u/i2h_b"],
        p["u/gates_t_w"],
        p["u/gates_t_b"],
        f["len"] if with_lengths else None,
    )
    tol = dict(rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(ws.fetch_blob(str(res[0])), hs, **tol)
    np.testing.assert_allclose(ws.fetch_blob(str(res[1])), hs[-1:], **tol)
    np.testing.assert_allclose(ws.fetch_blob(str(res[2])), cs, **tol)
    np.testing.assert_allclose(ws.fetch_blob(str(res[3])), cs[-1:], **tol)
    assert ws.has_blob("timestep_1/u/hidden_state")  # Caffe2's per-step scope


def test_unrolled_lstm_gradients_numeric():
    model = ModelHelper(name="unrolled_g")
    res = rnn_cell.LSTM(model, "x", None, ("h0", "c0"), D, H, scope="u", static_rnn_unroll_size=T)
    loss = model.net.SumElements([model.net.Mul([res[0], "wy"], "prod")], "loss")
    grads = model.AddGradientOperators({loss: "seed"})
    zero_grads = [op for op in model.net.Proto().op if op.type == "ConstantFill" and op.output[0].endswith("_grad")]
    assert len(zero_grads) == 3  # ZeroGradient on hidden_last, cell_all, cell_last (float32 as Caffe2's)
    for op in zero_grads:  # this check runs in double precision
        op.arg.extend([make_argument("dtype", core.DataType.DOUBLE)])
    ws, f, p = setup_ws(model, np.random.default_rng(4), np.float64)
    ws.feed_blob("seed", np.array(1.0))
    net = ws.create_net(model.net)
    net.run()
    for name in ("x", "h0", "c0", "u/gates_t_w", "u/i2h_b"):
        analytic = ws.fetch_blob(str(grads[name])).reshape(-1).copy()
        base = ws.fetch_blob(name).copy()
        for j in range(0, base.size, 2):
            vals = []
            for e in (1e-6, -1e-6):
                q = base.copy().reshape(-1)
                q[j] += e
                ws.feed_blob(name, q.reshape(base.shape))
                net.run()
                vals.append(float(ws.fetch_blob("loss")))
            num = (vals[0] - vals[1]) / 2e-6
            assert abs(analytic[j] - num) < 1e-6 + 1e-5 * abs(num), (name, j, analytic[j], num)
        ws.feed_blob(name, base)


def test_dropout_cell_is_identity_in_test_mode_and_drops_in_training():
    outs = {}
    for is_test in (True, False):
        model = ModelHelper(name=f"drop_{is_test}")
        cell = rnn_cell.DropoutCell(rnn_cell.LSTMCell(D, H, name="d"), dropout_ratio=0.5, is_test=is_test, name="d")
        out, _ = cell.apply_over_sequence(model, "x", None, ["h0", "c0"])
        ws, f, p = setup_ws(model, np.random.default_rng(5), np.float32)
        ws.run_net_once(model.net)
        outs[is_test] = ws.fetch_blob(str(out))
        hs, _ = lstm_loop(
            f["x"], f["h0"][0], f["c0"][0], p["d/i2h_w"], p["d/i2h_b"], p["d/gates_t_w"], p["d/gates_t_b"]
        )
        if is_test:
            np.testing.assert_allclose(outs[is_test], hs, rtol=1e-5, atol=1e-5)
        else:  # kept entries scaled by 1 / (1 - ratio), the others zero
            kept = outs[is_test] != 0
            assert 0 < kept.sum() < kept.size
            np.testing.assert_allclose(outs[is_test][kept], 2 * hs[kept], rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="is_test"):
        rnn_cell.DropoutCell(rnn_cell.LSTMCell(D, H, name="d"), dropout_ratio=0.5)


def test_layered_lstm_chains_layers_from_last_states():
    model = ModelHelper(name="layered")
    out, h_last, _, c_last = rnn_cell.layered_LSTM(model, "x", None, ("h0", "c0"), D, [H, H], scope="ly")
    ws, f, p = setup_ws(model, np.random.default_rng(6), np.float32)
    ws.run_net_once(model.net)
    h1, c1 = lstm_loop(
        f["x"], f["h0"][0], f["c0"][0], p["ly/i2h_w"], p["ly/i2h_b"], p["ly/gates_t_w"], p["ly/gates_t_b"]
    )
    s = "ly_layer_1"
    h2, c2 = lstm_loop(h1, h1[-1], c1[-1], p[f"{s}/i2h_w"], p[f"{s}/i2h_b"], p[f"{s}/gates_t_w"], p[f"{s}/gates_t_b"])
    np.testing.assert_allclose(ws.fetch_blob(str(out)), h2, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(ws.fetch_blob(str(c_last))[0], c2[-1], rtol=1e-5, atol=1e-5)


def test_init_from_lstm_params_packs_the_gates_in_order():
    model = ModelHelper(name="initp")
    *_, params = rnn_cell.LSTM(model, "x", None, ("h0", "c0"), D, H, scope="ip", return_params=True)
    workspace.ResetWorkspace()
    workspace.RunNetOnce(model.param_init_net)
    names = rnn_cell.GetLSTMParamNames()
    rng = np.random.default_rng(8)
    values = {
        "input": {n: rng.standard_normal((H, D)) for n in names["weights"]}
        | {n: rng.standard_normal(H) for n in names["biases"]},
        "recurrent": {n: rng.standard_normal((H, H)) for n in names["weights"]}
        | {n: rng.standard_normal(H) for n in names["biases"]},
    }
    rnn_cell.InitFromLSTMParams(params, values)
    for kind, dim in (("input", D), ("recurrent", H)):
        w = workspace.FetchBlob(params[kind]["weights"])
        b = workspace.FetchBlob(params[kind]["biases"])
        np.testing.assert_allclose(w, np.concatenate([values[kind][n] for n in names["weights"]]), rtol=1e-6)
        np.testing.assert_allclose(b, np.concatenate([values[kind][n] for n in names["biases"]]), rtol=1e-6)
        assert w.shape == (4 * H, dim)
    workspace.ResetWorkspace()


def test_milstm_with_attention_cell_runs_the_decoder_with_the_context():
    model = ModelHelper(name="mi_att")
    cell = rnn_cell.MILSTMWithAttentionCell(
        encoder_output_dim=H,
        encoder_outputs="enc",
        decoder_input_dim=D,
        decoder_state_dim=H,
        name="ma",
        attention_type=AttentionType.Dot,
        weighted_encoder_outputs=None,
        forget_bias=0.0,
        lstm_memory_optimization=False,
        attention_memory_optimization=False,
    )
    _, res = cell.apply_over_sequence(model, "x", None, ["h0", "c0", "ctx0"])
    ws, f, p = setup_ws(model, np.random.default_rng(9), np.float32)
    rng = np.random.default_rng(10)
    enc = rng.standard_normal((5, N, H)).astype(np.float32)
    ctx = rng.standard_normal((N, H)).astype(np.float32)
    ws.feed_blob("enc", enc)
    ws.feed_blob("ctx0", ctx[None])
    ws.run_net_once(model.net)
    h, c = f["h0"][0], f["c0"][0]
    for t in range(T):
        x = f["x"][t] @ p["ma/decoder/i2h_w"].T + p["ma/decoder/i2h_b"]
        prev = np.concatenate([h, ctx], 1) @ p["ma/decoder/prev_t_w"].T + p["ma/decoder/prev_t_b"]
        g = (x * p["ma/decoder/alpha"] + p["ma/decoder/beta1"]) * prev + (x * p["ma/decoder/beta2"] + p["ma/decoder/b"])
        i, ff, o, gg = sig(g[:, :H]), sig(g[:, H : 2 * H]), sig(g[:, 2 * H : 3 * H]), np.tanh(g[:, 3 * H :])
        c = ff * c + i * gg
        h = o * np.tanh(c)
        logits = np.einsum("tne,ne->nt", enc, h)
        w = np.exp(logits - logits.max(1, keepdims=True))
        ctx = np.einsum("tne,nt->ne", enc, w / w.sum(1, keepdims=True))
    np.testing.assert_allclose(ws.fetch_blob(str(res[1]))[0], h, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(ws.fetch_blob(str(res[5]))[0], ctx, rtol=1e-4, atol=1e-5)


def test_zero_gradient_gives_its_input_a_zero_gradient():
    net = core.Net("zg")
    net.ZeroGradient("a", [])
    net.ZeroGradient("b", [])
    loss = net.SumElements([net.Scale("b", "b2", scale=3.0)], "loss")
    grads = net.AddGradientOperators([loss])
    ws = Workspace()
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    ws.feed_blob("a", a)
    ws.feed_blob("b", a + 1)
    blobs_before = set(ws.blobs())
    ws.run_operator_once(core.CreateOperator("ZeroGradient", ["a"], []))
    assert set(ws.blobs()) == blobs_before  # writes nothing
    ws.run_net_once(net)
    np.testing.assert_array_equal(ws.fetch_blob(str(grads["a"])), np.zeros_like(a))  # only the sink
    np.testing.assert_allclose(ws.fetch_blob(str(grads["b"])), np.full_like(a, 3.0))  # zero + 3


def test_zero_gradient_numeric_check():
    """No output reaches a loss: the numeric gradient is 0, and so must ZeroGradient's be."""
    x = np.random.default_rng(11).standard_normal((3, 2)).astype(np.float32)
    analytic, numeric = assert_gradient_checks(
        core.CreateOperator("ZeroGradient", ["x"], []), [x], 0, outputs_with_grads=[]
    )
    assert analytic.shape == x.shape and not analytic.any() and not numeric.any()


class _TanhCell(rnn_cell.RNNCell):
    """A custom cell written against Caffe2's newer API (apply_override, get_state_names_override)."""

    def __init__(self, d, h, **kwargs):
        super().__init__(**kwargs)
        self.d, self.h = d, h

    def prepare_input(self, model, input_blob):
        return brew.fc(model, input_blob, self.scope("i2h"), dim_in=self.d, dim_out=self.h, axis=2)

    def apply_override(self, model, input_t, seq_lengths, states, timestep):
        g = brew.fc(model, states[0], "h2h", dim_in=self.h, dim_out=self.h, axis=2)  # scoped: c/h2h
        return (model.net.Tanh(model.net.Sum([g, input_t], "sum"), "hidden_t"),)

    def get_state_names_override(self):
        return ["hidden_t"]

    def get_output_dim(self):
        return self.h


def test_custom_cell_with_apply_override_runs_under_its_scope():
    model = ModelHelper(name="custom")
    cell = _TanhCell(D, H, name="c")
    assert cell.get_state_names() == ["c/hidden_t"]
    out, _ = cell.apply_over_sequence(model, "x", None, ["h0"])
    assert {"c/i2h_w", "c/h2h_w", "c/h2h_b"} <= {str(p) for p in model.params}
    ws, f, p = setup_ws(model, np.random.default_rng(12), np.float32)
    ws.run_net_once(model.net)
    h, hs = f["h0"][0], []
    for t in range(T):
        h = np.tanh(f["x"][t] @ p["c/i2h_w"].T + p["c/i2h_b"] + h @ p["c/h2h_w"].T + p["c/h2h_b"])
        hs.append(h)
    np.testing.assert_allclose(ws.fetch_blob(str(out)), np.stack(hs), rtol=1e-5, atol=1e-5)
    with pytest.raises(NotImplementedError):
        rnn_cell.RNNCell(name="bare")._apply(model, "x", None, ["h"], "t")


@pytest.mark.parametrize("builder", ["LSTM", "MILSTM"])
def test_memory_optimization_recomputes_the_gates_with_the_same_gradients(builder):
    """memory_optimization: gates_t lives once in the shared workspace and is recomputed on backward."""
    got = {}
    for opt in (False, True):
        model = ModelHelper(name=f"mo_{opt}")
        res = getattr(rnn_cell, builder)(model, "x", "len", ("h0", "c0"), D, H, scope="m", memory_optimization=opt)
        loss = model.net.SumElements([model.net.Mul([res[0], "wy"], "prod")], "loss")
        grads = model.AddGradientOperators([loss])
        rnn = [op for op in model.net.Proto().op if op.type == "RecurrentNetwork"][0]
        assert [list(a.strings) for a in rnn.arg if a.name == "recompute_blobs_on_backward"] == (
            [[b"m/gates_t"]] if opt else [[]]
        )
        ws, _, _ = setup_ws(model, np.random.default_rng(13), np.float32)
        prng = np.random.default_rng(14)  # the same parameters in both builds (init fills are random)
        for p in sorted(str(p) for p in model.params):
            ws.feed_blob(p, (0.5 * prng.standard_normal(ws.fetch_blob(p).shape)).astype(np.float32))
        net = ws.create_net(model.net)
        net.run()
        net.run()  # the compiled step callables too
        recurrent_w = "m/gates_t_w" if builder == "LSTM" else "m/prev_t_w"
        got[opt] = {n: ws.fetch_blob(str(grads[n])).copy() for n in ("x", "h0", "c0", recurrent_w, "m/i2h_w")}
    for n, g in got[False].items():
        np.testing.assert_allclose(got[True][n], g, rtol=1e-5, atol=1e-6)
