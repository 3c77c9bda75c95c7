"""Optimizers never half-apply: Adam / SparseAdam given a negative iteration (or betas that make the
bias correction undefined) refuse before touching the parameter or either moment."""

from __future__ import annotations

import numpy as np
import pytest

from framework.errors import FrameworkError
from framework.memory.workspace import Workspace
from framework.proto.args import make_argument
from framework.proto.framework_pb2 import OperatorDef


def _ws(it):
    ws = Workspace()
    ws.feed_blob("p", np.array([1.0, 2.0, 3.0], np.float32))
    ws.feed_blob("m1", np.array([0.1, 0.2, 0.3], np.float32))
    ws.feed_blob("m2", np.array([0.01, 0.02, 0.03], np.float32))
    ws.feed_blob("g", np.array([0.5, -0.5, 1.0], np.float32))
    ws.feed_blob("lr", np.array([-0.1], np.float32))
    ws.feed_blob("it", np.array([it], np.int64))
    ws.feed_blob("idx", np.array([0, 2], np.int64))
    ws.feed_blob("gs", np.array([0.5, 1.0], np.float32))
    return ws


def _snapshot(ws):
    return {b: ws.fetch_blob(b).copy() for b in ("p", "m1", "m2")}


CASES = {
    "Adam": ["p", "m1", "m2", "g", "lr", "it"],
    "SparseAdam": ["p", "m1", "m2", "idx", "gs", "lr", "it"],
}


@pytest.mark.parametrize("op_type", sorted(CASES))
@pytest.mark.parametrize("it,args", [(-5, {}), (-1, {}), (3, {"beta1": 1.0}), (3, {"beta2": 2.0})])
def test_adam_refuses_before_mutating(op_type, it, args):
    ws = _ws(it)
    before = _snapshot(ws)
    op = OperatorDef(type=op_type, input=CASES[op_type], output=["p", "m1", "m2"])
    for k, v in args.items():
        op.arg.append(make_argument(k, v))
    with pytest.raises(FrameworkError, match="iteration|bias correction"):
        ws.run_operator_once(op)
    for b, v in before.items():
        np.testing.assert_array_equal(ws.fetch_blob(b), v, err_msg=b)


def test_adam_iteration_zero_still_applies():
    ws = _ws(0)
    op = OperatorDef(type="Adam", input=CASES["Adam"], output=["p", "m1", "m2"])
    ws.run_operator_once(op)
    b1, b2, eps = 0.9, 0.999, 1e-5
    g = np.array([0.5, -0.5, 1.0])
    m1 = b1 * np.array([0.1, 0.2, 0.3]) + (1 - b1) * g
    m2 = b2 * np.array([0.01, 0.02, 0.03]) + (1 - b2) * g * g
    p = np.array([1.0, 2.0, 3.0]) - 0.1 * np.sqrt(1 - b2) / (1 - b1) * m1 / (np.sqrt(m2) + eps)
    np.testing.assert_allclose(ws.fetch_blob("m1"), m1, rtol=1e-5)
    np.testing.assert_allclose(ws.fetch_blob("p"), p, rtol=1e-5)
