"""optimizer.build_decay_adagrad: the DecayAdagrad op with Caffe2's state names on dense parameters,
SparseAdagrad on sparse ones; a small regression trains."""

import numpy as np
import pytest

from framework import workspace
from framework.caffe2.python import brew, optimizer
from framework.caffe2.python.model_helper import ModelHelper
from framework.errors import FrameworkError


@pytest.fixture(autouse=True)
def _fresh():
    workspace.ResetWorkspace()
    yield
    workspace.ResetWorkspace()


def _model():
    model = ModelHelper(name="decay_adagrad_model")
    pred = brew.fc(model, "x", "pred", dim_in=3, dim_out=1)
    dist = model.net.SquaredL2Distance([pred, "y"], "dist")
    loss = model.net.AveragedLoss(dist, "loss")
    model.AddGradientOperators([loss])
    return model


def test_builder_adds_decay_adagrad_with_caffe2_state_names():
    model = _model()
    opt = optimizer.build_decay_adagrad(model, base_learning_rate=0.1, weight_decay=0.01)
    updates = [op for op in model.net.Proto().op if op.type == "DecayAdagrad"]
    assert [op.input[0] for op in updates] == ["pred_w", "pred_b"]
    assert list(updates[0].input[1:3]) == ["pred_w_first_mo1ment", "pred_w_second_moment"]
    args = {a.name: a for a in updates[0].arg}
    assert args["beta1"].f == 0.0 and args["epsilon"].f == pytest.approx(0.1)
    assert args["weight_decay"].f == pytest.approx(0.01)
    aux = opt.get_auxiliary_parameters()
    assert "pred_w_second_moment" in [str(b) for b in aux.local]


def test_training_reduces_the_loss():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(32, 3)).astype(np.float32)
    y = (x @ np.array([[1.0], [-2.0], [0.5]], np.float32)).astype(np.float32)
    model = _model()
    optimizer.build_decay_adagrad(model, base_learning_rate=0.2, beta1=0.5)
    workspace.FeedBlob("x", x)
    workspace.FeedBlob("y", y)
    workspace.RunNetOnce(model.param_init_net)
    workspace.CreateNet(model.net)
    losses = []
    for _ in range(60):
        workspace.RunNet(model.net.Name())
        losses.append(float(workspace.FetchBlob("loss")))
    assert losses[-1] < 0.2 * losses[0]


def test_ema_options_are_refused():
    with pytest.raises(FrameworkError, match="EMA"):
        optimizer.DecayAdagradOptimizer(ema_options={"ema_alpha": 0.5})
