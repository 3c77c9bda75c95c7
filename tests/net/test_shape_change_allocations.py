"""A net fed shape A, then B twice, then A again: the second run at each shape allocates nothing, and returning to
a shape seen before allocates nothing either (the ops get their prepared state for it back,
framework/ops/prepared_states.py); every run's values equal a fresh net's at that shape."""

from __future__ import annotations

import numpy as np
import pytest

from framework.core import CreateOperator
from framework.memory.allocator import memory_reporter
from framework.memory.workspace import Workspace
from framework.net.optimize import optimize_inference
from framework.ops import prepared_states
from framework.proto.framework_pb2 import NetDef

RNG = np.random.default_rng(5)
PARAMS = {
    "w1": RNG.standard_normal((8, 3, 3, 3)).astype(np.float32),
    "b1": RNG.standard_normal(8).astype(np.float32),
    "w2": RNG.standard_normal((8, 8, 3, 3)).astype(np.float32),
    "b2": RNG.standard_normal(8).astype(np.float32),
    "fw": RNG.standard_normal((5, 8)).astype(np.float32),
    "fb": RNG.standard_normal(5).astype(np.float32),
}


def _net() -> NetDef:
    net = NetDef(name="shapes")
    net.op.extend(
        [
            CreateOperator("Conv", ["x", "w1", "b1"], ["c1"], kernel=3, pad=1),
            CreateOperator("Relu", ["c1"], ["c1"]),
            CreateOperator("MaxPool", ["c1"], ["p1"], kernel=3, stride=2, pad=1),
            CreateOperator("Conv", ["p1", "w2", "b2"], ["c2"], kernel=3, pad=1),
            CreateOperator("Sum", ["c2", "p1"], ["s"]),
            CreateOperator("Relu", ["s"], ["s"]),
            CreateOperator("AveragePool", ["s"], ["g"], kernel=2, stride=2),
            CreateOperator("AveragePool", ["g"], ["h"], global_pooling=1),
            CreateOperator("FC", ["h", "fw", "fb"], ["y"]),
            CreateOperator("Softmax", ["y"], ["prob"]),
        ]
    )
    net.external_input.extend(["x", *PARAMS])
    net.external_output.append("prob")
    return net


def _workspace(x) -> Workspace:
    ws = Workspace()
    for k, v in PARAMS.items():
        ws.feed_blob(k, v)
    ws.feed_blob("x", x)
    return ws


def _fresh(x) -> np.ndarray:
    ws = _workspace(x)
    ws.create_net(_net()).run()
    return ws.fetch_blob("prob")


@pytest.mark.parametrize("optimize", [False, True], ids=["plain", "optimized"])
def test_returning_to_a_shape_allocates_nothing(optimize):
    a = RNG.standard_normal((2, 3, 16, 16)).astype(np.float32)
    b = RNG.standard_normal((3, 3, 22, 18)).astype(np.float32)
    ws = _workspace(a)
    net = optimize_inference(_net(), ws) if optimize else _net()
    created = ws.create_net(net)
    rep = memory_reporter()
    counts = []
    for x in (a, a, b, b, a, a, b):
        ws.feed_blob("x", x)
        before = rep.allocations
        created.run()
        counts.append(rep.allocations - before)
        np.testing.assert_allclose(ws.fetch_blob("prob"), _fresh(x), rtol=1e-5, atol=1e-6)
    # the first run at A and at B allocate; FC packs its weight on the second run it sees it
    assert counts[0] > 0 and counts[2] > 0, counts
    assert counts[3:] == [0, 0, 0, 0], counts


def test_states_are_kept_per_signature_up_to_the_limit():
    class Op:
        pass

    op, prepared = Op(), []

    def prep(n):
        prepared.append(n)
        op.size, op.buf = n, np.zeros(n)
        op.first = getattr(op, "first", None) if n != 7 else "seven"

    shapes = [1, 2, 1, 2, 3, 1]
    for n in shapes:
        prepare_for_n(op, n, prep)
        assert op.size == n and op.buf.shape == (n,)
    assert prepared == [1, 2, 3]  # KEEP=2 other states: 1 is still kept when 3 is prepared
    for n in range(4, 4 + prepared_states.KEEP + 1):
        prepare_for_n(op, n, prep)
    prepare_for_n(op, 1, prep)  # dropped (least recently used): prepared again
    assert prepared[-1] == 1
    # a prepare that raises leaves nothing under its key; the state switched away from is kept
    del prepared[:]

    def broken():
        raise ValueError("bad shape")

    with pytest.raises(ValueError):
        prepared_states.prepare_for(op, 99, broken)
    prepare_for_n(op, 1, prep)
    assert prepared == [] and op.size == 1


def test_a_name_learned_late_invalidates_older_states():
    class Op:
        pass

    op, prepared = Op(), []
    op.pad = None  # as an op's setup leaves it

    def prep(n):
        prepared.append(n)
        op.size = n
        op.pad = None if n < 5 else np.zeros(n)  # None again at first: not seen as set

    prepare_for_n(op, 2, prep)
    prepare_for_n(op, 6, prep)  # 'pad' learned here; 2's state lacks it
    prepare_for_n(op, 2, prep)
    assert prepared == [2, 6, 2] and op.pad is None and op.size == 2
    prepare_for_n(op, 6, prep)
    assert prepared == [2, 6, 2] and op.pad.shape == (6,)


def prepare_for_n(op, n, prep):
    prepared_states.prepare_for(op, n, lambda: prep(n))
