"""A two-layer rnn_cell.LSTM built inside a NameScope (as Caffe2's rnn_cell_test builds it): the unrolled
form (static_rnn_unroll_size) against a numpy loop, and the RecurrentNetwork form's gradients against
central differences (layer 0's hidden state gets gradient from outside and from layer 1 in the step net);
Caffe2's blob names for the layers, and for initial states made by the initializer."""

import numpy as np
import pytest

from framework import core
from framework.caffe2.python import rnn_cell, scope
from framework.caffe2.python.model_helper import ModelHelper
from framework.memory.workspace import Workspace
from tests.ops.rnn.lstm_reference import lstm_loop

T, N, D, H = 3, 2, 2, 3


def lstm_layer(x, h, c, wx, bx, wh, bh):
    return lstm_loop(x, h, c, wx, bx, wh, bh)[0]


def build(unroll):
    model = ModelHelper(name="scoped")
    states = [core.BlobReference(f"{k}{layer}") for layer in range(2) for k in ("h", "c")]
    with scope.NameScope("ns"):
        res = rnn_cell.LSTM(
            model, core.BlobReference("x"), None, states, D, [H, H], scope="rec", static_rnn_unroll_size=unroll
        )
    return model, res


def feed(model, dtype):
    rng = np.random.default_rng(7)
    ws = Workspace()
    ws.feed_blob("x", rng.standard_normal((T, N, D)).astype(dtype))
    for layer in range(2):
        for k in ("h", "c"):
            ws.feed_blob(f"{k}{layer}", rng.standard_normal((1, N, H)).astype(dtype))
    ws.run_net_once(model.param_init_net)
    for name in model.params:
        v = ws.fetch_blob(str(name))
        ws.feed_blob(str(name), (v + 0.5 * rng.standard_normal(v.shape)).astype(dtype))
    return ws


def test_unrolled_two_layer_lstm_in_a_name_scope_matches_numpy():
    model, res = build(T)
    ws = feed(model, np.float32)
    ws.run_net_once(model.net)
    p = {str(n).split("/", 1)[1]: ws.fetch_blob(str(n)).astype(np.float64) for n in model.params}
    x = ws.fetch_blob("x").astype(np.float64)
    for layer in range(2):
        w = f"rec/layer_{layer}/"
        h0, c0 = (ws.fetch_blob(f"{k}{layer}")[0].astype(np.float64) for k in ("h", "c"))
        i2h = w if layer else "rec/"  # layer 0's input projection is made under the stack's scope only (Caffe2)
        x = lstm_layer(x, h0, c0, p[i2h + "i2h_w"], p[i2h + "i2h_b"], p[w + "gates_t_w"], p[w + "gates_t_b"])
    np.testing.assert_allclose(ws.fetch_blob(str(res[0])), x, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(ws.fetch_blob(str(res[1])), x[-1:], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("unroll", [None, T])
def test_two_layer_lstm_in_a_name_scope_gradients_numeric(unroll):
    model, res = build(unroll)
    loss = model.net.SumElements([model.net.Mul([res[0], "wy"], "prod")], "loss")
    grads = model.AddGradientOperators({loss: "seed"})
    ws = feed(model, np.float32)
    ws.feed_blob("wy", np.random.default_rng(8).standard_normal((T, N, H)).astype(np.float32))
    ws.feed_blob("seed", np.array(1.0, np.float32))
    net = ws.create_net(model.net)
    net.run()
    for name in ("x", "h0", "c0", "h1"):
        analytic = ws.fetch_blob(str(grads[name])).reshape(-1).copy()
        base = ws.fetch_blob(name).copy()
        for j in range(base.size):
            vals = []
            for e in (1e-2, -1e-2):
                q = base.copy().reshape(-1)
                q[j] += e
                ws.feed_blob(name, q.reshape(base.shape))
                net.run()
                vals.append(float(ws.fetch_blob("loss")))
            num = (vals[0] - vals[1]) / 2e-2
            assert abs(analytic[j] - num) < 2e-3 + 1e-2 * abs(num), (name, j, analytic[j], num)
        ws.feed_blob(name, base)


@pytest.mark.parametrize("name", [None, "rec"])
def test_initial_states_and_layer_blobs_are_named_as_caffe2_names_them(name):
    model = ModelHelper(name="named")
    rnn_cell.LSTM(model, core.BlobReference("x"), None, None, D, [H, 2], scope=name)
    made = {str(o) for op in model.param_init_net.Proto().op for o in op.output}
    pre = f"{name}/" if name else ""
    for layer in range(len([H, 2])):
        assert f"{pre}layer_{layer}/initial_hidden_state" in made
        assert f"{pre}layer_{layer}/gates_t_w" in made
    assert f"{pre}i2h_w" in made and f"{pre}layer_1/i2h_w" in made
    single = ModelHelper(name="single")
    rnn_cell.LSTM(single, core.BlobReference("x"), None, None, D, H, scope="one")
    made = {str(o) for op in single.param_init_net.Proto().op for o in op.output}
    assert {"one/initial_hidden_state", "one/initial_cell_state", "one/i2h_w", "one/gates_t_w"} <= made


def test_residual_stack_output_is_the_sum_of_the_connected_layers_outputs():
    """MultiRNNCell with residual_output_layers=[1]: the output sequence is layer 0's hidden sequence plus
    layer 1's; which layers are connected is decided by layer, so an output_indices list a caller extended
    (Caffe2's attention test appends the attention state's index to it) changes nothing."""
    model = ModelHelper(name="residual")
    cells = [
        rnn_cell.LSTMCell(input_size=D if i == 0 else H, hidden_size=H, forget_bias=0.0, memory_optimization=False)
        for i in range(2)
    ]
    stack = rnn_cell.MultiRNNCell(cells, name="stack", residual_output_layers=[1])
    stack.output_indices.append(4)
    states = [core.BlobReference(f"{k}{layer}") for layer in range(2) for k in ("h", "c")]
    out, seq = stack.apply_over_sequence(model, core.BlobReference("x"), None, states, outputs_with_grads=[0, 4])
    ws = feed(model, np.float32)
    ws.run_net_once(model.net)
    h0_all, h1_all = ws.fetch_blob(str(seq[0])), ws.fetch_blob(str(seq[4]))
    np.testing.assert_allclose(ws.fetch_blob(str(out)), h0_all + h1_all, rtol=1e-6, atol=1e-6)
    step = ModelHelper(name="step")
    last = stack._prepare_output(step, [core.BlobReference(f"s{i}") for i in range(4)])
    summed = step.net.Proto().op[-1]
    assert summed.type == "Sum" and list(summed.input) == ["s0", "s2"] and str(last) == summed.output[0]
