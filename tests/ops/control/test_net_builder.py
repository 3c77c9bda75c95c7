"""net_builder: NetBuilder contexts with ops.loop / ops.If (execution steps) and ops.IfNet / Else /
WhileNet / Condition (control ops), against plain Python."""

from framework import core
from framework.memory.workspace import Workspace
from framework.net_builder import NetBuilder, ops, to_execution_step


def _run(nb):
    plan = core.Plan("p")
    plan.AddStep(to_execution_step(nb))
    ws = Workspace()
    ws.run_plan(plan)
    return ws


def test_loop_stop_if_and_if_steps():
    # c = 5; d = 0; loop: stop if c <= 0; c -= 1; if c >= 3: d += 10
    c_py, d_py = 5, 0
    while not c_py <= 0:
        c_py -= 1
        if c_py >= 3:
            d_py += 10
    with NetBuilder() as nb:
        c = ops.Const(5)
        d = ops.Const(0)
        with ops.loop():
            ops.stop_if(ops.LE([c, ops.Const(0)]))
            ops.Add([c, ops.Const(-1)], [c])
            with ops.If(ops.GE([c, ops.Const(3)])):
                ops.Add([d, ops.Const(10)], [d])
    ws = _run(nb)
    assert int(ws.fetch_blob(str(c))) == c_py and int(ws.fetch_blob(str(d))) == d_py


def test_counted_loop_iter():
    with NetBuilder() as nb:
        total = ops.Const(0)
        with ops.loop(4) as loop:
            ops.Add([total, loop.iter()], [total])
    assert int(_run(nb).fetch_blob(str(total))) == 0 + 1 + 2 + 3


def test_ifnet_else_and_whilenet_with_control_ops():
    for flag in (True, False):
        with NetBuilder(_use_control_ops=True) as nb:
            x = ops.Const(2.0)
            y = ops.Const(0.0)
            cond = ops.Const(flag)
            with ops.IfNet(cond):
                ops.Mul([x, x], [y])
            with ops.Else():
                ops.Add([x, ops.Const(100.0)], [y])
            i = ops.Const(0)
            with ops.WhileNet():
                with ops.Condition():
                    ops.LT([i, ops.Const(3)])
                ops.Add([i, ops.Const(1)], [i])
                ops.Add([y, y], [y])
        nets = nb.get()
        assert len(nets) == 1 and {op.type for op in nets[0].Proto().op} >= {"If", "While", "CreateScope"}
        ws = Workspace()
        ws.run_net_once(nets[0].Proto())
        expected = (4.0 if flag else 102.0) * 2**3
        assert float(ws.fetch_blob(str(y))) == expected and int(ws.fetch_blob(str(i))) == 3
