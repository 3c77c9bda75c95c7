"""SqueezeExcite against the squeeze-excitation block written here in float64 numpy (global mean, 1x1 conv, its
activation, 1x1 conv, Sigmoid or HardSigmoid gate, channel scale), in place and not, compiled (one call) and
numpy paths; its errors; and the inference pass's rewrite of the five ops into it (values equal to the unoptimized
net's, left alone where an intermediate is observable or read elsewhere)."""

from __future__ import annotations

import collections

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.errors import ShapeError
from framework.kernels import window_jit
from framework.memory.allocator import memory_reporter
from framework.memory.workspace import Workspace
from framework.net.optimize import optimize_inference
from framework.ops import create_operator
from framework.ops.testing import assert_reference_checks
from framework.proto.framework_pb2 import NetDef


def _act(h, act):
    if act in ("Relu", "Relu6"):
        h = np.maximum(h, 0)
        return np.minimum(h, 6) if act == "Relu6" else h
    if act == "Swish":
        return h / (1 + np.exp(-h))
    if act == "HardSwish":
        return h * np.clip(h / 6 + 0.5, 0, 1)
    return h


def reference(x, w1, b1, w2, b2, act, gate, alpha=0.2, beta=0.5):
    x64 = x.astype(np.float64)
    n, c = x.shape[:2]
    s = x64.reshape(n, c, -1).mean(axis=2)  # (N, C)
    h = _act(s @ w1.reshape(w1.shape[0], c).T.astype(np.float64) + b1, act)
    z = h @ w2.reshape(c, -1).T.astype(np.float64) + b2
    g = np.clip(alpha * z + beta, 0, 1) if gate == "HardSigmoid" else 1 / (1 + np.exp(-z))
    return (x64 * g.reshape(n, c, *([1] * (x.ndim - 2)))).astype(np.float32)


@settings(max_examples=50, deadline=None)
@given(
    n=st.integers(1, 3),
    c=st.integers(1, 24),
    r=st.integers(1, 8),
    spatial=st.sampled_from([(1, 1), (3, 5), (7, 7), (12, 9), (4, 3, 2)]),
    act=st.sampled_from(["identity", "Relu", "Relu6", "Swish", "HardSwish"]),
    gate=st.sampled_from(["Sigmoid", "HardSigmoid"]),
    inplace=st.booleans(),
    numpy_path=st.booleans(),
    seed=st.integers(0, 2**31 - 1),
)
def test_squeeze_excite_equals_the_five_ops(n, c, r, spatial, act, gate, inplace, numpy_path, seed):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((n, c, *spatial)) * 3).astype(np.float32)
    w1 = rng.standard_normal((r, c, 1, 1)).astype(np.float32)
    b1 = rng.standard_normal(r).astype(np.float32)
    w2 = rng.standard_normal((c, r, 1, 1)).astype(np.float32)
    b2 = rng.standard_normal(c).astype(np.float32)
    kw = dict(activation=act, gate=gate) | (dict(alpha=0.25, beta=0.4) if gate == "HardSigmoid" else {})
    op = CreateOperator("SqueezeExcite", ["X", "W1", "b1", "W2", "b2"], ["X" if inplace else "Y"], **kw)
    with pytest.MonkeyPatch.context() as mp:
        if numpy_path:
            mp.setattr(window_jit, "usable", lambda family: False)
        assert_reference_checks(
            op,
            [x, w1, b1, w2, b2],
            lambda *a: reference(*a, act, gate, *((0.25, 0.4) if gate == "HardSigmoid" else ())),
            threshold=2e-5,
            atol=2e-5,
        )


@pytest.mark.parametrize("act", ["identity", "Relu6", "Swish", "HardSwish"])
@pytest.mark.parametrize("gate", ["Sigmoid", "HardSigmoid"])
def test_one_compiled_call_per_run_without_allocating(act, gate, monkeypatch):
    """With the kernels available the whole block is window_jit.squeeze_excite's one call (the separate means and
    scale passes are never reached), on a batch of 2 with mobile-net channel counts, against float64; a second run
    allocates nothing."""
    if not window_jit.available():
        pytest.skip("compiled kernels unavailable (numba missing or FRAMEWORK_NO_JIT)")
    rng = np.random.default_rng(3)
    c, r = 96, 24
    x = (rng.standard_normal((2, c, 14, 14)) * 2).astype(np.float32)
    w1 = (rng.standard_normal((r, c, 1, 1)) * 0.2).astype(np.float32)
    b1 = rng.standard_normal(r).astype(np.float32)
    w2 = (rng.standard_normal((c, r, 1, 1)) * 0.3).astype(np.float32)
    b2 = rng.standard_normal(c).astype(np.float32)
    ws = Workspace()
    for name, v in zip(["X", "W1", "b1", "W2", "b2"], [x, w1, b1, w2, b2]):
        ws.feed_blob(name, v)
    kw = dict(activation=act, gate=gate) | (dict(alpha=1 / 6, beta=0.5) if gate == "HardSigmoid" else {})
    op = create_operator(CreateOperator("SqueezeExcite", ["X", "W1", "b1", "W2", "b2"], ["Y"], **kw), ws)

    def unreached(*args):
        raise AssertionError("the separate pass ran")

    monkeypatch.setattr(window_jit, "channel_means", unreached)
    monkeypatch.setattr(window_jit, "scale_shift", unreached)
    op.run()
    want = reference(x, w1, b1, w2, b2, act, gate, *((1 / 6, 0.5) if gate == "HardSigmoid" else ()))
    np.testing.assert_allclose(ws.fetch_blob("Y"), want, rtol=2e-5, atol=2e-5)
    rep = memory_reporter()
    before = rep.allocations
    op.run()
    assert rep.allocations == before
    np.testing.assert_allclose(ws.fetch_blob("Y"), want, rtol=2e-5, atol=2e-5)


