"""net_builder: NetBuilder contexts with ops.loop / ops.If (execution steps) and ops.IfNet / Else /
WhileNet / Condition (control ops), against plain Python."""

from framework import core
from framework.caffe2.python.net_builder import NetBuilder, ops, to_execution_step
from framework.memory.workspace import Workspace


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


def test_a_caffe2_script_builds_loops_and_ifs_with_core_to_execution_step():
    """Caffe2's net_builder_test.test_ops shape, written against caffe2.python (import hook)."""
    import framework.caffe2 as hook

    hook.install()
    try:
        from caffe2.python import workspace as c2ws
        from caffe2.python.core import Plan as C2Plan
        from caffe2.python.core import to_execution_step as c2_to_execution_step
        from caffe2.python.net_builder import NetBuilder as C2NetBuilder
        from caffe2.python.net_builder import ops as c2ops

        def count_down():  # y counts the 5 iterations it takes x to reach 0
            x, y = c2ops.Const(5), c2ops.Const(0)
            with c2ops.loop():
                c2ops.stop_if(c2ops.EQ([x, c2ops.Const(0)]))
                c2ops.Add([x, c2ops.Const(-1)], [x])
                c2ops.Add([y, c2ops.Const(1)], [y])
            return y

        def guarded(v):
            with c2ops.stop_guard() as g:
                c2ops.stop_if(c2ops.LT([v, c2ops.Const(5)]))
            return g.has_stopped()

        def branch(x):  # 2 above 50; 3 below (the op after ops.stop() never runs)
            y = c2ops.Const(1)
            with c2ops.If(c2ops.GT([x, c2ops.Const(50)])):
                c2ops.Const(2, blob_out=y)
            with c2ops.If(c2ops.LT([x, c2ops.Const(50)])):
                c2ops.Const(3, blob_out=y)
                c2ops.stop()
                c2ops.Const(4, blob_out=y)
            return y

        with C2NetBuilder() as nb:
            y = count_down()
            not_stopped, stopped = guarded(c2ops.Const(10)), guarded(c2ops.Const(3))
            p, q = branch(c2ops.Const(75)), branch(c2ops.Const(25))
        plan = C2Plan("c2_ops")
        plan.AddStep(c2_to_execution_step(nb))
        ws = c2ws.C.Workspace()
        ws.run(plan)
        got = [ws.blobs[str(b)].fetch() for b in (y, not_stopped, stopped, p, q)]
        assert [int(v) for v in got] == [5, 0, 1, 2, 3]
    finally:
        hook.uninstall()
