"""What Do's net and a RecurrentNetwork's step nets read and write in the outer workspace counts as their op's
in the dataflow view (``DataFlow(nested=True)``), so the graph checks, the memory planner and Caffe2's memonger
API see it: a step net's parameter is ordered after its producer, a missing one is an error at creation, and
no buffer a nested net still reads is shared or renamed."""

from __future__ import annotations

import numpy as np
import pytest

from framework.caffe2.python import memonger_plan, rnn_cell
from framework.caffe2.python.model_helper import ModelHelper
from framework.errors import NetError
from framework.memory.workspace import Workspace
from framework.net.dataflow import DataFlow
from framework.net.memory_planner import optimize_inference_net
from framework.net.nested import named_outer_blobs
from framework.proto.framework_pb2 import NetDef, OperatorDef

T, N, D, H = 4, 2, 3, 3
PARAMS = ("rnn/gates_t_w", "rnn/gates_t_b")


def _do(inputs, outputs, inner, idx, net_ops):
    op = OperatorDef(type="Do", input=[*inputs, "scope"], output=[*outputs, "scope"])
    op.arg.add(name="net").n.CopyFrom(NetDef(op=net_ops))
    op.arg.add(name="inner_blobs").strings.extend(s.encode() for s in inner)
    op.arg.add(name="outer_blobs_idx").ints.extend(idx)
    return op


def test_do_counts_what_its_net_reads_and_writes_through_its_bindings():
    # outer blobs: a, b (inputs), c (output); the net reads z (bound to output c) and writes y (bound to input b)
    net_ops = [
        OperatorDef(type="Add", input=["x", "z"], output=["t"]),
        OperatorDef(type="Relu", input=["t"], output=["y"]),
    ]
    do = _do(["a", "b"], ["c"], ["x", "y", "z"], [0, 1, 2], net_ops)
    flow = DataFlow([OperatorDef(type="X", output=["c"]), do, OperatorDef(type="X", input=["b"])], nested=True)
    ins, outs = flow.io(1)
    assert ins == ("a", "b", "scope", "c") and outs == ("c", "scope", "b")
    assert flow.producer(2, "b") == 1 and flow.readers(0, "c") == [1]  # "t" is the child's own
    assert not flow.mentioned("t") and not flow.mentioned("x")
    assert named_outer_blobs(do) == set()  # bound by position: a renaming pass may rename them
    plain = DataFlow([do])
    assert plain.io(0) == (("a", "b", "scope"), ("c", "scope"))


def _rnn_model(forward_only=True):
    model = ModelHelper(name="m")
    out, last = rnn_cell.BasicRNN(model, "x", None, ["h0"], D, H, scope="rnn", forward_only=forward_only)
    return model, out


def _undeclare_params(net):
    """The RNN op of ``net`` then reads its weights only through its step net (it no longer lists them), and
    the net no longer lists gates_t_w as an external input."""
    op = next(op for op in net.op if op.type == "RecurrentNetwork")
    for field, drop in ((op.input, PARAMS), (net.external_input, PARAMS[:1])):
        keep = [b for b in field if b not in drop]
        del field[:]
        field.extend(keep)
    return op


def _reference(x, h0, wx, bx, wh, bh):
    h, out = h0[0], []
    for t in range(x.shape[0]):
        h = np.tanh(x[t] @ wx.T + bx + h @ wh.T + bh)
        out.append(h)
    return np.stack(out)


def test_a_step_net_reads_its_parameters_and_writes_its_states_in_the_outer_workspace():
    model, _ = _rnn_model()
    rnn = _undeclare_params(model.net.Proto())
    ins, outs = DataFlow([rnn], nested=True).io(0)
    assert set(PARAMS) <= set(ins) and "rnn/timestep" not in ins
    assert "rnn/rnn/hidden_t_prev_states" in outs  # the state the links window, not declared by the op
    assert "rnn/gates_t" not in ins + outs  # the step workspace's own
    assert "rnn/rnn/hidden_t_prev_states" not in ins  # the op initializes it before the steps read it
    assert set(PARAMS) | {"rnn/i2h", "rnn/rnn/hidden_t_prev_states"} <= named_outer_blobs(rnn)


def test_the_gradient_op_reads_the_states_and_writes_their_gradients():
    model, out = _rnn_model(forward_only=False)
    loss = model.net.SumElements([out], "loss")
    model.AddGradientOperators([loss])
    ops = list(model.net.Proto().op)
    k_fwd = next(i for i, op in enumerate(ops) if op.type == "RecurrentNetwork")
    k_grad = next(i for i, op in enumerate(ops) if op.type == "RecurrentNetworkGradient")
    flow = DataFlow(ops, nested=True)
    state = "rnn/rnn/hidden_t_prev_states"
    assert flow.producer(k_grad, state) == k_fwd and k_grad in flow.readers(k_fwd, state)
    assert flow.writers(state + "_grad") == [k_grad]
    fwd_ins, fwd_outs = flow.io(k_fwd)
    assert not any(b.endswith("_grad") for b in fwd_ins + fwd_outs)  # the backward step net is the gradient op's
    assert "rnn/gates_t" not in flow.io(k_grad)[0]  # left in the step workspaces by the forward step net


