"""InferenceLSTM against a numpy loop and PyTorch's nn.LSTM (same flat weights)."""

import numpy as np
import pytest

from framework.core import CreateOperator
from framework.errors import FrameworkError
from framework.memory.workspace import Workspace
from framework.ops.testing import assert_reference_checks


def sig(x):
    return 1 / (1 + np.exp(-x))


def loop_lstm(x, h, c, w_ih, w_hh, b):
    H = h.shape[-1]
    outs = []
    for t in range(x.shape[0]):
        g = x[t] @ w_ih.T + h @ w_hh.T + b
        c = sig(g[:, H : 2 * H]) * c + sig(g[:, :H]) * np.tanh(g[:, 2 * H : 3 * H])
        h = sig(g[:, 3 * H :]) * np.tanh(c)
        outs.append(h)
    return (np.stack(outs) if outs else np.zeros((0, *h.shape), h.dtype)), h, c


@pytest.mark.parametrize("T, N, D, H", [(3, 2, 4, 5), (1, 1, 2, 3), (0, 2, 3, 2)])
def test_inference_lstm_one_layer_matches_loop(T, N, D, H):
    rng = np.random.default_rng(T)
    x = rng.standard_normal((T, N, D)).astype(np.float32)
    h0, c0 = rng.standard_normal((2, 1, N, H)).astype(np.float32)
    w_ih = rng.standard_normal((4 * H, D)).astype(np.float32)
    w_hh = rng.standard_normal((4 * H, H)).astype(np.float32)
    b_ih, b_hh = rng.standard_normal((2, 4 * H)).astype(np.float32)
    out, h, c = loop_lstm(x, h0[0], c0[0], w_ih, w_hh, b_ih + b_hh)
    op = CreateOperator("InferenceLSTM", ["x", "h0", "c0", "wi", "wh", "bi", "bh"], ["y", "h", "c"])
    assert_reference_checks(
        op, [x, h0, c0, w_ih, w_hh, b_ih, b_hh], lambda *_: [out.reshape(T, N, H), h[None], c[None]], threshold=1e-4
    )


def test_inference_lstm_argument_errors():
    ws = Workspace()
    for k in "xhcab":
        ws.feed_blob(k, np.ones((1, 1, 1), np.float32))
    with pytest.raises(FrameworkError, match="expects 7 inputs"):
        ws.run_operator_once(CreateOperator("InferenceLSTM", ["x", "h", "c", "a", "b"], ["y", "hh", "cc"]))
    with pytest.raises(FrameworkError, match="w_ih must be"):
        ws.run_operator_once(
            CreateOperator("InferenceLSTM", ["x", "h", "c", "a", "b"], ["y", "hh", "cc"], has_biases=0)
        )


@pytest.mark.torch
@pytest.mark.parametrize("layers, bidirectional, batch_first", [(2, True, False), (1, False, True), (2, False, True)])
def test_inference_lstm_matches_torch(layers, bidirectional, batch_first):
    torch = pytest.importorskip("torch")
    T, N, D, H = 4, 3, 5, 6
    lstm = torch.nn.LSTM(D, H, num_layers=layers, bidirectional=bidirectional, batch_first=batch_first)
    dirs = 2 if bidirectional else 1
    rng = np.random.default_rng(0)
    x = rng.standard_normal((N, T, D) if batch_first else (T, N, D)).astype(np.float32)
    h0 = rng.standard_normal((layers * dirs, N, H)).astype(np.float32)
    c0 = rng.standard_normal((layers * dirs, N, H)).astype(np.float32)
    with torch.no_grad():
        y, (hn, cn) = lstm(torch.from_numpy(x), (torch.from_numpy(h0), torch.from_numpy(c0)))
    weights = [p.detach().numpy() for p in lstm._flat_weights]
    names = [f"w{k}" for k in range(len(weights))]
    ws = Workspace()
    for n, v in zip(["x", "h0", "c0"] + names, [x, h0, c0] + weights):
        ws.feed_blob(n, v)
    ws.run_operator_once(
        CreateOperator(
            "InferenceLSTM",
            ["x", "h0", "c0"] + names,
            ["y", "h", "c"],
            num_layers=layers,
            bidirectional=bidirectional,
            batch_first=batch_first,
        )
    )
    np.testing.assert_allclose(ws.fetch_blob("y"), y.numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(ws.fetch_blob("h"), hn.numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(ws.fetch_blob("c"), cn.numpy(), rtol=1e-4, atol=1e-5)
