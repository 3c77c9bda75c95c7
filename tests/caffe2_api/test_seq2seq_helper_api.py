"""caffe2.python.models.seq2seq.seq2seq_model_helper: arg scope, trainable and non-trainable parameters."""

import numpy as np
import pytest

from framework import workspace
from framework.caffe2.python import scope
from framework.caffe2.python.models.seq2seq.seq2seq_model_helper import Seq2SeqModelHelper


def test_arg_scope_follows_caffe2():
    m = Seq2SeqModelHelper(name="h36b_s2s", use_cudnn=False, ws_nbytes_limit=64)
    assert m.arg_scope == {"use_cudnn": False, "cudnn_exhaustive_search": False, "order": "NHWC", "ws_nbytes_limit": 64}
    assert Seq2SeqModelHelper().arg_scope == {"use_cudnn": True, "cudnn_exhaustive_search": False, "order": "NHWC"}


def test_params_by_trainability_and_scope():
    workspace.ResetWorkspace()
    m = Seq2SeqModelHelper(name="h36b_s2s_p")
    w = m.AddParam("w", init=("GaussianFill", {"shape": [2, 3], "std": 1.0}))
    step = m.AddParam("step", init_value=4, trainable=False)
    with scope.NameScope("dec", reset=True):
        bias = m.AddParam("bias", init_value=0.5, trainable=False)
        assert m.GetNonTrainableParams() == [bias]
    assert m.params == [w] and m.GetNonTrainableParams() == [step, bias]
    assert m.GetNonTrainableParams("dec") == [bias]
    assert m.GetAllParams() == [w, step, bias]
    workspace.RunNetOnce(m.param_init_net)
    np.testing.assert_array_equal(workspace.FetchBlob("step"), [4])
    np.testing.assert_array_equal(workspace.FetchBlob("dec/bias"), [0.5])
    assert workspace.FetchBlob("w").shape == (2, 3)
    with pytest.raises(ValueError):
        m.AddParam("both", init=("ConstantFill", {}), init_value=1)
    with pytest.raises(TypeError):
        m.AddParam("arr", init_value=[1, 2])


def test_without_init_params_parameters_are_net_inputs():
    m = Seq2SeqModelHelper(init_params=False, name="h36b_s2s_noinit")
    p = m.AddParam("given", init_value=1.0)
    assert str(p) == "given" and "given" in m.net.Proto().external_input
    assert len(m.param_init_net.Proto().op) == 0
