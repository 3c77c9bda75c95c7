"""net_builder's Task/TaskGroup hooks (ops.task_init / task_exit / task_instance_init / _exit /
local_init / local_exit / task_reporter / local_reporter / task_group) run by LocalSession, and the
net attributes / setup collection under them (core.Net.add_attribute, framework.caffe2.python.task), as Caffe2's
net_builder_test / task.py. Expected values are worked out by hand in each test."""

from __future__ import annotations

import threading
import time

import pytest

from framework import core
from framework.caffe2.python.net_builder import NetBuilder, ops, to_execution_step
from framework.caffe2.python.session import LocalSession
from framework.caffe2.python.task import (
    Cluster,
    Node,
    SetupNets,
    Task,
    TaskGroup,
    add_setup_steps,
    final_output,
    get_setup_nets,
)
from framework.memory.workspace import Workspace


def _value(ws: Workspace, blob) -> int:
    return int(ws.fetch_blob(str(blob)))


def test_setup_runs_task_init_before_and_task_exit_after_the_body():
    # Caffe2's net_builder_test.test_setup: task_init blocks anywhere in the task run first, the
    # task_exit block last, after ops written below it.
    with Task() as task:
        with ops.task_init():
            one = ops.Const(1)
        two = ops.Add([one, one])
        with ops.task_init():
            three = ops.Const(3)
        accum = ops.Add([two, three])  # 5
        with ops.task_exit():
            seven_1 = ops.Add([accum, one])  # runs after accum += 1 below
        six = ops.Add([accum, one])
        ops.Add([accum, one], [accum])
        seven_2 = ops.Add([accum, one])
        o6, o7_1, o7_2 = final_output(six), final_output(seven_1), final_output(seven_2)
    with LocalSession(Workspace()) as session:
        session.run(task)
    assert (o6.fetch(), o7_1.fetch(), o7_2.fetch()) == (6, 7, 7)


def test_order_local_init_task_init_body_task_exit_local_exit():
    # x = x * 10 + k in each phase: the digits of x record the order the phases ran in.
    def step(x, k):
        ops.Add([ops.Mul([x, ops.Const(10)]), ops.Const(k)], [x])

    ws = Workspace()
    with TaskGroup() as tg:
        with Task():
            with ops.local_exit():
                x = core.BlobReference("order")
                step(x, 5)
            with ops.task_exit():
                step(x, 4)
            with ops.local_init():
                ops.Const(1, blob_out=x)
            step(x, 3)
            with ops.task_init():
                step(x, 2)
    LocalSession(ws).run(tg)
    assert _value(ws, "order") == 12345


def test_task_and_instance_setup_with_concurrent_instances():
    # Caffe2's test_multi_instance (smaller): task_init/exit once, instance init/exit and the body
    # once per instance, instance blobs private to each instance's workspace.
    n, iters = 4, 5
    with TaskGroup() as tg:
        with Task(num_instances=n):
            with ops.task_init():
                counter1 = ops.CreateCounter([], ["global_counter"])
                counter2 = ops.CreateCounter([], ["global_counter2"])
                counter3 = ops.CreateCounter([], ["global_counter3"])
                inits = ops.CreateCounter([], ["instance_inits"])
            with ops.task_instance_init():
                task_counter = ops.CreateCounter([], ["task_counter"])
                ops.CountUp(inits)
            local_counter = ops.CreateCounter([], ["local_counter"])
            with ops.loop(iters):
                ops.CountUp(counter1)
                ops.CountUp(task_counter)
                ops.CountUp(local_counter)
            with ops.task_instance_exit():
                count2 = ops.RetrieveCount(task_counter)
                with ops.loop(ops.Mul([count2, count2])):
                    ops.CountUp(counter2)
            count3 = ops.RetrieveCount(local_counter)
            with ops.loop(ops.Mul([count3, count3])):
                ops.CountUp(counter3)
            with ops.task_exit():
                total1 = final_output(ops.RetrieveCount(counter1))
                total2 = final_output(ops.RetrieveCount(counter2))
                total3 = final_output(ops.RetrieveCount(counter3))
                total_inits = final_output(ops.RetrieveCount(inits))
    ws = Workspace()
    LocalSession(ws).run(tg)
    assert total1.fetch() == n * iters
    assert total2.fetch() == n * iters**2  # each instance's own task_counter reached iters
    assert total3.fetch() == n * iters**2
    assert total_inits.fetch() == n
    assert not ws.has_blob("task_counter") and not ws.has_blob("local_counter")  # instance-private


