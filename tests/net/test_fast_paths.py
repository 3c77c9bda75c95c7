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
from framework.ops import has_op, registry
from framework.ops.gradient import no_gradient
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import TensorSpec
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


# -- uncompiled ops next to compiled ones ------------------------------------------------------------


class _TestGrowEachRun(Operator):
    """Y = X repeated once more on every run (a new shape, so a new array, each run)."""

    def setup(self) -> None:
        self.count = 0

    def run(self) -> None:
        self.count += 1
        x = self.input(0)
        np.copyto(self.output(0, (self.count, *x.shape), x.dtype), x)


@pytest.fixture(scope="module", autouse=True)
def _grow_op():
    """Register the test-only op for this module and remove it after (the catalogue must not see it)."""
    if not has_op("_TestGrowEachRun"):
        register_op(
            "_TestGrowEachRun",
            inputs=1,
            outputs=1,
            infer=lambda args, ins: [TensorSpec(None, np.dtype(np.float32))],
            private=True,
        )(_TestGrowEachRun)
        no_gradient("_TestGrowEachRun")
    yield
    registry._SCHEMAS.pop("_TestGrowEachRun", None)


@pytest.mark.parametrize("net_type", ["simple", "dag"])
def test_uncompiled_op_replacing_its_array_mid_run(net_type):
    ws = Workspace()
    x = np.array([-1.0, 2.0, -3.0], np.float32)
    ws.feed_blob("x", x)
    net = NetDef(name=f"grow_{net_type}", type=net_type, external_input=["x"])
    net.op.extend(
        [
            CreateOperator("Relu", ["x"], ["r"]),  # compiled, untouched by the growing op
            CreateOperator("_TestGrowEachRun", ["r"], ["g"]),
            CreateOperator("Relu", ["g"], ["y"]),  # reads the array replaced on every run
            CreateOperator("Relu", ["y"], ["z"]),
        ]
    )
    n = ws.create_net(net)
    for count in range(1, 7):
        n.run()
        expected = np.tile(np.maximum(x, 0), (count, 1))
        np.testing.assert_array_equal(ws.fetch_blob("y"), expected)
        np.testing.assert_array_equal(ws.fetch_blob("z"), expected)
    assert 1 in n.program._unstable and n.program.fast is not None
    assert n.program.compiled_count == 1  # only the first Relu: the others touch the unstable op's output


def test_uncompiled_writer_with_a_stable_buffer_keeps_the_fast_path():
    ws = Workspace()
    ws.feed_blob("x", np.array([[-1.0, 2.0]], np.float32))
    net = NetDef(name="stable", external_input=["x"])
    net.op.extend(
        [
            CreateOperator("Relu", ["x"], ["r"]),
            CreateOperator("StopGradient", ["r"], ["r"]),
            CreateOperator("Relu", ["r"], ["y"]),
        ]
    )
    n = ws.create_net(net)
    for _ in range(4):
        n.run()
        np.testing.assert_array_equal(ws.fetch_blob("y"), [[0.0, 2.0]])
    assert n.program.fast is not None and not n.program._unstable


def test_nothing_to_compile_is_not_retried_every_run():
    ws = Workspace()
    ws.feed_blob("x", np.ones(3, np.float32))
    net = NetDef(name="idle", external_input=["x"])
    net.op.append(CreateOperator("StopGradient", ["x"], ["x"]))
    n = ws.create_net(net)
    n.run()
    n.run()
    if n.program.compiled_count == 0:  # StopGradient may gain a compile() one day
        assert n.program._idle_sig is not None


# -- SoftmaxWithLoss and its gradient ----------------------------------------------------------------


def _swl_net(name: str, compile_ops: bool, scale: float) -> NetDef:
    from framework.proto.args import make_argument

    net = NetDef(name=name, external_input=["z", "label"])
    net.op.extend(
        [
            CreateOperator("Relu", ["z"], ["zr"]),
            CreateOperator("SoftmaxWithLoss", ["zr", "label"], ["p", "loss"], scale=scale),
            CreateOperator("ConstantFill", ["loss"], ["dloss"], value=0.5),
            CreateOperator("SoftmaxWithLossGradient", ["zr", "label", "p", "dloss"], ["dz"], scale=scale),
        ]
    )
    if not compile_ops:
        net.arg.append(make_argument("compile_ops", 0))
    return net


@settings(max_examples=12, deadline=None)
@given(
    n=st.integers(1, 6),
    d=st.integers(1, 5),
    scale=st.sampled_from([1.0, 0.25, 3.0]),
    dtype=st.sampled_from([np.int32, np.int64]),
    seed=st.integers(0, 2**16),
)
def test_compiled_softmax_with_loss_is_bit_identical_to_run(n, d, scale, dtype, seed):
    rng = np.random.default_rng(seed)
    ws = Workspace()
    ws.feed_blob("z", rng.standard_normal((n, d)).astype(np.float32))
    ws.feed_blob("label", rng.integers(0, d, n).astype(dtype))
    fast = ws.create_net(_swl_net("fast", True, scale))
    slow = ws.create_net(_swl_net("slow", False, scale))
    for step in range(4):
        if step:  # a new batch in the same arrays' shapes
            ws.feed_blob("z", rng.standard_normal((n, d)).astype(np.float32))
            ws.feed_blob("label", rng.integers(0, d, n).astype(dtype))
        slow.run()
        ref = {b: ws.fetch_blob(b).copy() for b in ("p", "loss", "dz")}
        fast.run()
        for b, v in ref.items():
            np.testing.assert_array_equal(ws.fetch_blob(b), v, err_msg=b)
    assert {
        op.type for op, f in zip(fast.ops, fast.program.fast) if getattr(f, "__name__", "").startswith("softmax_with")
    } == {
        "SoftmaxWithLoss",
        "SoftmaxWithLossGradient",
    }


def test_compiled_softmax_with_loss_rejects_labels_out_of_range():
    from framework.errors import OperatorError

    ws = Workspace()
    ws.feed_blob("z", np.zeros((3, 4), np.float32))
    label = np.array([0, 1, 2], np.int32)
    ws.feed_blob("label", label)
    net = ws.create_net(_swl_net("bad", True, 1.0))
    net.run()
    net.run()
    assert net.program.fast is not None
    ws.get_blob("label")._obj._array[1] = 7  # same array: the compiled path must still check the values
    with pytest.raises(OperatorError, match=r"label 7 in 'label' is out of range \[0, 4\)"):
        net.run()
