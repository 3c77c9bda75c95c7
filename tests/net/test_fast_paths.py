"""The compiled fast path of the ops the benchmarks lean on (FC, Relu, Softmax, LogSoftmax):
a net whose ops are all compiled gives the same numbers as a numpy reference on every run,
after new shapes, after new weights of the same shape (FC's packed copy), in place, and
allocates nothing in steady state."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.memory.allocator import memory_reporter
from framework.memory.workspace import Workspace
from framework.proto.framework_pb2 import NetDef


def _ref_softmax(z: np.ndarray, log: bool) -> np.ndarray:
    z = z.astype(np.float64)
    z = z - z.max(axis=1, keepdims=True)
    if log:
        return z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


def _ref(x, w1, b1, w2, b2, log):
    h = np.maximum(x.astype(np.float64) @ w1.T.astype(np.float64) + b1, 0)
    return _ref_softmax(h @ w2.T.astype(np.float64) + b2, log)


def _net(log: bool, inplace_softmax: bool) -> NetDef:
    net = NetDef(name="fast", external_input=["x", "w1", "b1", "w2", "b2"])
    sm_out = "z" if inplace_softmax else "p"
    net.op.extend(
        [
            CreateOperator("FC", ["x", "w1", "b1"], ["h"]),
            CreateOperator("Relu", ["h"], ["h"]),
            CreateOperator("FC", ["h", "w2", "b2"], ["z"]),
            CreateOperator("LogSoftmax" if log else "Softmax", ["z"], [sm_out]),
        ]
    )
    net.external_output.append(sm_out)
    return net


def _params(rng, k, n, c):
    return (
        rng.standard_normal((n, k)).astype(np.float32),
        rng.standard_normal(n).astype(np.float32),
        rng.standard_normal((c, n)).astype(np.float32),
        rng.standard_normal(c).astype(np.float32),
    )


@settings(max_examples=15, deadline=None)
@given(
    batch=st.integers(1, 6),
    k=st.integers(1, 7),
    n=st.integers(1, 7),
    c=st.integers(1, 5),
    log=st.booleans(),
    inplace=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_compiled_mlp_matches_reference(batch, k, n, c, log, inplace, seed):
    rng = np.random.default_rng(seed)
    ws = Workspace()
    w1, b1, w2, b2 = _params(rng, k, n, c)
    x = rng.standard_normal((batch, k)).astype(np.float32)
    for name, v in dict(x=x, w1=w1, b1=b1, w2=w2, b2=b2).items():
        ws.feed_blob(name, v)
    net = ws.create_net(_net(log, inplace))
    out = "z" if inplace else "p"
    for _ in range(4):  # slow run, compile, fast runs (FC packs W after two unchanged runs)
        net.run()
        np.testing.assert_allclose(ws.fetch_blob(out), _ref(x, w1, b1, w2, b2, log), rtol=1e-4, atol=1e-5)
    assert net.program.compiled_count == len(net.ops)
    # New weights with the same shape: the packed copy must not be reused.
    w1 = rng.standard_normal(w1.shape).astype(np.float32)
    ws.feed_blob("w1", w1)
    for _ in range(3):
        net.run()
        np.testing.assert_allclose(ws.fetch_blob(out), _ref(x, w1, b1, w2, b2, log), rtol=1e-4, atol=1e-5)
    # A new batch size: the guard drops to run() and recompiles.
    x = rng.standard_normal((batch + 2, k)).astype(np.float32)
    ws.feed_blob("x", x)
    for _ in range(3):
        net.run()
        np.testing.assert_allclose(ws.fetch_blob(out), _ref(x, w1, b1, w2, b2, log), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("log", [False, True])
def test_compiled_net_allocates_nothing(log):
    rng = np.random.default_rng(0)
    ws = Workspace()
    for name, v in zip(("w1", "b1", "w2", "b2"), _params(rng, 8, 6, 4)):
        ws.feed_blob(name, v)
    ws.feed_blob("x", rng.standard_normal((3, 8)).astype(np.float32))
    net = ws.create_net(_net(log, False))
    for _ in range(3):
        net.run()
    before = memory_reporter().allocations
    for _ in range(5):
        net.run()
    assert memory_reporter().allocations == before
    assert net.program.fast is not None


def test_softmax_compile_declines_empty_rows():
    ws = Workspace()
    ws.feed_blob("z", np.zeros((3, 0), np.float32))
    net = NetDef(name="empty", external_input=["z"])
    net.op.append(CreateOperator("Softmax", ["z"], ["p"]))
    n = ws.create_net(net)
    n.run()
    n.run()
    assert ws.fetch_blob("p").shape == (3, 0)
