"""FCWithBootstrap layer (Caffe2 2020): per bootstrap iteration, an FC trained on a resample of the batch's
rows and applied to the whole batch in prediction; reference values in numpy."""

import numpy as np
import pytest

from framework import workspace
from framework.caffe2.python import layer_model_helper, layer_model_instantiator, schema


def model(num_bootstrap=2, **kwargs):
    workspace.ResetWorkspace()
    m = layer_model_helper.LayerModelHelper(
        "h36b_boot", schema.Struct(("x", schema.Scalar((np.float32, (3,))))), schema.Struct()
    )
    out = m.FCWithBootstrap(m.input_feature_schema.x, output_dims=2, num_bootstrap=num_bootstrap, **kwargs)
    m.output_schema = out
    return m, out


def test_outputs_parameters_and_values():
    m, out = model()
    assert out.field_names() == [
        "bootstrap_iteration_0/indices", "bootstrap_iteration_0/preds",
        "bootstrap_iteration_1/indices", "bootstrap_iteration_1/preds",
    ]  # fmt: skip
    init, train = layer_model_instantiator.generate_training_nets_forward_only(m)
    predict = layer_model_instantiator.generate_predict_net(m)
    x = np.random.RandomState(0).randn(7, 3).astype(np.float32)
    schema.FeedRecord(m.input_feature_schema, [x])
    workspace.RunNetOnce(init)
    blobs = out.field_blobs()
    workspace.RunNetOnce(train)
    for i in range(2):
        w = workspace.FetchBlob(f"fc_with_bootstrap/bootstrap_iteration_{i}/w")
        b = workspace.FetchBlob(f"fc_with_bootstrap/bootstrap_iteration_{i}/b")
        assert w.shape == (2, 3) and b.shape == (2,)
        idx = workspace.FetchBlob(str(blobs[2 * i]))
        assert idx.shape == (7,) and idx.min() >= 0 and idx.max() <= 6  # rows of the batch, drawn with replacement
        np.testing.assert_allclose(workspace.FetchBlob(str(blobs[2 * i + 1])), x[idx] @ w.T + b, rtol=1e-5)
    workspace.RunNetOnce(predict)
    for i in range(2):
        w = workspace.FetchBlob(f"fc_with_bootstrap/bootstrap_iteration_{i}/w")
        b = workspace.FetchBlob(f"fc_with_bootstrap/bootstrap_iteration_{i}/b")
        np.testing.assert_allclose(workspace.FetchBlob(str(blobs[2 * i + 1])), x @ w.T + b, rtol=1e-5)
    train_types = [op.type for op in train.Proto().op]
    assert train_types.count("Gather") == 3 and train_types.count("FC") == 2  # batch size + one resample each
    assert [op.type for op in predict.Proto().op].count("Gather") == 1


def test_clip_param_and_bad_arguments():
    m, out = model(num_bootstrap=1, clip_param=(-0.01, 0.01))
    init, train = layer_model_instantiator.generate_training_nets_forward_only(m)
    assert [op.type for op in train.Proto().op].count("Clip") == 2
    with pytest.raises(AssertionError, match="clip"):
        model(clip_param=(0.5, 0.1))
    with pytest.raises(AssertionError, match="axis"):
        model(axis=0)
