"""rnn_cell's MILSTM, LayerNormLSTM and cudnn_LSTM (CPU path) against numpy loops."""

import numpy as np
import pytest

from framework.caffe2.python import rnn_cell
from framework.caffe2.python.model_helper import ModelHelper
from framework.memory.workspace import Workspace

T, N, D, H = 3, 2, 3, 4


def sig(x):
    return 1 / (1 + np.exp(-x))


def _run(builder, rng, **kw):
    model = ModelHelper(name="v")
    res = builder(model, "x", None, ("h0", "c0"), D, H, scope="l", **kw)
    ws = Workspace()
    feeds = {
        "x": rng.standard_normal((T, N, D)).astype(np.float32),
        "h0": rng.standard_normal((1, N, H)).astype(np.float32),
        "c0": rng.standard_normal((1, N, H)).astype(np.float32),
    }
    for k, v in feeds.items():
        ws.feed_blob(k, v)
    ws.run_net_once(model.param_init_net)
    p = {}
    for name in model.params:
        v = ws.fetch_blob(str(name))
        v = (v + 0.5 * rng.standard_normal(v.shape)).astype(np.float32)
        ws.feed_blob(str(name), v)
        p[str(name)] = v.astype(np.float64)
    ws.run_net_once(model.net)
    return ws, res, feeds, p


def _lstm_step(g, c):
    i, f, o, gg = sig(g[:, :H]), sig(g[:, H : 2 * H]), sig(g[:, 2 * H : 3 * H]), np.tanh(g[:, 3 * H :])
    c = f * c + i * gg
    return o * np.tanh(c), c


def _layer_norm(g, p):
    """brew.layer_norm over the last axis (epsilon 1e-4) with its scale and bias."""
    g = (g - g.mean(1, keepdims=True)) / np.sqrt(g.var(1, keepdims=True) + 1e-4)
    return g * p["l/gates_t_norm_scale"] + p["l/gates_t_norm_bias"]


@pytest.mark.parametrize("layer_norm", [False, True])
def test_milstm_matches_loop(layer_norm):
    builder = rnn_cell.LayerNormMILSTM if layer_norm else rnn_cell.MILSTM
    ws, res, f, p = _run(builder, np.random.default_rng(0))
    h, c, outs = f["h0"][0], f["c0"][0], []
    for t in range(T):
        x = f["x"][t] @ p["l/i2h_w"].T + p["l/i2h_b"]
        prev = h @ p["l/prev_t_w"].T + p["l/prev_t_b"]
        g = (x * p["l/alpha"] + p["l/beta1"]) * prev + (x * p["l/beta2"] + p["l/b"])
        h, c = _lstm_step(_layer_norm(g, p) if layer_norm else g, c)
        outs.append(h)
    np.testing.assert_allclose(ws.fetch_blob(str(res[0])), np.stack(outs), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(ws.fetch_blob(str(res[3]))[0], c, rtol=1e-4, atol=1e-4)


def test_layer_norm_lstm_matches_loop():
    """Caffe2's LayerNormLSTMCell normalizes the summed gates (recurrent FC + input projection)."""
    ws, res, f, p = _run(rnn_cell.LayerNormLSTM, np.random.default_rng(1))
    h, c, outs = f["h0"][0], f["c0"][0], []
    for t in range(T):
        x = f["x"][t] @ p["l/i2h_w"].T + p["l/i2h_b"]
        g = h @ p["l/gates_t_w"].T + p["l/gates_t_b"] + x
        h, c = _lstm_step(_layer_norm(g, p), c)
        outs.append(h)
    np.testing.assert_allclose(ws.fetch_blob(str(res[0])), np.stack(outs), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("layers", [1, 2])
def test_cudnn_lstm_runs_on_the_cpu_path(layers):
    model = ModelHelper(name=f"cudnn_{layers}")
    out, h_last, c_last, params = rnn_cell.cudnn_LSTM(
        model, "x", ("h0", "c0"), D, H, scope="cu", num_layers=layers, return_params=True
    )
    ws = Workspace()
    ws.feed_blob("x", np.ones((T, N, D), np.float32))
    ws.feed_blob("h0", np.zeros((layers, N, H), np.float32))  # cuDNN's layout: one row per layer
    ws.feed_blob("c0", np.zeros((layers, N, H), np.float32))
    ws.run_net_once(model.param_init_net)
    ws.run_net_once(model.net)
    assert ws.fetch_blob(str(out)).shape == (T, N, H)
    assert ws.fetch_blob(str(h_last)).shape == (layers, N, H) and ws.fetch_blob(str(c_last)).shape == (layers, N, H)
    np.testing.assert_allclose(ws.fetch_blob(str(h_last))[-1], ws.fetch_blob(str(out))[-1], rtol=1e-6)
    assert set(params) == {"input", "recurrent"}
