import numpy as np
import pytest
from hypothesis import given

from framework.core import CreateOperator
from framework.errors import OperatorError, ShapeError
from framework.memory.workspace import Workspace
from framework.ops.testing import arrays, assert_reference_checks, shapes


def _reference(x):
    n = x.size
    mean = sum(float(v) for v in x.reshape(-1)) / n
    var = sum((float(v) - mean) ** 2 for v in x.reshape(-1)) / (n - 1) if n > 1 else 0.0
    return [np.array([x.min(), x.max(), mean, var**0.5], dtype=np.float32)]


@given(x=shapes(1, 3, 1, 5).flatmap(lambda s: arrays(s, np.float32)))
def test_summarize_matches_a_direct_computation(x):
    op = CreateOperator("Summarize", ["X"], ["S"])
    assert_reference_checks(op, [x], _reference, threshold=1e-4, atol=1e-5)


def test_summarize_to_file_writes_one_line_per_run(tmp_path):
    ws = Workspace(root_folder=str(tmp_path))
    ws.feed_blob("scope/X", np.array([1.0, 2.0, 3.0], dtype=np.float32))
    ws.run_operator_once(CreateOperator("Summarize", ["scope/X"], [], to_file=1))
    line = (tmp_path / "scope#X.summary").read_text().split()
    assert [float(v) for v in line] == [1.0, 3.0, 2.0, 1.0]


def test_summarize_of_an_empty_tensor_is_an_error():
    ws = Workspace()
    ws.feed_blob("X", np.zeros((0, 3), np.float32))
    with pytest.raises((ShapeError, OperatorError), match="'X' is empty"):
        ws.run_operator_once(CreateOperator("Summarize", ["X"], ["S"]))
