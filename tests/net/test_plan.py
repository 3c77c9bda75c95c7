"""Plans: every ExecutionStep feature, through protos and the core wrappers."""

from __future__ import annotations

import numpy as np
import pytest

from framework import core
from framework.core import CreateOperator
from framework.errors import NetError, OperatorError
from framework.memory.workspace import Workspace
from framework.net.plan import run_plan
from framework.proto.framework_pb2 import ExecutionStep, NetDef, PlanDef


def rec_net(name, *, ins=("X",), out=None, sleep_ms=0.0, add=1.0):
    op = CreateOperator("_TestRecord", list(ins), [out or f"{name}_out"], name=name, add=add, sleep_ms=sleep_ms)
    return NetDef(name=name, op=[op], external_input=list(ins))


def ws_with_x():
    ws = Workspace()
    ws.feed_blob("X", np.zeros(1))
    return ws


def test_num_iter_and_networks(op_log):
    ws = ws_with_x()
    acc = NetDef(name="acc", op=[CreateOperator("_TestRecord", ["X"], ["X"], name="acc")], external_input=["X"])
    plan = PlanDef(name="p", network=[acc], execution_step=[ExecutionStep(name="s", network=["acc"], num_iter=4)])
    run_plan(ws, plan)
    assert ws.fetch_blob("X")[0] == 4.0 and op_log == ["acc"] * 4


def test_substeps_in_order(op_log):
    ws = ws_with_x()
    plan = PlanDef(name="p", network=[rec_net("a"), rec_net("b")])
    plan.execution_step.add(
        name="top",
        num_iter=2,
        substep=[ExecutionStep(name="sa", network=["a"]), ExecutionStep(name="sb", network=["b"], num_iter=2)],
    )
    run_plan(ws, plan)
    assert op_log == ["a", "b", "b", "a", "b", "b"]


def test_concurrent_substeps_run_in_parallel_and_errors_propagate():
    ws = ws_with_x()
    # each substep's op waits until the other one runs too: run one after the other, they would fail
    meet = [NetDef(name=n, op=[CreateOperator("_TestRendezvous", [], [], name=n)]) for n in ("a", "b")]
    plan = PlanDef(name="p", network=meet)
    plan.execution_step.add(
        name="top",
        concurrent_substeps=True,
        substep=[ExecutionStep(name="sa", network=["a"]), ExecutionStep(name="sb", network=["b"])],
    )
    run_plan(ws, plan)
    bad = NetDef(name="bad", op=[CreateOperator("_TestFail", [], [], name="kaput")])
    plan2 = PlanDef(name="p2", network=[rec_net("a", sleep_ms=10), bad])
    plan2.execution_step.add(
        name="top",
        concurrent_substeps=True,
        substep=[ExecutionStep(name="sa", network=["a"], num_iter=50), ExecutionStep(name="sb", network=["bad"])],
    )
    with pytest.raises(OperatorError, match="kaput"):
        run_plan(ws, plan2)


def test_should_stop_blob_and_only_once():
    ws = Workspace()
    ws.feed_blob("count", np.array(0, np.int64))
    stop = NetDef(name="stop", op=[CreateOperator("_TestStopAfter", ["count"], ["count", "stop"], n=5)])
    plan = PlanDef(name="p", network=[stop])
    plan.execution_step.add(name="loop", network=["stop"], should_stop_blob="stop")
    run_plan(ws, plan)
    assert int(ws.fetch_blob("count")) == 5
    ws.feed_blob("count", np.array(0, np.int64))
    once = PlanDef(name="p", network=[stop])
    once.execution_step.add(name="once", network=["stop"], should_stop_blob="stop", only_once=True)
    run_plan(ws, once)
    assert int(ws.fetch_blob("count")) == 1
    both = PlanDef(name="p", network=[stop])
    both.execution_step.add(name="bad", network=["stop"], should_stop_blob="stop", num_iter=3)
    with pytest.raises(NetError, match="num_iter and should_stop_blob"):
        run_plan(ws, both)