def test_wrong_filter_shape_names_the_blob_and_leaves_the_output():
    ws = Workspace()
    rng = np.random.default_rng(0)
    ws.feed_blob("X", rng.standard_normal((1, 4, 3, 3)).astype(np.float32))
    ws.feed_blob("W1", rng.standard_normal((2, 4, 1, 1)).astype(np.float32))
    ws.feed_blob("b1", np.zeros(2, np.float32))
    ws.feed_blob("W2", rng.standard_normal((4, 3, 1, 1)).astype(np.float32))  # R is 2
    ws.feed_blob("b2", np.zeros(4, np.float32))
    ws.feed_blob("Y", np.full(5, 7.0, np.float32))
    op = create_operator(CreateOperator("SqueezeExcite", ["X", "W1", "b1", "W2", "b2"], ["Y"]), ws)
    with pytest.raises(ShapeError, match=r"SqueezeExcite.*'W2'"):
        op.run()
    np.testing.assert_array_equal(ws.fetch_blob("Y"), np.full(5, 7.0, np.float32))


def _se_net(act_op: str, gate: str, extra_reader: str | None = None) -> NetDef:
    net = NetDef(name="se")
    ops = [CreateOperator("AveragePool", ["x"], ["s"], global_pooling=1)]
    if act_op == "relu":  # Conv + Relu: the pass fuses the Relu into the conv first
        ops += [CreateOperator("Conv", ["s", "w1", "b1"], ["h0"], kernel=1), CreateOperator("Relu", ["h0"], ["h"])]
    else:
        ops += [CreateOperator("Conv", ["s", "w1", "b1"], ["h"], kernel=1)]
    ops += [CreateOperator("Conv", ["h", "w2", "b2"], ["z"], kernel=1)]
    if gate == "HardSigmoid":
        ops += [CreateOperator("HardSigmoid", ["z"], ["g"], alpha=1 / 6, beta=0.5)]
    else:
        ops += [CreateOperator("Sigmoid", ["z"], ["g"])]
    ops += [CreateOperator("Mul", ["g", "x"], ["y"])]
    if extra_reader:
        ops += [CreateOperator("Relu", [extra_reader], ["other"])]
    net.op.extend(ops)
    net.external_input.extend(["x", "w1", "b1", "w2", "b2"])
    net.external_output.extend(["y"] + (["other"] if extra_reader else []))
    return net


def _feed(ws):
    rng = np.random.default_rng(3)
    ws.feed_blob("x", rng.standard_normal((2, 6, 5, 5)).astype(np.float32))
    ws.feed_blob("w1", rng.standard_normal((3, 6, 1, 1)).astype(np.float32))
    ws.feed_blob("b1", rng.standard_normal(3).astype(np.float32))
    ws.feed_blob("w2", rng.standard_normal((6, 3, 1, 1)).astype(np.float32))
    ws.feed_blob("b2", rng.standard_normal(6).astype(np.float32))


def _run(net, outputs, optimize):
    ws = Workspace()
    _feed(ws)
    net2 = optimize_inference(net, ws, outputs=outputs) if optimize else net
    ws.create_net(net2).run()
    return [ws.fetch_blob(o) for o in outputs], collections.Counter(op.type for op in net2.op)


@pytest.mark.parametrize("act_op,gate", [("none", "Sigmoid"), ("relu", "HardSigmoid"), ("relu", "Sigmoid")])
def test_the_pass_writes_one_op_with_the_same_values(act_op, gate):
    net = _se_net(act_op, gate)
    (want,), _ = _run(net, ["y"], optimize=False)
    (got,), types = _run(net, ["y"], optimize=True)
    assert types == {"SqueezeExcite": 1}, types
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("reader", ["s", "g"])
def test_the_pass_leaves_a_block_whose_intermediate_is_read_elsewhere(reader):
    net = _se_net("none", "Sigmoid", extra_reader=reader)
    want, _ = _run(net, ["y", "other"], optimize=False)
    got, types = _run(net, ["y", "other"], optimize=True)
    assert "SqueezeExcite" not in types and types["Mul"] == 1, types
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