class _PythonOpStats:
    lock = threading.Lock()
    num_instances = 0
    num_calls = 0


def _python_op_builder(step):
    with _PythonOpStats.lock:
        _PythonOpStats.num_instances += 1

    def my_op(inputs, outputs):
        with _PythonOpStats.lock:
            _PythonOpStats.num_calls += step

    return my_op


def test_multi_instance_python_op_builds_one_function_per_instance():
    # Caffe2's test_multi_instance_python_op (16 instances instead of 64): a builder tuple makes one
    # operator (and function) per concurrent instance.
    with Task(num_instances=16) as task:
        with ops.loop(4):
            ops.Python((_python_op_builder, [1], {}))([], [])
    _PythonOpStats.num_instances = _PythonOpStats.num_calls = 0
    LocalSession(Workspace()).run(task)
    assert (_PythonOpStats.num_instances, _PythonOpStats.num_calls) == (16, 64)


def test_outputs_written_by_concurrent_instances_reach_the_session_workspace():
    # As Caffe2's LocalSession: output blobs exist in the session's workspace before the run, so an
    # instance (in its own child workspace) writes them there.
    ws = Workspace()
    with Task(num_instances=3) as task:
        out = final_output(ops.Const(7, blob_out="inst_out"))
        ops.Const(1, blob_out="inst_private")
    LocalSession(ws).run(task)
    assert out.fetch() == 7 and not ws.has_blob("inst_private")


def test_local_setup_runs_once_per_group_and_each_setup_object_once():
    ws = Workspace()
    counter = core.BlobReference("runs")
    shared_init = core.Net("shared_init")
    shared_init.CountUp([counter])
    shared = SetupNets(init_nets=[shared_init])
    with TaskGroup() as tg:
        with ops_builder_free_task(TaskGroup.LOCAL_SETUP, shared):
            with ops.local_init():
                ops.CountUp([counter])
        with ops_builder_free_task(TaskGroup.LOCAL_SETUP, shared):
            pass
        tg.add_setup(_CreateCounter(counter))
    LocalSession(ws).run(tg)
    # 1 (the shared SetupNets, attached to both tasks) + 1 (the one local_init block)
    assert int(ws.fetch_blob("runs_value")) == 2


class _CreateCounter:
    """A LOCAL_SETUP object adding ops to the shared init net (as pipeline's queues do)."""

    def __init__(self, counter):
        self.counter = counter

    def setup(self, init_net):
        init_net.CreateCounter([], [self.counter], init_count=0)

    def exit(self, exit_net):
        exit_net.RetrieveCount([self.counter], ["runs_value"])


class ops_builder_free_task:  # noqa: N801 (a context helper)
    """A Task whose first net carries ``obj`` as a net attribute under ``key``."""

    def __init__(self, key, obj):
        self.key, self.obj, self.task = key, obj, Task()

    def __enter__(self):
        self.task.__enter__()
        ops.net().add_attribute(self.key, self.obj)
        return self.task

    def __exit__(self, *exc):
        self.task.__exit__(*exc)


def test_task_reporter_runs_once_more_after_the_task():
    ws = Workspace()
    with Task() as task:
        with ops.task_init():
            x = ops.Const(0)
            reports = ops.CreateCounter([], ["reports"])
        with ops.task_reporter(interval_ms=5):
            ops.Copy([x], ["seen"])
            ops.CountUp([reports])
        with ops.loop(50):
            ops.Add([x, ops.Const(1)], [x])
        with ops.task_exit():
            runs = final_output(ops.RetrieveCount([reports]))
    LocalSession(ws).run(task)
    assert _value(ws, x) == 50
    assert _value(ws, "seen") == 50  # its last run comes after the body finished
    assert runs.fetch() >= 1


def _nap(inputs, outputs):
    time.sleep(0.03)


