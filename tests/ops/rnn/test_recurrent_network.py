"""RecurrentNetwork through rnn_cell.LSTM / BasicRNN: forward and gradients against a numpy loop,
PyTorch's nn.LSTM with the same weights, and central differences."""

import numpy as np
import pytest

from framework.caffe2.python import rnn_cell
from framework.caffe2.python.model_helper import ModelHelper
from framework.core import CreateOperator
from framework.errors import FrameworkError
from framework.memory.workspace import Workspace
from framework.ops.testing import assert_gradient_checks  # noqa: F401  (the meta test looks for gradient checks here)


def sig(x):
    return 1 / (1 + np.exp(-x))


def build_lstm(D, H, lengths=True, layers=1, cell="LSTM"):
    model = ModelHelper(name="m")
    dims = H if layers == 1 else [H] * layers
    if cell == "BasicRNN":
        out, last = rnn_cell.BasicRNN(model, "x", "lens" if lengths else None, ["h0"], D, H, scope="rnn")
        res = (out, last)
    else:
        init = ("h0", "c0") if layers == 1 else [b for i in range(layers) for b in (f"h0_{i}", f"c0_{i}")]
        res = getattr(rnn_cell, cell)(model, "x", "lens" if lengths else None, init, D, dims, scope="lstm")
    out = res[0]
    loss = model.net.SumElements([model.net.Mul([out, "wy"], "prod")], "loss")
    return model, res, loss


def lstm_loop(x, lens, h, c, wx, bx, wh, bh):
    T, N, _ = x.shape
    H = h.shape[-1]
    outs = []
    for t in range(T):
        g = x[t] @ wx.T + bx + h @ wh.T + bh
        i, f, o, gg = sig(g[:, :H]), sig(g[:, H : 2 * H]), sig(g[:, 2 * H : 3 * H]), np.tanh(g[:, 3 * H :])
        c2 = f * c + i * gg
        h2 = o * np.tanh(c2)
        valid = (t < lens)[:, None]
        h, c = np.where(valid, h2, h), np.where(valid, c2, c)
        outs.append(h)
    return np.stack(outs), h, c


def run(model, feeds, ws=None):
    ws = ws or Workspace()
    for k, v in feeds.items():
        ws.feed_blob(k, v)
    ws.run_net_once(model.param_init_net)
    for k, v in feeds.items():
        if ws.has_blob(k):
            ws.feed_blob(k, v)
    net = ws.create_net(model.net, overwrite=True)
    net.run()
    return ws, net


def _feeds(T, N, D, H, rng, dtype=np.float32):
    return {
        "x": rng.standard_normal((T, N, D)).astype(dtype),
        "h0": rng.standard_normal((1, N, H)).astype(dtype),
        "c0": rng.standard_normal((1, N, H)).astype(dtype),
        "wy": rng.standard_normal((T, N, H)).astype(dtype),
    }


