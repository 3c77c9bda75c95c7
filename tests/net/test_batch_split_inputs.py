"""The Predictor's batch split (framework/predictor/batch_split.py) sets its per-thread copies up for the very
input arrays it was given, compared by identity, never by ``id()``: a new array of the same shape (fed as a new
blob) is split anew and gives its own numbers; the same array run again is not set up again."""

from __future__ import annotations

import numpy as np
import pytest

from framework.core import CreateOperator
from framework.memory.workspace import Workspace
from framework.predictor.batch_split import BatchSplitRunner
from framework.proto.framework_pb2 import NetDef
from framework.runtime.parallel import get_num_threads, set_num_threads


@pytest.fixture
def two_threads():
    old = get_num_threads()
    set_num_threads(2)
    yield
    set_num_threads(old)


def test_a_new_input_array_is_split_anew_and_the_same_one_is_not(two_threads):
    net = NetDef(name="scale", op=[CreateOperator("Relu", ["x"], ["y"])], external_input=["x"], external_output=["y"])
    ws = Workspace()
    x1 = np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3)
    ws.feed_blob("x", x1)
    full = ws.create_net(net)
    runner = BatchSplitRunner(ws, net, ["x"], ["y"])
    assert runner.ok
    runner.run(full)
    copies = runner._copies
    np.testing.assert_array_equal(ws.fetch_blob("y"), np.maximum(x1, 0))
    runner.run(full)
    assert runner._copies is copies  # same input array: the copies stay
    x2 = -x1  # same shape, a new array
    ws.remove_blob("x")
    ws.feed_blob("x", x2)
    runner.run(full)
    assert runner._copies is not copies
    np.testing.assert_array_equal(ws.fetch_blob("y"), np.maximum(x2, 0))