def test_task_reporter_runs_periodically_while_the_task_runs():
    ws = Workspace()
    with Task() as task:
        with ops.task_init():
            reports = ops.CreateCounter([], ["periodic_reports"])
        with ops.task_reporter(interval_ms=5):
            ops.CountUp([reports])
        with ops.loop(5):  # ~150 ms of body (the Python op sleeps without the GIL)
            ops.net().Proto().op.add().CopyFrom(core.CreatePythonOperator(_nap, [], []))
        with ops.task_exit():
            runs = final_output(ops.RetrieveCount([reports]))
    LocalSession(ws).run(task)
    assert runs.fetch() >= 3  # timer runs during the body, plus the one after it


def test_local_reporter_and_report_net_of_a_task_group():
    ws = Workspace()
    with TaskGroup() as tg:
        with Task():
            with ops.local_init():
                y = ops.Const(0, blob_out="y")
            ops.Add([y, ops.Const(7)], [y])
        with NetBuilder():
            with ops.local_reporter(interval_ms=5):
                ops.Copy([y], ["local_seen"])
        rnet = tg.report_net(report_interval=1)
        rnet.Copy([y], ["net_seen"])
    LocalSession(ws).run(tg)
    assert _value(ws, "local_seen") == 7 and _value(ws, "net_seen") == 7


def test_reporters_need_a_task_group_or_builder():
    with NetBuilder():
        with pytest.raises(RuntimeError, match="TaskGroup"):
            with ops.local_reporter():
                ops.Const(1)
    with pytest.raises(RuntimeError, match="NetBuilder"):
        ops.task_init()


def test_task_group_inside_a_task_runs_as_its_next_step():
    ws = Workspace()
    with Task() as outer:
        a = ops.Const(2, blob_out="a")
        with ops.task_group():
            with Task():
                with ops.task_init():
                    ops.Mul([a, ops.Const(5)], [a])  # after the outer task's Const
                inner_out = final_output(ops.Add([a, ops.Const(1)]))
        ops.Mul([a, ops.Const(3)], [a])  # after the inner group
    LocalSession(ws).run(outer)
    assert inner_out.fetch() == 11 and _value(ws, a) == 30


def test_net_used_twice_and_a_net_with_setup_run_again():
    # Caffe2's test_net_multi_use; then a bare Net with a TASK_SETUP attribute: the session wraps
    # it in a Task, so its init net runs before it on every run.
    ws = Workspace()
    with Task() as task:
        total = ops.Const(0)
        net = core.Net("my_net")
        net.Add([total, net.Const(1)], [total])
        ops.net(net)
        ops.net(net)
        result = final_output(total)
    session = LocalSession(ws)
    session.run(task)
    assert result.fetch() == 2

    init = core.Net("reset")
    init.Const(100, blob_out="z")
    body = core.Net("bump")
    body.Add(["z", body.Const(1)], ["z"])
    body.add_attribute(Task.TASK_SETUP, SetupNets(init_nets=[init]))
    for _ in range(2):
        session.run(body)
        assert _value(ws, "z") == 101
    step_body = core.Net("bump_step")
    step_body.Add(["z", step_body.Const(5)], ["z"])
    step_body.add_attribute(TaskGroup.LOCAL_SETUP, SetupNets(init_nets=[init]))
    session.run(core.Plan(core.execution_step("plan_step", [step_body])))
    assert _value(ws, "z") == 105


def test_hooks_in_a_plain_net_builder_run_when_the_session_runs_its_step():
    ws = Workspace()
    with NetBuilder() as nb:
        with ops.task_exit():
            ops.Mul(["w", ops.Const(2)], ["w"])
        with ops.task_init():
            ops.Const(20, blob_out="w")
        ops.Add(["w", ops.Const(1)], ["w"])
    LocalSession(ws).run(to_execution_step(nb))
    assert _value(ws, "w") == 42


def test_final_output_without_a_task_makes_one_in_the_group():
    ws = Workspace()
    fill = core.Net("fill_b")
    fill.Const(4, blob_out="b")
    with TaskGroup() as tg:
        Task(step=fill)
        out = final_output("b")  # no active Task: a new one joins the group
    assert tg.num_registered_tasks() == 2
    LocalSession(ws).run(tg)
    assert out.fetch() == 4


