"""optimizer.build_storm (Caffe2 2020's StormOptimizer): its auxiliary blobs and ops, and a model it trains."""

import numpy as np

from framework import workspace
from framework.caffe2.python import brew, model_helper, optimizer


def test_build_storm_structure_and_training():
    workspace.ResetWorkspace()
    m = model_helper.ModelHelper(name="h36b_storm")
    pred = brew.fc(m, "x", "pred", dim_in=3, dim_out=1)
    loss = m.AveragedLoss(m.SquaredL2Distance([pred, "y"], "dist"), "loss")
    m.AddGradientOperators([loss])
    opt = optimizer.build_storm(m, base_learning_rate=0.5, momentum=10.0, beta=0.1)
    aux = {str(b) for b in opt.get_auxiliary_parameters().local}
    assert {"pred_w_moment", "pred_w_grad_sq_sum", "pred_b_moment", "pred_b_grad_sq_sum"} <= aux
    assert not opt.get_auxiliary_parameters().shared
    assert [op.type for op in m.net.Proto().op].count("Storm") == 2
    rng = np.random.RandomState(0)
    x = rng.randn(16, 3).astype(np.float32)
    y = (x @ np.array([[1.0], [-2.0], [0.5]], np.float32) + 0.3).astype(np.float32)
    workspace.FeedBlob("x", x)
    workspace.FeedBlob("y", y)
    workspace.RunNetOnce(m.param_init_net)
    np.testing.assert_array_equal(workspace.FetchBlob("pred_w_grad_sq_sum"), np.array([0.01], np.float32))
    workspace.CreateNet(m.net)
    workspace.RunNet(m.net)
    first = float(workspace.FetchBlob("loss"))
    workspace.RunNet(m.net, 60)
    assert float(workspace.FetchBlob("loss")) < 0.5 * first