def _feed(ws, rng):
    feeds = {
        "x": rng.standard_normal((T, N, D)).astype(np.float32),
        "h0": rng.standard_normal((1, N, H)).astype(np.float32),
        "w_src": rng.standard_normal((H, H)).astype(np.float32),
        "q": rng.standard_normal((H, H)).astype(np.float32),
    }
    for k, v in feeds.items():
        ws.feed_blob(k, v)
    return feeds


def _net_with_an_inner_parameter():
    """gates_t_w is made inside the net, declared after the RNN op that (only through its step net) reads it;
    between them an op makes a blob of its size that dies at once."""
    model, out = _rnn_model()
    init = model.param_init_net.Proto()
    keep = [op for op in init.op if op.output[0] != "rnn/gates_t_w"]
    del init.op[:]
    init.op.extend(keep)
    net = NetDef()
    net.CopyFrom(model.net.Proto())
    net.name = "inner_param"
    _undeclare_params(net)
    net.op.add(type="Scale", input=["w_src"], output=["rnn/gates_t_w"]).arg.add(name="scale", f=1.0)
    net.op.add(type="Relu", input=["q"], output=["z"])
    net.external_input.extend(["w_src", "q"])
    net.external_output.extend([str(out), "z"])
    return init, net, str(out)


def _run_against_the_loop(init, net, out, seed):
    ws = Workspace()
    feeds = _feed(ws, np.random.default_rng(seed))
    ws.run_net_once(init)
    ws.create_net(net).run()
    p = {k: ws.fetch_blob(f"rnn/{k}") for k in ("i2h_w", "i2h_b", "gates_t_b")}
    want = _reference(feeds["x"], feeds["h0"], p["i2h_w"], p["i2h_b"], feeds["w_src"], p["gates_t_b"])
    np.testing.assert_allclose(ws.fetch_blob(out), want, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(ws.fetch_blob("z"), np.maximum(feeds["q"], 0))


def test_the_graph_orders_a_step_nets_parameter_before_it_and_gives_the_loops_numbers():
    _run_against_the_loop(*_net_with_an_inner_parameter(), seed=0)


def test_a_parameter_no_one_makes_is_an_error_at_creation_naming_it():
    model, _ = _rnn_model()
    net = model.net.Proto()
    _undeclare_params(net)
    ws = Workspace()
    _feed(ws, np.random.default_rng(1))
    for op in model.param_init_net.Proto().op:
        if op.output[0] != "rnn/gates_t_w":
            ws.run_operator_once(op)
    with pytest.raises(NetError, match="rnn/gates_t_w"):
        ws.create_net(net)
    assert not ws.has_net(net.name) and not ws.has_blob("rnn/hidden_t_all")


def test_the_planner_never_shares_or_renames_a_blob_a_step_net_reads():
    init, net, out = _net_with_an_inner_parameter()
    planned, report = optimize_inference_net(net, shapes={"x": (T, N, D), "h0": (1, N, H), "w_src": (H, H)})
    assert "rnn/gates_t_w" not in report.renamed and "rnn/rnn/hidden_t_prev_states" not in report.renamed
    _run_against_the_loop(init, planned, out, seed=2)


def test_the_planner_keeps_a_blob_an_if_branch_reads_alive_until_the_if():
    then = NetDef(op=[OperatorDef(type="Copy", input=["a"], output=["out"])])
    op_if = OperatorDef(type="If", input=["cond"])
    op_if.arg.add(name="then_net").n.CopyFrom(then)
    net = NetDef(
        name="branch",
        op=[
            OperatorDef(type="Relu", input=["x"], output=["a"]),
            OperatorDef(type="Sigmoid", input=["x"], output=["b"]),
            OperatorDef(type="Relu", input=["b"], output=["c"]),
            op_if,
        ],
        external_input=["x", "cond"],
        external_output=["out", "c"],
    )
    planned, report = optimize_inference_net(net, shapes={"x": (3, 4)})
    assert "a" not in report.renamed  # the then-net names it
    x = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)
    ws = Workspace()
    ws.feed_blob("x", x)
    ws.feed_blob("cond", np.array(True))
    ws.feed_blob("out", np.zeros((3, 4), np.float32))
    ws.create_net(planned).run()
    np.testing.assert_array_equal(ws.fetch_blob("out"), np.maximum(x, 0))
    np.testing.assert_allclose(ws.fetch_blob("c"), 1 / (1 + np.exp(-x)), rtol=1e-6)


def test_memongers_live_ranges_last_until_the_step_net_that_reads_a_blob():
    init, net, out = _net_with_an_inner_parameter()
    ops = [op for op in net.op]
    k_rnn = next(i for i, op in enumerate(ops) if op.type == "RecurrentNetwork")
    moved = ops[-2:] + ops[:-2]  # the parameter's producer first, as the graph orders it
    ranges = memonger_plan.compute_ranges(moved)
    assert ranges["rnn/gates_t_w"].defined == 0 and ranges["rnn/gates_t_w"].used == k_rnn + 2