def test_net_attributes_are_collected_from_nets_substeps_and_clones():
    a, b = core.Net("attr_a"), core.Net("attr_b")
    a.add_attribute("k", 1)
    b.add_attribute("k", 2)
    b.add_attribute("other", 3)
    assert a.get_attributes("k") == [1] and a.get_attributes("none") == []
    clone = b.Clone("attr_b_clone")
    clone.add_attribute("k", 4)
    assert clone.get_attributes("k") == [2, 4] and b.get_attributes("k") == [2]
    inner = core.execution_step("inner", [b])
    outer = core.execution_step("outer", [core.execution_step("first", [a]), inner, core.execution_step("again", [b])])
    assert outer.get_all_attributes("k") == [1, 2]  # each net once
    assert core.Plan(outer).get_all_attributes("other") == [3]


def test_get_setup_nets_and_add_setup_steps():
    net = core.Net("with_setup")
    init_a = core.Net("init_a")
    obj = SetupNets(init_nets=init_a, exit_nets=None)
    net.add_attribute("key", obj)
    net.add_attribute("key", obj)  # the same object runs once
    inits, exits = get_setup_nets("key", [net], target=None)
    assert inits == [init_a] and exits == []
    assert get_setup_nets("key", [net], target=None) == ([], [])  # used up
    body = core.execution_step("body", [net])
    assert add_setup_steps(body, [], [], "n") is body
    wrapped = add_setup_steps(body, [init_a], [core.Net("exit_a")], "n")
    assert [s.name for s in wrapped.Proto().substep] == ["n:init", "body", "n:exit"]
    bad = core.Net("bad_setup")
    bad.add_attribute("key", SetupNets(init_nets="not a net"))
    with pytest.raises(TypeError, match="Unsupported type for setup"):
        get_setup_nets("key", [bad], target=None)


def test_a_caffe2_script_with_task_hooks_runs_through_the_import_hook():
    """Caffe2's net_builder_test.test_multi_instance shape, written against caffe2.python."""
    import framework.caffe2 as hook

    hook.install()
    try:
        from caffe2.python import workspace as c2ws
        from caffe2.python.net_builder import ops as c2ops
        from caffe2.python.session import LocalSession as C2Session
        from caffe2.python.task import Task as C2Task
        from caffe2.python.task import TaskGroup as C2TaskGroup
        from caffe2.python.task import final_output as c2_final_output

        c2ws.ResetWorkspace()
        with C2TaskGroup() as tg:
            with C2Task(num_instances=2):
                with c2ops.task_init():
                    counter = c2ops.CreateCounter([], ["c2_hook_counter"])
                with c2ops.loop(3):
                    c2ops.CountUp(counter)
                with c2ops.task_exit():
                    total = c2_final_output(c2ops.RetrieveCount(counter))
        C2Session().run(tg)
        assert total.fetch() == 6
    finally:
        hook.uninstall()


def test_nodes_are_recorded_and_a_local_session_runs_every_node():
    ws = Workspace()
    with Cluster() as cluster:
        with TaskGroup() as tg:
            with Node("trainer", gpus=1):
                with Task() as t1:
                    final_output(ops.Const(1, blob_out="on_trainer"))
            with Node("reader"):
                with Task() as t2:
                    final_output(ops.Const(2, blob_out="on_reader"))
            with Node("trainer", ram=4):
                Task(step=core.Net("trainer_noop"))
            with NetBuilder():
                with ops.local_reporter(interval_ms=5):  # the current node: Node.current() = 'local'
                    ops.Const(3, blob_out="reported")
        assert cluster.nodes() == ["trainer", "reader", "local"]
        assert cluster.node_kwargs()["trainer"] == {"gpus": 1, "ram": 4}
    assert (t1.node, t2.node) == ("trainer", "reader") and tg.used_nodes() == ["trainer", "reader"]
    assert repr(Node("n", a=1)) == "Node(name=n, kwargs={'a': 1})" and str(Node.current("x")) == "x"
    LocalSession(ws).run(tg)
    assert [_value(ws, b) for b in ("on_trainer", "on_reader", "reported")] == [1, 2, 3]
