"""RecurrentNetworkGradient's FC weight gradients as one GEMM over all steps (framework/ops/rnn/
batched_weight_grads.py): the same parameter gradients as the per-step FCGradient + Sum form (float64), as
central differences, and at one and two intra-op threads; the step net keeps only the dX products."""

from __future__ import annotations

import numpy as np
import pytest

from framework import core
from framework.caffe2.python import rnn_cell
from framework.caffe2.python.model_helper import ModelHelper
from framework.memory.workspace import Workspace
from framework.ops.rnn import recurrent_gradient
from tests.ops.threaded import assert_same, run_threads

T, N, D, H = 4, 3, 5, 6


def _model():
    model = ModelHelper(name="batched_grads")
    states = [core.BlobReference(f"{k}{layer}") for layer in range(2) for k in ("h", "c")]
    res = rnn_cell.LSTM(model, core.BlobReference("x"), None, states, D, [H, H], scope="rec")
    loss = model.net.SumElements([model.net.Mul([res[0], "wy"], "prod")], "loss")
    grads = model.AddGradientOperators({loss: "seed"})
    return model, grads


def _feeds(model, dtype):
    rng = np.random.default_rng(11)
    feeds = {"x": rng.standard_normal((T, N, D)), "wy": rng.standard_normal((T, N, H)), "seed": np.array(1.0)}
    for layer in range(2):
        for k in ("h", "c"):
            feeds[f"{k}{layer}"] = rng.standard_normal((1, N, H)) * 0.5
    ws = Workspace()
    ws.run_net_once(model.param_init_net)
    for p in model.params:
        feeds[str(p)] = ws.fetch_blob(str(p)) + 0.3 * rng.standard_normal(ws.fetch_blob(str(p)).shape)
    return {k: np.asarray(v, dtype) for k, v in feeds.items()}


def _run(model, feeds, per_step: bool, monkeypatch):
    if per_step:
        monkeypatch.setattr(recurrent_gradient, "defer_fc_weight_grads", lambda *a: ([], []))
    ws = Workspace()
    for k, v in feeds.items():
        ws.feed_blob(k, v.copy())
    net = ws.create_net(model.net)
    net.run()
    monkeypatch.undo()
    return ws, net


def _param_grads(model, grads, ws):
    return {str(p): ws.fetch_blob(str(grads[str(p)])).copy() for p in model.params}


def _step_ops(net):
    op = next(o for o in net.ops if o.op_def.type == "RecurrentNetworkGradient")
    return op, [o.type for o in op.net_def.op]


def test_step_net_keeps_only_the_input_gradient_products(monkeypatch):
    model, _ = _model()
    ws, net = _run(model, _feeds(model, np.float32), False, monkeypatch)
    op, types = _step_ops(net)
    assert "FCGradient" not in types and types.count("FCTransposed") == 3  # two gates_t FCs, layer 1's i2h
    assert len(op.batched) == 3
    assert sum(b.dy_owned for b in op.batched) == 2  # layer 0's gates gradient is linked already
    _, per_step = _run(model, _feeds(model, np.float32), True, monkeypatch)
    assert _step_ops(per_step)[1].count("FCGradient") == 3


def test_batched_equals_per_step_sums_float64(monkeypatch):
    model, grads = _model()
    feeds = _feeds(model, np.float64)
    batched = _param_grads(model, grads, _run(model, feeds, False, monkeypatch)[0])
    per_step = _param_grads(model, grads, _run(model, feeds, True, monkeypatch)[0])
    for name, want in per_step.items():
        np.testing.assert_allclose(batched[name], want, rtol=1e-12, atol=1e-12, err_msg=name)


@pytest.mark.parametrize("param", ["rec/layer_0/gates_t_w", "rec/layer_1/i2h_b", "rec/layer_1/gates_t_w"])
def test_batched_matches_central_differences(param, monkeypatch):
    model, grads = _model()
    feeds = _feeds(model, np.float64)
    ws, net = _run(model, feeds, False, monkeypatch)
    analytic = ws.fetch_blob(str(grads[param])).reshape(-1).copy()
    base = feeds[param]
    rng = np.random.default_rng(0)
    for j in rng.choice(base.size, size=6, replace=False):
        vals = []
        for e in (1e-5, -1e-5):
            q = base.copy().reshape(-1)
            q[j] += e
            ws.feed_blob(param, q.reshape(base.shape))
            net.run()
            vals.append(float(ws.fetch_blob("loss")))
        np.testing.assert_allclose(analytic[j], (vals[0] - vals[1]) / 2e-5, rtol=1e-6, atol=1e-8)


def test_one_and_two_threads(monkeypatch):
    model, grads = _model()
    feeds = _feeds(model, np.float32)
    outs = [str(grads[str(p)]) for p in model.params] + [str(grads["x"])]
    results, tasks, allocs = run_threads(model.net.Proto(), feeds, outs, min_work=1)
    assert tasks > 0 and allocs == 0
    assert_same(results, rtol=1e-5, atol=1e-6)
