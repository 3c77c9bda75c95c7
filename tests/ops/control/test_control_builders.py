"""Caffe2's Python control builders: control (plans of execution steps) and control_ops_util
(If/While ops with Do-scoped branches), against plain Python control flow."""

import numpy as np
import pytest

from framework import core
from framework.caffe2.python import control, control_ops_util
from framework.memory.workspace import Workspace

F32 = np.float32


def _plan(step):
    plan = core.Plan("p")
    plan.AddStep(step)
    return plan


def test_for_while_if_switch_steps():
    ws = Workspace()
    init = core.Net("init")
    init.ConstantFill([], "x", shape=[1], value=0.0)
    init.ConstantFill([], "one", shape=[1], value=1.0)
    add = core.Net("add")
    add.Add(["x", "one"], "x")
    ws.run_plan(_plan(control.Do("main", control.Do("init", init), control.For("loop", add, 5))))
    assert ws.fetch_blob("x").tolist() == [5.0]

    ws.feed_blob("ten", np.array([10.0], F32))
    cond = core.Net("cond")
    cond.AddExternalOutput(cond.LT(["x", "ten"], "c"))
    ws.run_plan(_plan(control.While("w", cond, add)))
    assert ws.fetch_blob("x").tolist() == [10.0]
    ws.run_plan(_plan(control.DoWhile("dw", cond, add)))  # runs the body once more before checking
    assert ws.fetch_blob("x").tolist() == [11.0]

    t, f = core.Net("t"), core.Net("f")
    t.ConstantFill([], "r", shape=[1], value=1.0)
    f.ConstantFill([], "r", shape=[1], value=2.0)
    for b, want in ((True, 1.0), (False, 2.0)):
        ws.feed_blob("b", np.array(b))
        ws.run_plan(_plan(control.If("i", "b", t, f)))
        assert ws.fetch_blob("r").tolist() == [want]
        ws.run_plan(_plan(control.IfNot("n", "b", t, f)))
        assert ws.fetch_blob("r").tolist() == [3.0 - want]

    s1, s2 = core.Net("s1"), core.Net("s2")
    s1.ConstantFill([], "a", shape=[1], value=1.0)
    s2.ConstantFill([], "a2", shape=[1], value=1.0)
    ws.feed_blob("yes", np.array(True))
    ws.feed_blob("no", np.array(False))
    ws.run_plan(_plan(control.Switch("sw", ("yes", s1), ("no", s2))))
    assert ws.fetch_blob("a").tolist() == [1.0] and ws.get_blob("a2").is_empty  # created, never run


@pytest.mark.parametrize("cond", [True, False])
def test_add_if_op_runs_branches_in_scopes_and_differentiates(cond):
    then_net, else_net = core.Net("then"), core.Net("else")
    then_net.Mul(["x", "x"], "tmp")
    then_net.Copy("tmp", "y")
    else_net.Add(["x", "x"], "y")
    net = core.Net("m")
    net.AddExternalInput("c", "x", "y")
    control_ops_util.add_if_op(net, "c", {"c", "x", "y"}, then_net, else_net)
    loss = net.SumElements("y", "loss")
    grads = net.AddGradientOperators([loss])
    ws = Workspace()
    x = np.array([1.5, -2.0], F32)
    ws.feed_blob("c", np.array(cond))
    ws.feed_blob("x", x)
    ws.feed_blob("y", np.zeros(2, F32))
    ws.create_net(net.Proto()).run()
    np.testing.assert_allclose(ws.fetch_blob("y"), x * x if cond else x + x)
    assert not ws.has_blob("tmp")  # branch locals stay in the Do scope
    np.testing.assert_allclose(ws.fetch_blob(str(grads["x"])), 2 * x if cond else np.full(2, 2.0))


def test_add_while_op_matches_python_loop():
    body = core.Net("body")
    body.Add(["i", "one"], "i")
    body.Mul(["acc", "two"], "acc")
    cond = core.Net("cond")
    cond.LT(["i", "n"], "c")
    net = core.Net("m")
    scope = {"i", "one", "acc", "two", "n"}
    control_ops_util.add_while_op(net, "c", scope, body, cond)
    ws = Workspace()
    for k, v in {
        "i": np.array([0], np.int32),
        "one": np.array([1], np.int32),
        "n": np.array([4], np.int32),
        "acc": np.array([1.5], F32),
        "two": np.array([2.0], F32),
    }.items():
        ws.feed_blob(k, v)
    ws.create_net(net.Proto()).run()
    assert ws.fetch_blob("i").tolist() == [4]
    np.testing.assert_allclose(ws.fetch_blob("acc"), [1.5 * 2**4])


def test_control_ops_grad_generators():
    from framework.caffe2.python import control_ops_grad
    from framework.core import CreateOperator
    from framework.proto.framework_pb2 import NetDef

    op = CreateOperator("If", ["c", "x"], ["y"], then_net=NetDef(name="t", op=[CreateOperator("Relu", ["x"], ["y"])]))
    ops, g_in = control_ops_grad.gen_if_gradient(op, ["y_grad"])
    assert [o.type for o in ops] == ["If"] and g_in == [None, "x_grad"]
    assert ops[0].arg[0].n.op[0].type == "ReluGradient"
