"""A failed RunOperatorOnce leaves the workspace as it was (no empty output blobs)."""

import numpy as np
import pytest

from framework.core import CreateOperator
from framework.errors import FrameworkError
from framework.memory.workspace import Workspace


def test_failed_load_leaves_no_empty_outputs(tmp_path):
    ws = Workspace(root_folder=str(tmp_path))
    ws.feed_blob("keep", np.ones(2, np.float32))
    before = sorted(ws.blobs())
    op = CreateOperator("Load", [], ["a", "b"], db="missing.minidb", db_type="minidb")
    with pytest.raises(FrameworkError):
        ws.run_operator_once(op)
    assert sorted(ws.blobs()) == before


def test_failed_op_keeps_outputs_that_existed():
    ws = Workspace()
    ws.feed_blob("x", np.ones((2, 3), np.float32))
    ws.feed_blob("w", np.ones((4, 5), np.float32))
    ws.feed_blob("b", np.ones(4, np.float32))
    ws.feed_blob("y", np.zeros(1, np.float32))
    with pytest.raises(FrameworkError):
        ws.run_operator_once(CreateOperator("FC", ["x", "w", "b"], ["y"]))
    np.testing.assert_array_equal(ws.fetch_blob("y"), np.zeros(1, np.float32))