@pytest.mark.parametrize("T, N, D, H", [(4, 3, 2, 5), (1, 1, 3, 2), (6, 2, 4, 3)])
def test_lstm_forward_matches_loop_with_lengths(T, N, D, H):
    rng = np.random.default_rng(T)
    model, (out, last_h, all_c, last_c), _ = build_lstm(D, H)
    feeds = _feeds(T, N, D, H, rng)
    feeds["lens"] = rng.integers(0, T + 1, N).astype(np.int32)
    ws, net = run(model, feeds)
    p = {k: ws.fetch_blob(f"lstm/{k}") for k in ("i2h_w", "i2h_b", "gates_t_w", "gates_t_b")}
    ref_out, ref_h, ref_c = lstm_loop(
        feeds["x"],
        feeds["lens"],
        feeds["h0"][0],
        feeds["c0"][0],
        p["i2h_w"],
        p["i2h_b"],
        p["gates_t_w"],
        p["gates_t_b"],
    )
    np.testing.assert_allclose(ws.fetch_blob(str(out)), ref_out, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(ws.fetch_blob(str(last_h))[0], ref_h, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(ws.fetch_blob(str(last_c))[0], ref_c, rtol=1e-4, atol=1e-5)
    assert ws.fetch_blob(str(all_c)).shape == (T, N, H)
    net.run()  # a second run reuses the bound step nets
    np.testing.assert_allclose(ws.fetch_blob(str(out)), ref_out, rtol=1e-4, atol=1e-5)


def _numeric(ws, net, name, loss="loss", eps=1e-6, idx=None):
    base = ws.fetch_blob(name).copy()
    flat = base.reshape(-1)
    idx = range(flat.size) if idx is None else idx
    out = {}
    for j in idx:
        vals = []
        for s in (eps, -eps):
            probe = flat.copy()
            probe[j] += s
            ws.feed_blob(name, probe.reshape(base.shape))
            net.run()
            vals.append(float(ws.fetch_blob(loss)))
        out[j] = (vals[0] - vals[1]) / (2 * eps)
    ws.feed_blob(name, base)
    return out


@pytest.mark.parametrize("cell", ["LSTM", "BasicRNN"])
def test_recurrent_network_gradients_numeric(cell):
    T, N, D, H = 3, 2, 2, 3
    rng = np.random.default_rng(1)
    # BasicRNN's length masks are float32 casts (as Caffe2's): its float64 check runs without lengths
    model, res, loss = build_lstm(D, H, cell=cell, lengths=cell == "LSTM")
    grads = model.AddGradientOperators({loss: "loss_seed"})  # a float64 seed (ConstantFill's is float32)
    feeds = _feeds(T, N, D, H, rng, np.float64)
    feeds["lens"] = np.array([3, 2], np.int32)
    feeds["loss_seed"] = np.array(1.0)
    ws = Workspace()
    for k, v in feeds.items():
        ws.feed_blob(k, v)
    ws.run_net_once(model.param_init_net)
    for k in ("i2h_w", "i2h_b", "gates_t_w", "gates_t_b"):
        name = f"{'lstm' if cell == 'LSTM' else 'rnn'}/{k}"
        ws.feed_blob(
            name, ws.fetch_blob(name).astype(np.float64) + 0.1 * rng.standard_normal(ws.fetch_blob(name).shape)
        )
    net = ws.create_net(model.net)
    net.run()
    scope = "lstm" if cell == "LSTM" else "rnn"
    checks = ["x", "h0", f"{scope}/gates_t_w", f"{scope}/i2h_w", f"{scope}/gates_t_b"] + (
        ["c0"] if cell == "LSTM" else []
    )
    analytic = {n: ws.fetch_blob(str(grads[n])).copy() for n in checks}
    for n in checks:
        num = _numeric(ws, net, n, idx=range(0, ws.fetch_blob(n).size, 2))
        for j, v in num.items():
            assert abs(analytic[n].reshape(-1)[j] - v) < 1e-5 + 1e-4 * abs(v), (n, j, analytic[n].reshape(-1)[j], v)
    for _ in range(3):  # later runs take the compiled step callables: the same gradients
        net.run()
    for n in checks:
        np.testing.assert_allclose(ws.fetch_blob(str(grads[n])), analytic[n], rtol=1e-12, atol=1e-12)


def test_basic_rnn_with_lengths_matches_loop():
    T, N, D, H = 4, 3, 2, 3
    rng = np.random.default_rng(5)
    model, (out, last), _ = build_lstm(D, H, cell="BasicRNN")
    feeds = _feeds(T, N, D, H, rng)
    feeds["lens"] = np.array([4, 0, 2], np.int32)
    ws, _ = run(model, feeds)
    wx, bx, wh, bh = (ws.fetch_blob(f"rnn/{k}") for k in ("i2h_w", "i2h_b", "gates_t_w", "gates_t_b"))
    h, outs = feeds["h0"][0], []
    for t in range(T):
        h2 = np.tanh(feeds["x"][t] @ wx.T + bx + h @ wh.T + bh)
        h = np.where((t < feeds["lens"])[:, None], h2, h)
        outs.append(h)
    np.testing.assert_allclose(ws.fetch_blob(str(out)), np.stack(outs), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(ws.fetch_blob(str(last))[0], h, rtol=1e-4, atol=1e-5)


def test_multi_layer_lstm_runs_and_has_gradients():
    T, N, D, H = 3, 2, 3, 4
    rng = np.random.default_rng(2)
    model, res, loss = build_lstm(D, H, lengths=False, layers=2)
    grads = model.AddGradientOperators([loss])
    feeds = {"x": rng.standard_normal((T, N, D)).astype(np.float32), "wy": np.ones((T, N, H), np.float32)}
    for i in range(2):
        feeds[f"h0_{i}"] = np.zeros((1, N, H), np.float32)
        feeds[f"c0_{i}"] = np.zeros((1, N, H), np.float32)
    ws, _ = run(model, feeds)
    assert ws.fetch_blob(str(res[0])).shape == (T, N, H)
    assert ws.fetch_blob(str(grads["x"])).shape == (T, N, D)
    # layer 0 projects its input under the stack's scope only, as Caffe2 names it
    assert np.abs(ws.fetch_blob(str(grads["lstm/i2h_w"]))).sum() > 0


def test_recurrent_network_errors():
    ws = Workspace()
    ws.feed_blob("x", np.ones((3,), np.float32))
    with pytest.raises(FrameworkError, match="step_net"):
        ws.run_operator_once(CreateOperator("RecurrentNetwork", ["x"], ["y", "ws"]))
    with pytest.raises(FrameworkError, match="T x N"):
        ws.run_operator_once(CreateOperator("RecurrentNetwork", ["x"], ["y", "ws"], step_net="name: 's'"))
    with pytest.raises(FrameworkError, match="step workspaces"):
        ws.feed_blob("s", np.ones(1, np.float32))
        ws.run_operator_once(CreateOperator("RecurrentNetworkBlobFetcher", ["s"], ["names"]))


@pytest.mark.torch
def test_lstm_matches_torch_forward_and_backward():
    torch = pytest.importorskip("torch")
    T, N, D, H = 5, 3, 4, 6
    rng = np.random.default_rng(3)
    model, (out, last_h, _, last_c), loss = build_lstm(D, H, lengths=False)
    grads = model.AddGradientOperators([loss])
    feeds = _feeds(T, N, D, H, rng)
    ws, _ = run(model, feeds)
    lstm = torch.nn.LSTM(D, H)
    order = np.r_[0:H, H : 2 * H, 3 * H : 4 * H, 2 * H : 3 * H]  # Caffe2 i,f,o,g -> torch i,f,g,o
    with torch.no_grad():
        lstm.weight_ih_l0.copy_(torch.from_numpy(ws.fetch_blob("lstm/i2h_w")[order]))
        lstm.bias_ih_l0.copy_(torch.from_numpy(ws.fetch_blob("lstm/i2h_b")[order]))
        lstm.weight_hh_l0.copy_(torch.from_numpy(ws.fetch_blob("lstm/gates_t_w")[order]))
        lstm.bias_hh_l0.copy_(torch.from_numpy(ws.fetch_blob("lstm/gates_t_b")[order]))
    x = torch.from_numpy(feeds["x"]).requires_grad_()
    h0 = torch.from_numpy(feeds["h0"]).requires_grad_()
    c0 = torch.from_numpy(feeds["c0"]).requires_grad_()
    y, (hn, cn) = lstm(x, (h0, c0))
    (y * torch.from_numpy(feeds["wy"])).sum().backward()
    np.testing.assert_allclose(ws.fetch_blob(str(out)), y.detach().numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(ws.fetch_blob(str(last_h)), hn.detach().numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(ws.fetch_blob(str(last_c)), cn.detach().numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(ws.fetch_blob(str(grads["x"])), x.grad.numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(ws.fetch_blob(str(grads["h0"])), h0.grad.numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(ws.fetch_blob(str(grads["c0"])), c0.grad.numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(
        ws.fetch_blob(str(grads["lstm/gates_t_w"])),
        lstm.weight_hh_l0.grad.numpy()[np.argsort(order)],
        rtol=1e-4,
        atol=1e-5,
    )
    np.testing.assert_allclose(
        ws.fetch_blob(str(grads["lstm/i2h_b"])), lstm.bias_ih_l0.grad.numpy()[np.argsort(order)], rtol=1e-4, atol=1e-5
    )


@pytest.mark.torch
def test_gru_matches_torch_forward_and_backward():
    torch = pytest.importorskip("torch")
    from framework.caffe2.python import gru_cell

    T, N, D, H = 4, 3, 2, 5
    rng = np.random.default_rng(4)
    model = ModelHelper(name="g")
    out, last = gru_cell.GRU(model, "x", None, ["h0"], D, H, scope="gru", linear_before_reset=True)
    loss = model.net.SumElements([model.net.Mul([out, "wy"], "prod")], "loss")
    grads = model.AddGradientOperators([loss])
    feeds = _feeds(T, N, D, H, rng)
    ws, _ = run(model, feeds)
    gru = torch.nn.GRU(D, H)
    f = ws.fetch_blob
    with torch.no_grad():
        gru.weight_ih_l0.copy_(torch.from_numpy(f("gru/i2h_w")))
        gru.bias_ih_l0.copy_(torch.from_numpy(f("gru/i2h_b")))
        gru.weight_hh_l0.copy_(
            torch.from_numpy(np.concatenate([f(f"gru/{g}_gate_t_w") for g in ("reset", "update", "output")]))
        )
        gru.bias_hh_l0.copy_(
            torch.from_numpy(np.concatenate([f(f"gru/{g}_gate_t_b") for g in ("reset", "update", "output")]))
        )
    x = torch.from_numpy(feeds["x"]).requires_grad_()
    h0 = torch.from_numpy(feeds["h0"]).requires_grad_()
    y, hn = gru(x, h0)
    (y * torch.from_numpy(feeds["wy"])).sum().backward()
    np.testing.assert_allclose(f(str(out)), y.detach().numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(f(str(last)), hn.detach().numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(f(str(grads["x"])), x.grad.numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(f(str(grads["h0"])), h0.grad.numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(f(str(grads["gru/i2h_w"])), gru.weight_ih_l0.grad.numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(
        f(str(grads["gru/reset_gate_t_w"])), gru.weight_hh_l0.grad.numpy()[:H], rtol=1e-4, atol=1e-5
    )


def test_forward_and_backward_by_separate_run_operator_once():
    """Each op of the training net built, run and freed on its own (as RunOperatorOnce does): the gradient
    op's step net must not be taken for the freed forward op's one. Against backprop through the recurrence
    h_t = tanh(x_t Wx' + bx + h_{t-1} Wh' + bh), kept where t >= length."""
    T, N, D, H = 4, 3, 2, 3
    rng = np.random.default_rng(11)
    model, (out, _), loss = build_lstm(D, H, cell="BasicRNN")
    grads = model.AddGradientOperators([loss])
    feeds = _feeds(T, N, D, H, rng)
    feeds["lens"] = np.array([4, 1, 3], np.int32)
    ws = Workspace()
    for k, v in feeds.items():
        ws.feed_blob(k, v)
    ws.run_net_once(model.param_init_net)
    for name in ("i2h_w", "i2h_b", "gates_t_w", "gates_t_b"):
        ws.feed_blob(f"rnn/{name}", rng.standard_normal(ws.fetch_blob(f"rnn/{name}").shape).astype(np.float32))
    for op in model.net.Proto().op:
        ws.run_operator_once(op)
    wx, bx, wh, bh = (ws.fetch_blob(f"rnn/{k}") for k in ("i2h_w", "i2h_b", "gates_t_w", "gates_t_b"))
    x, lens, wy = (feeds[k].astype(np.float64) for k in ("x", "lens", "wy"))
    wx, bx, wh, bh = (a.astype(np.float64) for a in (wx, bx, wh, bh))
    h = feeds["h0"][0].astype(np.float64)
    hs, h2s = [h], []
    for t in range(T):
        h2 = np.tanh(x[t] @ wx.T + bx + h @ wh.T + bh)
        h = np.where((t < lens)[:, None], h2, h)
        h2s.append(h2)
        hs.append(h)
    np.testing.assert_allclose(ws.fetch_blob(str(out)), np.stack(hs[1:]), rtol=1e-4, atol=1e-5)
    dx, dwx, dwh, dh = np.zeros_like(x), np.zeros_like(wx), np.zeros_like(wh), np.zeros((N, H))
    for t in range(T - 1, -1, -1):
        dh = dh + wy[t]
        valid = (t < lens)[:, None]
        dpre = np.where(valid, dh, 0) * (1 - h2s[t] ** 2)
        dx[t] = dpre @ wx
        dwx += dpre.T @ x[t]
        dwh += dpre.T @ hs[t]
        dh = dpre @ wh + np.where(valid, 0, dh)
    assert np.abs(dx).sum() > 0
    np.testing.assert_allclose(ws.fetch_blob(str(grads["x"])), dx, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(ws.fetch_blob(str(grads["rnn/i2h_w"])), dwx, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(ws.fetch_blob(str(grads["rnn/gates_t_w"])), dwh, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(ws.fetch_blob(str(grads["h0"]))[0], dh, rtol=1e-4, atol=1e-5)


def test_a_state_with_no_initial_steps():
    """An initial state of length 0 (Caffe2's stateful convolution example with a window of 1): the state
    sequence holds just the T steps the step net writes; here each step copies x_t + 1."""
    from framework.proto.framework_pb2 import NetDef

    T, N, D = 3, 2, 4
    step = NetDef(name="step", external_input=["x_t"])
    step.op.extend([CreateOperator("Add", ["x_t", "one"], ["s_t"])])
    x = np.random.default_rng(0).standard_normal((T, N, D)).astype(np.float32)
    ws = Workspace()
    ws.feed_blob("x", x)
    ws.feed_blob("s0", np.zeros((0, N, D), np.float32))
    ws.feed_blob("one", np.ones(1, np.float32))
    op = CreateOperator(
        "RecurrentNetwork",
        ["x", "s0", "one"],
        ["s_all", "step_ws"],
        step_net=step,
        recurrent_states=["s"],
        initial_recurrent_state_ids=[1],
        link_internal=["x_t", "s_t"],
        link_external=["x", "s"],
        link_offset=[0, 0],
        link_window=[1, 1],
        alias_src=["s"],
        alias_dst=["s_all"],
        alias_offset=[0],
    )
    ws.run_operator_once(op)
    np.testing.assert_allclose(ws.fetch_blob("s_all"), x + 1, rtol=1e-6)


def test_retrieve_step_blobs_returns_bytes_names_as_caffe2():
    from framework import workspace as gws
    from framework.caffe2.python import recurrent

    T, N, D, H = 2, 1, 2, 2
    model, _, _ = build_lstm(D, H, lengths=False)
    feeds = _feeds(T, N, D, H, np.random.default_rng(0))
    gws.ResetWorkspace()
    try:
        for k, v in feeds.items():
            gws.FeedBlob(k, v)
        gws.RunNetOnce(model.param_init_net)
        gws.RunNetOnce(model.net)
        names = recurrent.retrieve_step_blobs(model.net, "ex")
        assert names and all(isinstance(n, bytes) for n in names)
        assert all(gws.HasBlob(n.decode()) for n in names)
    finally:
        gws.ResetWorkspace()
