"""build_adagrad(counter_halflife=...) (Caffe2 2020): row-wise decayed update counts next to a sparse
Adagrad update; reference values from RowWiseCounter's definition."""

import math

import numpy as np

from framework import core, workspace
from framework.caffe2.python import model_helper
from framework.caffe2.python.optimizer import build_adagrad


def sparse_model(**kwargs):
    workspace.ResetWorkspace()
    model = model_helper.ModelHelper(name="h36b_counter")
    w = model.param_init_net.ConstantFill([], "w", shape=[6], value=0.0)
    model.params.append(w)
    picked = model.net.Gather([w, "indices"], "gather")
    out = model.net.ReduceFrontSum(picked, "sum")
    sq = model.net.SquaredL2Distance([out, "label"], "sq")
    loss = model.net.AveragedLoss(sq, "loss")
    grads = model.AddGradientOperators([loss])
    assert isinstance(grads["w"], core.GradientSlice)
    return model, build_adagrad(model, base_learning_rate=0.1, rowWise=True, **kwargs)


def test_counter_halflife_counts_row_updates_with_decay():
    halflife = 4
    model, opt = sparse_model(counter_halflife=halflife)
    aux = opt.get_auxiliary_parameters()
    assert [str(b) for b in aux.local] == ["w_avg_squared_sum", "w_update_counter", "w_prev_update_iter"]
    assert [str(b) for b in aux.shared] == ["optimizer_iteration"]
    workspace.RunNetOnce(model.param_init_net)
    assert workspace.FetchBlob("w_update_counter").dtype == np.float64
    assert workspace.FetchBlob("w_prev_update_iter").dtype == np.int64
    workspace.CreateNet(model.net)
    counter, prev = np.zeros(6), np.zeros(6, np.int64)
    for rows in ([1, 3], [3], [0, 3, 5]):
        workspace.FeedBlob("indices", np.array(rows, np.int64))
        workspace.FeedBlob("label", np.array(1.0, np.float32))
        workspace.RunNet(model.net.Proto().name)
        it = int(workspace.FetchBlob("optimizer_iteration")[0])
        for r in rows:  # counter = 1 + decay^(iter - prev) * counter, the row's iteration updated
            counter[r] = 1 + math.exp(-math.log(2) / halflife * max(0, it - prev[r])) * counter[r]
            prev[r] = max(it, prev[r])
    np.testing.assert_allclose(workspace.FetchBlob("w_update_counter"), counter, rtol=1e-12)
    np.testing.assert_array_equal(workspace.FetchBlob("w_prev_update_iter"), prev)
    assert counter[3] > 2 and counter[2] == 0  # row 3 was seen three times, row 2 never


def test_without_counter_halflife_there_is_no_counter():
    model, opt = sparse_model()
    assert [str(b) for b in opt.get_auxiliary_parameters().local] == ["w_avg_squared_sum"]
    assert not opt.get_auxiliary_parameters().shared
    assert "RowWiseCounter" not in [op.type for op in model.net.Proto().op]
