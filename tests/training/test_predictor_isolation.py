"""workspace.Predictor owns its workspace: it never writes the caller's blobs, even ones of the same names."""

import numpy as np

from framework import core, workspace


def nets(w_value):
    init = core.Net("init")
    init.GivenTensorFill([], "w", shape=[2, 3], values=[w_value] * 6)
    init.GivenTensorFill([], "b", shape=[2], values=[0.5, -0.5])
    predict = core.Net("predict")
    predict.Relu(predict.FC(["x", "w", "b"], "h"), "y")
    predict.Proto().external_input.extend(["x", "w", "b"])
    predict.Proto().external_output.append("y")
    return init.Proto(), predict.Proto()


def test_train_then_predict_in_one_process_leaves_the_callers_blobs_alone():
    workspace.ResetWorkspace()
    trained = np.arange(6, dtype=np.float32).reshape(2, 3)
    workspace.FeedBlob("w", trained)  # the caller's trained parameter, same name as the predictor's
    workspace.FeedBlob("h", np.full((7,), 9.0, np.float32))  # and an activation of the same name
    x = np.ones((4, 3), np.float32)
    workspace.FeedBlob("x", np.zeros((1, 1), np.float32))
    init, predict = nets(2.0)
    p = workspace.Predictor(init, predict)
    (y,) = p.run([x])
    np.testing.assert_allclose(y, np.maximum(x @ np.full((3, 2), 2.0) + [0.5, -0.5], 0))
    np.testing.assert_array_equal(workspace.FetchBlob("w"), trained)
    np.testing.assert_array_equal(workspace.FetchBlob("h"), np.full((7,), 9.0, np.float32))
    np.testing.assert_array_equal(workspace.FetchBlob("x"), np.zeros((1, 1), np.float32))
    assert not workspace.HasBlob("y") and not workspace.HasBlob("b")


def test_parameters_the_init_net_does_not_create_come_from_the_caller():
    workspace.ResetWorkspace()
    workspace.FeedBlob("w", np.ones((2, 3), np.float32))
    workspace.FeedBlob("b", np.zeros(2, np.float32))
    _, predict = nets(0.0)
    p = workspace.Predictor(core.Net("empty").Proto(), predict)
    (y,) = p.run({"x": np.ones((1, 3), np.float32)})
    np.testing.assert_allclose(y, [[3.0, 3.0]])
