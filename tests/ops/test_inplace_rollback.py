"""A failed op leaves every output as it was, also values it wrote in place before failing."""

from __future__ import annotations

import numpy as np
import pytest

from framework.core import CreateOperator
from framework.errors import FrameworkError
from framework.memory.workspace import Workspace


def _adam_ws(iteration):
    rng = np.random.default_rng(16)
    ws = Workspace()
    values = {
        "p": rng.standard_normal(6).astype(np.float32),
        "m1": rng.standard_normal(6).astype(np.float32),
        "m2": rng.random(6).astype(np.float32),
        "g": rng.standard_normal(6).astype(np.float32),
        "lr": np.array([-0.01], np.float32),
        "it": np.array([iteration], np.int64),
    }
    for k, v in values.items():
        ws.feed_blob(k, v)
    return ws, values


def test_a_failing_in_place_adam_leaves_param_and_moments_unchanged():
    # t = iter + 1 = 0: the bias correction divides by 1 - beta1^0 = 0, found after the moments are written
    ws, before = _adam_ws(-1)
    op = CreateOperator("Adam", ["p", "m1", "m2", "g", "lr", "it"], ["p", "m1", "m2"])
    with pytest.raises((FrameworkError, ZeroDivisionError)):
        ws.run_operator_once(op)
    for k in ("p", "m1", "m2"):
        np.testing.assert_array_equal(ws.fetch_blob(k), before[k], err_msg=k)


def test_a_succeeding_adam_still_updates_in_place():
    ws, v = _adam_ws(0)
    ws.run_operator_once(CreateOperator("Adam", ["p", "m1", "m2", "g", "lr", "it"], ["p", "m1", "m2"]))
    b1, b2, eps = 0.9, 0.999, 1e-5
    m1 = b1 * v["m1"].astype(np.float64) + (1 - b1) * v["g"]
    m2 = b2 * v["m2"].astype(np.float64) + (1 - b2) * v["g"].astype(np.float64) ** 2
    corr = np.sqrt(1 - b2) / (1 - b1)
    want = v["p"] + v["lr"][0] * corr * m1 / (np.sqrt(m2) + eps)
    np.testing.assert_allclose(ws.fetch_blob("m1"), m1, rtol=1e-6)
    np.testing.assert_allclose(ws.fetch_blob("m2"), m2, rtol=1e-6)
    np.testing.assert_allclose(ws.fetch_blob("p"), want, rtol=1e-5)


def test_an_output_a_later_op_reshaped_in_place_is_written_back_in_place():
    # e.g. an RNN step's FC output that a Reshape made [1, N, D] in place: the next run reshapes it back and
    # writes into the same buffer, allocating nothing (the journal keeps the dims for a rollback)
    from framework.memory.allocator import memory_reporter
    from framework.ops import create_operator

    rng = np.random.default_rng(3)
    x, w, b = (rng.standard_normal(s).astype(np.float32) for s in [(2, 3), (4, 3), (4,)])
    ws = Workspace()
    for k, v in {"X": x, "W": w, "b": b}.items():
        ws.feed_blob(k, v)
    op = create_operator(CreateOperator("FC", ["X", "W", "b"], ["Y"]), ws)
    op.run()
    op.run()  # (FC packs a weight it sees twice)
    t = ws.get_blob("Y").get_tensor()
    buf = t.data()
    t.reshape((1, 2, 4))
    before = memory_reporter().allocations
    op.run()
    assert memory_reporter().allocations == before
    y = ws.fetch_blob("Y")
    assert y.shape == (2, 4) and np.shares_memory(t.data(), buf)
    np.testing.assert_allclose(y, x @ w.T + b, rtol=1e-5)
