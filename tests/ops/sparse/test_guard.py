"""Bad input to the sparse, quantized and sparse-optimizer ops is a named FrameworkError (the guard behind
their own checks), and the failed op leaves its blobs as they were."""

import numpy as np
import pytest

from framework.core import CreateOperator
from framework.errors import FrameworkError
from framework.memory.workspace import Workspace
from framework.ops import all_schemas, create_operator

FAMILIES = ("framework.ops.sparse.", "framework.ops.quantized.", "framework.ops.training.sparse_")


def test_every_op_of_the_families_is_guarded():
    ops = [s for s in all_schemas() if s.operator_class.__module__.startswith(FAMILIES)]
    assert len(ops) > 200
    assert all(getattr(s.operator_class.run, "_guarded", False) for s in ops)


@pytest.mark.parametrize(
    "op_type, inputs, outputs",
    [
        ("SortedSegmentSumGradient", [np.float32(1.0).reshape(()), np.float32(2.0).reshape(())], ["d"]),
        ("MergeMultiScalarFeatureTensors", [np.float32(1.0).reshape(())] * 3, ["a", "b", "c"]),
        ("Range", [np.array(["x"], object)], ["y"]),
        ("FloatToFused8BitRowwiseQuantized", [np.float32(1.0).reshape(())], ["y"]),
    ],
)
def test_odd_inputs_are_named_errors(op_type, inputs, outputs):
    ws = Workspace()
    names = [f"in{k}" for k in range(len(inputs))]
    for n, v in zip(names, inputs):
        ws.feed_blob(n, v)
    with pytest.raises(FrameworkError, match=op_type):
        create_operator(CreateOperator(op_type, names, outputs), ws).run()
    for o in outputs:
        assert ws.get_blob(o)._obj is None or not ws.get_blob(o)._obj.is_allocated


def test_a_failed_in_place_update_leaves_the_table_alone():
    ws = Workspace()
    table = np.arange(12, dtype=np.float32).reshape(4, 3)
    ws.feed_blob("p", table)
    ws.feed_blob("m", np.zeros((4, 3), np.float32))
    ws.feed_blob("i", np.array([1, 9]))
    ws.feed_blob("g", np.ones((2, 3), np.float32))
    ws.feed_blob("lr", np.ones(1, np.float32))
    with pytest.raises(FrameworkError, match="SparseMomentumSGDUpdate"):
        create_operator(
            CreateOperator("SparseMomentumSGDUpdate", ["g", "m", "lr", "p", "i"], ["g", "m", "p"]), ws
        ).run()
    np.testing.assert_array_equal(ws.fetch_blob("p"), table)
