"""DataCouple with more inputs than outputs (the extra ones only tie dependencies), and
CopyRowsToTensor's width error in Caffe2's words."""

import numpy as np
import pytest

from framework.core import CreateOperator
from framework.errors import FrameworkError
from framework.memory.workspace import Workspace


def test_data_couple_extra_inputs_are_dependencies():
    ws = Workspace()
    p, g, extra = (np.random.rand(3, 2) for _ in range(3))
    for name, value in dict(param=p, gradient=g, extraBlob=extra).items():
        ws.feed_blob(name, value)
    ws.run_operator_once(CreateOperator("DataCouple", ["param", "gradient", "extraBlob"], ["param", "gradient"]))
    np.testing.assert_array_equal(ws.fetch_blob("param"), p)
    np.testing.assert_array_equal(ws.fetch_blob("gradient"), g)
    with pytest.raises(FrameworkError, match="only 1 inputs"):
        ws.run_operator_once(CreateOperator("DataCouple", ["param"], ["param", "gradient"]))


def test_copy_rows_width_mismatch_message():
    ws = Workspace()
    ws.feed_blob("t", np.zeros((3, 2), np.float32))
    ws.feed_blob("i", np.array([0], np.int64))
    ws.feed_blob("r", np.zeros(3, np.float32))
    with pytest.raises(RuntimeError, match="width of input tensor should match lengths of row"):
        ws.run_operator_once(CreateOperator("CopyRowsToTensor", ["t", "i", "r"], ["t"]))
    np.testing.assert_array_equal(ws.fetch_blob("t"), np.zeros((3, 2)))
