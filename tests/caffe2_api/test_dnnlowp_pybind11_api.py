"""caffe2.python.dnnlowp_pybind11 (our module for Caffe2's dnnlowp_pybind11 functions): CreateInt8QuantSchemeBlob
and ObserveInt8QuantParamsBlob act on the current workspace."""

import numpy as np

from framework.caffe2.python import core, workspace
from framework.caffe2.python.dnnlowp_pybind11 import CreateInt8QuantSchemeBlob, ObserveInt8QuantParamsBlob


def test_scheme_and_params_blobs_live_in_the_current_workspace():
    before = workspace.CurrentWorkspace()
    try:
        workspace.SwitchWorkspace("dnnlowp_pybind11_test", True)
        x = np.array([-1.0, 0.0, 3.0], np.float32)
        workspace.FeedBlob("X", x)
        CreateInt8QuantSchemeBlob("scheme", "min_max", False)
        assert workspace.HasBlob("scheme")
        workspace.RunOperatorOnce(core.CreateOperator("Int8GenQuantParams", ["X", "scheme"], ["qp"]))
        scale, zero_point = ObserveInt8QuantParamsBlob("qp")
        # min_max over [-1, 3] with 8 bits: 255 steps cover 4.0, and 0.0 sits at the step nearest -min/scale
        assert np.isclose(scale, 4.0 / 255, rtol=1e-6) and zero_point == round(1.0 / (4.0 / 255))
    finally:
        workspace.ResetWorkspace()
        workspace.SwitchWorkspace(before)
