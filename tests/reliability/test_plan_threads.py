"""A plan step asking for more concurrent substep instances than MAX_STEP_THREADS is a NetError
naming the step, before any thread starts (not thousands of threads, then "can't start new thread")."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from framework.errors import NetError
from framework.memory.workspace import Workspace
from framework.net.plan import MAX_STEP_THREADS, run_step
from framework.proto.framework_pb2 import ExecutionStep, NetDef
from framework.proto.io import parse_text

PLAN_STEP = """
name: "outer"
substep {{ name: "inner" network: "n" }}
num_concurrent_instances: {n}
"""


def _ws():
    ws = Workspace()
    ws.feed_blob("x", np.ones(2, np.float32))
    net = NetDef(name="n")
    net.op.add(type="Relu", input=["x"], output=["y"])
    ws.create_net(net)
    return ws


def test_too_many_instances_refused_before_threads_start():
    step = parse_text(PLAN_STEP.format(n=30000), ExecutionStep, "plan.pbtxt")
    before = threading.active_count()
    with pytest.raises(NetError, match="'outer'.*30000 threads"):
        run_step(_ws(), step)
    assert threading.active_count() == before


def test_instances_within_the_limit_run():
    step = parse_text(PLAN_STEP.format(n=4), ExecutionStep, "plan.pbtxt")
    ws = _ws()
    run_step(ws, step)
    np.testing.assert_array_equal(ws.fetch_blob("y"), np.ones(2, np.float32))
    assert MAX_STEP_THREADS >= 4
