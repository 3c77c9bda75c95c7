"""RecurrentNetwork's step nets are bound once per step workspace and definition: a net made anew on every
run (RunNetOnce, as Caffe2's gradient checker runs one) reuses them, gives the numpy loop's numbers each time,
and its gradient op (another definition) never takes the forward's bound nets; a parameter removed and fed
again between runs is a new blob, which the next op's step nets read."""

import numpy as np

from framework.caffe2.python import rnn_cell
from framework.caffe2.python.model_helper import ModelHelper
from framework.memory.workspace import Workspace
from framework.ops.rnn.links import ScratchWorkspaces
from tests.ops.rnn.lstm_reference import lstm_loop

T, N, D, H = 4, 2, 3, 2


def loop(x, h, c, wx, bx, wh, bh):
    return lstm_loop(x, h, c, wx, bx, wh, bh)[0]


def test_run_net_once_reuses_the_bound_step_nets_and_gives_the_loops_numbers():
    model = ModelHelper(name="reuse")
    res = rnn_cell.LSTM(model, "x", None, ("h0", "c0"), D, H, scope="r")
    loss = model.net.SumElements([res[0]], "loss")
    model.AddGradientOperators([loss])
    rng = np.random.default_rng(0)
    ws = Workspace()
    h0, c0 = rng.standard_normal((1, N, H)).astype(np.float32), rng.standard_normal((1, N, H)).astype(np.float32)
    ws.feed_blob("h0", h0)
    ws.feed_blob("c0", c0)
    ws.run_net_once(model.param_init_net)
    p = {k: ws.fetch_blob(f"r/{k}").astype(np.float64) for k in ("i2h_w", "i2h_b", "gates_t_w", "gates_t_b")}
    scratch_name = next(op.output[-1] for op in model.net.Proto().op if op.type == "RecurrentNetwork")
    bound_before = None
    for _ in range(3):
        x = rng.standard_normal((T, N, D)).astype(np.float32)
        ws.feed_blob("x", x)
        ws.run_net_once(model.net)
        want = loop(x, h0[0], c0[0], p["i2h_w"], p["i2h_b"], p["gates_t_w"], p["gates_t_b"])
        np.testing.assert_allclose(ws.fetch_blob(str(res[0])), want, rtol=1e-5, atol=1e-5)
        scratch = ws.get_blob(scratch_name).held
        assert type(scratch) is ScratchWorkspaces
        assert len(scratch.nets) == 2  # the forward step net and the backward step net
        bound = {k: dict(v.nets) for k, v in scratch.nets.items()}
        if bound_before is not None:
            for key, nets in bound.items():
                assert all(nets[t] is bound_before[key][t] for t in nets)  # the same bound nets, not rebuilt
        bound_before = bound


def test_a_parameter_fed_again_as_a_new_blob_is_read_by_the_next_run():
    model = ModelHelper(name="refeed")
    res = rnn_cell.LSTM(model, "x", None, ("h0", "c0"), D, H, scope="r")
    rng = np.random.default_rng(1)
    ws = Workspace()
    h0, c0 = rng.standard_normal((1, N, H)).astype(np.float32), rng.standard_normal((1, N, H)).astype(np.float32)
    ws.feed_blob("h0", h0)
    ws.feed_blob("c0", c0)
    ws.run_net_once(model.param_init_net)
    x = rng.standard_normal((T, N, D)).astype(np.float32)
    ws.feed_blob("x", x)
    ws.run_net_once(model.net)
    new_w = rng.standard_normal(ws.fetch_blob("r/gates_t_w").shape).astype(np.float32)
    assert ws.remove_blob("r/gates_t_w")
    ws.feed_blob("r/gates_t_w", new_w)
    ws.run_net_once(model.net)
    p = {k: ws.fetch_blob(f"r/{k}").astype(np.float64) for k in ("i2h_w", "i2h_b", "gates_t_b")}
    want = loop(x, h0[0], c0[0], p["i2h_w"], p["i2h_b"], new_w.astype(np.float64), p["gates_t_b"])
    np.testing.assert_allclose(ws.fetch_blob(str(res[0])), want, rtol=1e-5, atol=1e-5)
