"""Scalar records (labels) batch into a 1-D output with their values, not zeros."""

import numpy as np

from framework.core import CreateOperator
from framework.memory.workspace import Workspace
from framework.ops.io.db_input import write_tensor_protos_db


def test_scalar_labels_and_features_batch_with_their_values(tmp_path):
    x = np.arange(5 * 2 * 3, dtype=np.float32).reshape(5, 2, 3)
    y = np.array([3, 1, 4, 1, 5], dtype=np.int32)
    path = str(tmp_path / "d.minidb")
    write_tensor_protos_db(path, [x, y], db_type="minidb")
    ws = Workspace()
    ws.run_operator_once(CreateOperator("CreateDB", [], ["r"], db=path, db_type="minidb"))
    ws.run_operator_once(CreateOperator("TensorProtosDBInput", ["r"], ["x", "y"], batch_size=3))
    np.testing.assert_array_equal(ws.fetch_blob("x"), x[:3])
    np.testing.assert_array_equal(ws.fetch_blob("y"), y[:3])
    ws.run_operator_once(CreateOperator("TensorProtosDBInput", ["r"], ["x", "y"], batch_size=3))
    np.testing.assert_array_equal(ws.fetch_blob("y"), np.array([1, 5, 3], dtype=np.int32))  # wraps