def test_should_stop_checked_after_each_substep(op_log):
    ws = Workspace()
    ws.feed_blob("count", np.array(0, np.int64))
    ws.feed_blob("X", np.zeros(1))
    stop = NetDef(name="stop", op=[CreateOperator("_TestStopAfter", ["count"], ["count", "stop"], n=2)])
    plan = PlanDef(name="p", network=[stop, rec_net("a")])
    plan.execution_step.add(
        name="top",
        should_stop_blob="stop",
        substep=[ExecutionStep(name="s1", network=["stop"]), ExecutionStep(name="s2", network=["a"])],
    )
    run_plan(ws, plan)
    assert op_log == ["a"]


def test_run_every_ms_and_report_net(op_log):
    ws = ws_with_x()
    # Wide margins: ~20 ticks are expected during the work; the test asks for 3 even on a loaded machine.
    plan = PlanDef(name="p", network=[rec_net("work", sleep_ms=400), rec_net("tick"), rec_net("report")])
    plan.execution_step.add(
        name="top",
        report_net="report",
        report_interval=0,
        substep=[
            ExecutionStep(name="w", network=["work"]),
            ExecutionStep(name="t", network=["tick"], run_every_ms=20),
        ],
    )
    run_plan(ws, plan)
    assert op_log.count("work") == 1
    assert op_log.count("tick") >= 3  # several during the work, one after it
    assert op_log[-2:].count("tick") + op_log[-2:].count("report") == 2
    assert op_log.count("report") >= 1


def test_create_workspace_gives_child_workspace():
    ws = ws_with_x()
    plan = PlanDef(name="p", network=[rec_net("a", out="child_only")])
    plan.execution_step.add(name="s", network=["a"], create_workspace=True)
    run_plan(ws, plan)
    assert not ws.has_blob("child_only")  # written in the child, which read X from the parent


def test_num_concurrent_instances(op_log):
    ws = ws_with_x()
    net = rec_net("a")
    # the three instances' first ops wait for each other: serial instances would fail
    net.op.insert(0, CreateOperator("_TestRendezvous", [], [], parties=3))
    plan = PlanDef(name="p", network=[net])
    plan.execution_step.add(
        name="top",
        num_concurrent_instances=3,
        substep=[ExecutionStep(name="inst", network=["a"], create_workspace=True)],
    )
    run_plan(ws, plan)
    assert op_log == ["a"] * 3


def test_step_with_nets_and_substeps_is_refused():
    ws = ws_with_x()
    plan = PlanDef(name="p", network=[rec_net("a")])
    plan.execution_step.add(name="bad", network=["a"], substep=[ExecutionStep(name="x", network=["a"])])
    with pytest.raises(NetError, match="both networks and substeps"):
        run_plan(ws, plan)


def test_core_plan_wrappers(op_log):
    ws = ws_with_x()
    init = core.Net("plan_init")
    init.add_op("_TestRecord", ["X"], ["X"], name="init")
    train = core.Net("plan_train")
    train.add_op("_TestRecord", ["X"], ["X"], name="train")
    step = core.execution_step("all", [core.execution_step("i", init), core.execution_step("t", train, num_iter=3)])
    plan = core.Plan("my_plan")
    plan.AddStep(step)
    assert [n.name for n in plan.Proto().network] == [init.Name(), train.Name()]
    ws.run_plan(plan)
    assert op_log == ["init", "train", "train", "train"]
    single = core.ExecutionStep("single", train, num_iter=2)
    ws.run_plan(core.Plan(single))
    assert op_log.count("train") == 5
    with pytest.raises(NetError):
        core.ExecutionStep("mixed", train).AddSubstep(step)


def test_create_workspace_steps_repeated_after_their_children_are_freed():
    """A child workspace freed after its step may leave its id to the next one: the plan must still
    create its nets in the new child (it used to key them by id(workspace) and find none)."""
    import gc

    net = core.Net("cw_child_net")
    net.ConstantFill([], ["cw_c"], shape=[1], value=1.0)
    collect = core.Net("cw_collect")
    # the youngest generation holds the freed child (a full collection costs seconds in a big process)
    collect.Python(lambda inputs, outputs: gc.collect(0))([], [])
    inner = core.execution_step("cw_inner", [net], create_workspace=True)
    outer = core.execution_step("cw_outer", [inner, core.execution_step("cw_gc", [collect])], num_iter=30)
    ws = Workspace()
    ws.run_plan(core.Plan(outer).Proto())
    assert not ws.has_blob("cw_c")  # made in the children only
