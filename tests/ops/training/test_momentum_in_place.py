"""MomentumSGD / MomentumSGDUpdate / SparseMomentumSGDUpdate update in place without the base's snapshot
copies, give Caffe2's values (independent numpy reference), and a refused call still changes nothing."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.errors import FrameworkError
from framework.memory.workspace import Workspace
from framework.ops.registry import get_schema


def ref_momentum(g, m, lr, mu, nesterov):
    """Caffe2's momentum_sgd_compute in float64: (step, new moment)."""
    g, m = g.astype(np.float64), m.astype(np.float64)
    nm = mu * m + lr * g
    step = (1 + mu) * nm - mu * m if nesterov else nm
    return step, nm


def test_no_snapshot_for_the_momentum_updates():
    for t in ("MomentumSGD", "MomentumSGDUpdate", "SparseMomentumSGDUpdate"):
        assert not get_schema(t).snapshot_inplace, t
    assert get_schema("Adam").snapshot_inplace  # the others keep the base's rollback


@given(
    shape=st.lists(st.integers(1, 6), min_size=1, max_size=3),
    mu=st.floats(0, 0.99),
    lr=st.floats(1e-3, 1.0),
    nesterov=st.integers(0, 1),
    seed=st.integers(0, 2**31 - 1),
)
@settings(max_examples=40, deadline=None)
def test_momentum_sgd_update_in_place_matches_reference(shape, mu, lr, nesterov, seed):
    rng = np.random.default_rng(seed)
    g, m, p = (rng.standard_normal(shape).astype(np.float32) for _ in range(3))
    ws = Workspace()
    for k, v in dict(g=g, m=m, p=p, lr=np.array([lr], np.float32)).items():
        ws.feed_blob(k, v.copy())
    bufs = {k: ws.get_blob(k).held.data() for k in ("g", "m", "p")}
    op = CreateOperator("MomentumSGDUpdate", ["g", "m", "lr", "p"], ["g", "m", "p"], momentum=mu, nesterov=nesterov)
    ws.run_operator_once(op)
    step, nm = ref_momentum(g, m, np.float32(lr), mu, nesterov)
    np.testing.assert_allclose(ws.fetch_blob("g"), step, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ws.fetch_blob("m"), nm, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ws.fetch_blob("p"), p - step, rtol=1e-5, atol=1e-6)
    for k, buf in bufs.items():  # written in the blobs' own buffers
        assert np.shares_memory(ws.get_blob(k).held.data(), buf), k


@pytest.mark.parametrize("op_type", ["MomentumSGD", "MomentumSGDUpdate"])
def test_refused_update_changes_nothing(op_type):
    ws = Workspace()
    vals = dict(g=np.ones(4, np.float32), m=np.full(4, 0.5, np.float32), p=np.arange(4, dtype=np.float32))
    for k, v in vals.items():
        ws.feed_blob(k, v.copy())
    ws.feed_blob("lr", np.array([0.1, 0.2], np.float32))  # not one element
    ins, outs = (
        (["g", "m", "lr", "p"], ["g", "m", "p"]) if op_type == "MomentumSGDUpdate" else (["g", "m", "lr"], ["g", "m"])
    )
    with pytest.raises(FrameworkError, match="one element"):
        ws.run_operator_once(CreateOperator(op_type, ins, outs, momentum=0.9, nesterov=1))
    if op_type == "MomentumSGDUpdate":
        ws.feed_blob("lr", np.array([0.1], np.float32))
        ws.feed_blob("p", np.arange(5, dtype=np.float32))  # wrong shape
        with pytest.raises(FrameworkError):
            ws.run_operator_once(CreateOperator(op_type, ins, outs, momentum=0.9))
        vals["p"] = np.arange(5, dtype=np.float32)
    for k, v in vals.items():
        np.testing.assert_array_equal(ws.fetch_blob(k), v, err_msg=k)


@given(nesterov=st.integers(0, 1), seed=st.integers(0, 2**31 - 1))
@settings(max_examples=20, deadline=None)
def test_sparse_momentum_rows_in_place(nesterov, seed):
    rng = np.random.default_rng(seed)
    rows, width, mu, lr = 12, 3, 0.9, np.float32(0.05)
    p, m = rng.standard_normal((rows, width)).astype(np.float32), rng.standard_normal((rows, width)).astype(np.float32)
    idx = rng.integers(0, rows, size=7).astype(np.int32)  # repeats are updated one after the other
    g = rng.standard_normal((7, width)).astype(np.float32)
    ws = Workspace()
    for k, v in dict(g=g, m=m, p=p, idx=idx, lr=np.array([lr], np.float32)).items():
        ws.feed_blob(k, v.copy())
    pbuf = ws.get_blob("p").held.data()
    op = CreateOperator(
        "SparseMomentumSGDUpdate", ["g", "m", "lr", "p", "idx"], ["g", "m", "p"], momentum=mu, nesterov=nesterov
    )
    ws.run_operator_once(op)
    rp, rm = p.astype(np.float64), m.astype(np.float64)
    for k, r in enumerate(idx):
        step, rm[r] = ref_momentum(g[k], rm[r], lr, mu, nesterov)
        rp[r] -= step
    np.testing.assert_allclose(ws.fetch_blob("p"), rp, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(ws.fetch_blob("m"), rm, rtol=1e-5, atol=1e-5)
    assert np.shares_memory(ws.get_blob("p").held.data(), pbuf)


def test_compiled_momentum_sgd_update_reads_the_learning_rate_each_call():
    """The net's fast path of MomentumSGDUpdate (in place, float32) is run()'s compiled pass bound once: the
    same values as run() bit for bit, a new learning rate written into the blob is used, nothing allocated."""
    from framework.memory.allocator import memory_reporter
    from framework.ops import create_operator

    rng = np.random.default_rng(3)
    g, m, p = (rng.standard_normal((7, 5)).astype(np.float32) for _ in range(3))
    state = {}
    for path in ("run", "compiled"):
        ws = Workspace()
        for k, v in dict(g=g, m=m, p=p, lr=np.array([0.1], np.float32)).items():
            ws.feed_blob(k, v.copy())
        op = create_operator(
            CreateOperator("MomentumSGDUpdate", ["g", "m", "lr", "p"], ["g", "m", "p"], momentum=0.9, nesterov=1), ws
        )
        op.run()
        fast = op.compile() if path == "compiled" else op.run
        assert fast is not None
        before = memory_reporter().allocations
        for lr in (0.05, 0.2):
            ws.get_blob("lr").held.mutable_data(np.float32)[...] = lr
            ws.get_blob("g").held.mutable_data(np.float32)[...] = g  # a fresh gradient each step
            fast()
        assert memory_reporter().allocations == before
        state[path] = {k: ws.fetch_blob(k).copy() for k in ("g", "m", "p")}
    for k in ("g", "m", "p"):
        np.testing.assert_array_equal(state["compiled"][k], state["run"][k], err_msg=k)
    mom, param = m.astype(np.float64), p.astype(np.float64)
    for lr in (0.1, 0.05, 0.2):
        step, mom = ref_momentum(g, mom, np.float32(lr), 0.9, 1)
        param = param - step
    np.testing.assert_allclose(state["compiled"]["p"], param, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(state["compiled"]["m"], mom, rtol=1e-5, atol=1e-5)
