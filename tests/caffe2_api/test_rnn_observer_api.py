"""RunCountObserver counts the step-net ops a RecurrentNetwork runs, once per timestep (as Caffe2's RNN
executor lets observers see them, the link ops it puts in front of the step ops included)."""

import numpy as np

from framework import workspace
from framework.caffe2.python import model_helper, rnn_cell


def _count(T):
    workspace.ResetWorkspace()
    model = model_helper.ModelHelper(name="h36b_obs_lstm")
    model.net.AddExternalInputs(["input", "seq_lengths", "h0", "c0"])
    rnn_cell.LSTM(
        model=model, input_blob="input", seq_lengths="seq_lengths", initial_states=["h0", "c0"], dim_in=2,
        dim_out=3, scope="lstm", forward_only=True,
    )  # fmt: skip
    workspace.FeedBlob("input", np.random.RandomState(0).rand(T, 4, 2).astype(np.float32))
    workspace.FeedBlob("seq_lengths", np.full(4, T, np.int32))
    for name in ("h0", "c0"):
        workspace.FeedBlob(name, np.zeros((1, 4, 3), np.float32))
    workspace.RunNetOnce(model.param_init_net)
    workspace.CreateNet(model.net)
    counter = model.net.AddObserver("RunCountObserver")
    workspace.RunNet(model.net)
    (rnn,) = [op for op in model.net.Proto().op if op.type == "RecurrentNetwork"]
    args = {a.name: a for a in rnn.arg}
    # Caffe2 runs the step net with one rnn_internal_apply_link op per link in front of the step ops
    step_ops = len(args["step_net"].n.op) + len(args["link_internal"].strings)
    return int(counter.debug_info().split()[3]), len(model.net.Proto().op), step_ops


def test_run_count_includes_step_net_ops_per_timestep():
    for T in (2, 5):
        count, top, step = _count(T)
        assert step > 0 and count == top + T * step
