"""OpProgram(when_stable=True), as RecurrentNetwork binds its step nets: the fast path is compiled only
after two slow runs in a row over the same arrays, and gives the numpy reference's numbers; a new input
shape between runs puts compilation off again. The default program compiles after its first run."""

import numpy as np

from framework.core import CreateOperator
from framework.memory.workspace import Workspace
from framework.net.base import net_class
from framework.net.graph import compile_graph
from framework.proto.framework_pb2 import NetDef


def _net(ws, when_stable):
    net = NetDef(name="s", external_input=["x", "w", "b"])
    net.op.extend([CreateOperator("FC", ["x", "w", "b"], ["h"]), CreateOperator("Relu", ["h"], ["y"])])
    graph = compile_graph(net, ws.has_blob)
    return net_class("simple")(graph, ws, compile_when_stable=when_stable)


def _feed(ws, rng, n):
    x = rng.standard_normal((n, 3)).astype(np.float32)
    ws.feed_blob("x", x)
    return np.maximum(x.astype(np.float64) @ ws.fetch_blob("w").T + ws.fetch_blob("b"), 0)


def test_compiles_after_two_runs_over_the_same_arrays():
    rng = np.random.default_rng(0)
    ws = Workspace()
    ws.feed_blob("w", rng.standard_normal((4, 3)).astype(np.float32))
    ws.feed_blob("b", rng.standard_normal(4).astype(np.float32))
    net = _net(ws, when_stable=True)
    want = _feed(ws, rng, 2)
    net.run()
    assert net.program.fast is None  # one slow run: not yet
    np.testing.assert_allclose(ws.fetch_blob("y"), want, rtol=1e-5, atol=1e-6)
    want = _feed(ws, rng, 5)  # a new shape: new arrays
    net.run()
    assert net.program.fast is None
    np.testing.assert_allclose(ws.fetch_blob("y"), want, rtol=1e-5, atol=1e-6)
    x = ws.fetch_blob("x")
    ws.get_blob("x").array[...] = x[::-1]  # same arrays, new values
    want = np.maximum(x[::-1].astype(np.float64) @ ws.fetch_blob("w").T + ws.fetch_blob("b"), 0)
    net.run()
    assert net.program.fast is not None and net.program.compiled_count == 2
    np.testing.assert_allclose(ws.fetch_blob("y"), want, rtol=1e-5, atol=1e-6)
    ws.get_blob("x").array[...] = x
    net.run()  # the compiled path
    np.testing.assert_allclose(
        ws.fetch_blob("y"), np.maximum(x @ ws.fetch_blob("w").T + ws.fetch_blob("b"), 0), rtol=1e-5, atol=1e-6
    )


def test_default_program_compiles_after_its_first_run():
    rng = np.random.default_rng(1)
    ws = Workspace()
    ws.feed_blob("w", rng.standard_normal((4, 3)).astype(np.float32))
    ws.feed_blob("b", rng.standard_normal(4).astype(np.float32))
    net = _net(ws, when_stable=False)
    _feed(ws, rng, 2)
    net.run()
    assert net.program.fast is not None
