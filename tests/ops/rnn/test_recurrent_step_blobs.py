"""RecurrentNetwork with a state of two recorded steps or none, and retrieve_step_blobs' names (bytes,
as Caffe2's FetchBlob of a string tensor gives them)."""

import numpy as np
import pytest

from framework import core, workspace
from framework.caffe2.python import recurrent
from framework.caffe2.python.model_helper import ModelHelper
from framework.errors import FrameworkError


def _running_sum(init_steps):
    """s_t = s_{t-1} + x_t, with the initial state holding ``init_steps`` recorded steps (the last is s_0)."""
    workspace.ResetWorkspace()
    model = ModelHelper(name=f"sum_{init_steps}")
    step = ModelHelper(name="step", param_model=model)
    x_t, s_prev = step.net.AddScopedExternalInputs("x_t", "s_prev")
    s_t = step.net.Add([x_t, s_prev], "s_t")
    step.net.AddExternalOutput(s_t)
    x = np.arange(6, dtype=np.float32).reshape(3, 1, 2)
    s0 = np.ones((init_steps, 1, 2), np.float32)
    workspace.FeedBlob("x", x)
    workspace.FeedBlob("s0", s0)
    s_all, _ = recurrent.recurrent_net(
        net=model.net,
        cell_net=step.net,
        inputs=[(x_t, "x")],
        initial_cell_inputs=[(s_prev, "s0")],
        links={s_prev: s_t},
        scope="sum",
        outputs_with_grads=[],
        forward_only=True,
    )
    workspace.RunNetOnce(model.net)
    return model, x, workspace.FetchBlob(str(s_all))


def test_one_recorded_initial_step():
    _, x, s_all = _running_sum(1)
    np.testing.assert_allclose(s_all, 1 + np.cumsum(x, axis=0))


def test_an_initial_state_without_steps_is_accepted():
    # Caffe2's stateful convolution with a window of 1 keeps [0, batch, d] of input history. The op
    # takes the empty initial state (it used to fail reshaping it, a raw numpy error); a recurrence
    # that reads the step before the first then fails clearly, naming the link
    with pytest.raises(FrameworkError, match="link window .* outside 'sum/s_prev_states'"):
        _running_sum(0)


def test_retrieve_step_blobs_names_are_bytes():
    model, _, _ = _running_sum(1)
    names = recurrent.retrieve_step_blobs(model.net, "probe")
    assert names and all(isinstance(n, bytes) for n in names)
    assert all(workspace.HasBlob(n.decode()) for n in names)


@pytest.fixture(autouse=True)
def _clean():
    yield
    workspace.ResetWorkspace()
    core
