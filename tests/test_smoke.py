"""The package imports, registers ops, and runs one op end to end."""

import numpy as np

from framework import core, workspace
from framework.ops import registered_ops


def test_relu_runs_through_the_compat_api():
    workspace.ResetWorkspace()
    workspace.FeedBlob("X", np.array([-1.0, 2.0], dtype=np.float32))
    workspace.RunOperatorOnce(core.CreateOperator("Relu", ["X"], ["Y"]))
    np.testing.assert_array_equal(workspace.FetchBlob("Y"), np.array([0.0, 2.0], dtype=np.float32))


def test_registry_lists_relu():
    assert "Relu" in registered_ops()
