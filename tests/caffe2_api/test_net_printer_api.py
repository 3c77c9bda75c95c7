"""caffe2.python.net_printer: to_string, analyze, debug_net; Net.LogInfo."""

import numpy as np
import pytest

from framework import core, workspace
from framework.caffe2.python import net_printer
from framework.caffe2.python.checkpoint import Job
from framework.caffe2.python.net_builder import ops
from framework.caffe2.python.task import Task, WorkspaceType, final_output


@pytest.fixture(autouse=True)
def _fresh():
    workspace.ResetWorkspace()
    yield
    workspace.ResetWorkspace()


def _net_def(name):
    net = core.Net(name)
    net.Add(["a", "b"], ["c"])
    net.Scale(["c"], ["d"], scale=2.0)
    return net.Proto()


def test_net_in_caffe2_syntax():
    net_def = _net_def("printed")
    name = net_def.name
    assert net_printer.to_string(net_def).splitlines() == [
        f"{name} = core.Net('{name}')",
        f"{name}.Add(['a', 'b'], ['c'])",
        f"{name}.Scale(['c'], ['d'], scale=2.0)",
    ]


def test_net_as_assignments_and_factored_prefixes():
    net_def = _net_def("plain")
    assert net_printer.to_string(net_def, c2_syntax=False).splitlines() == [
        f"# net: {net_def.name}",
        "c = Add(a, b)",
        "d = Scale(c, scale=2.0)",
    ]
    assert net_printer.call("Copy", ["in/x", "in/y"], ["out/x", "out/y"], factor_prefixes=True) == (
        "out/[x, y] = Copy(in/[x, y])"
    )
    assert net_printer.call("F", ["x", ("k", 3)]) == "F(x, k=3)"


def test_loops_and_parallel_steps_are_with_blocks():
    body = core.Net("body")
    body.Copy(["x"], ["y"])
    step = core.execution_step("looped", body, num_iter=3)
    lines = net_printer.to_string(step).splitlines()
    assert lines[0] == "with loop(3):"
    assert all(line.startswith("    ") for line in lines[1:]) and len(lines) == 3
    a, b = core.Net("pa"), core.Net("pb")
    a.Copy(["x"], ["y"])
    b.Copy(["x"], ["z"])
    par = core.execution_step("par", [core.execution_step("s1", a), core.execution_step("s2", b)])
    par.SetConcurrentSubsteps(True)
    lines = net_printer.to_string(par).splitlines()
    assert lines[0] == "with parallel():"
    assert lines[1] == "    with step(s1):"


def test_job_text_names_groups_tasks_and_outputs():
    with Job() as job:
        with job.init_group, Task(name="init_task"):
            ops.Const(1.0, blob_out="one")
        with Task(name="epoch_task"):
            out = final_output(ops.Add(["one", "one"], ["two"]))
        job.add_stop_condition(out)
    text = net_printer.to_string(job)
    assert "with Job.current().init_group:" in text
    assert "with Job.current().stop_conditions:" in text
    assert "Output[two]" in text
    assert "name=local/epoch_task" in text  # Caffe2 names a task node/name


def test_analyze_finds_an_undefined_blob():
    with Job() as job:
        with job.init_group, Task():
            ops.Const(1.0, blob_out="w")
        with Task():
            ops.Add(["w", "missing"], ["z"])
    with pytest.raises(AssertionError, match="Blob undefined: missing"):
        net_printer.analyze(job)


def test_analyze_accepts_blobs_from_init_and_distributed_ctx_names():
    with Job() as job:
        with job.init_group, Task(workspace_type=WorkspaceType.GLOBAL):
            ops.Const(1.0, blob_out="w")
        with Task():
            ops.Add(["w", "distributed_ctx_init_x"], ["z"])
    net_printer.analyze(job)


def test_analyze_finds_a_blob_defined_by_two_concurrent_global_tasks():
    with Job() as job:
        with Task(workspace_type=WorkspaceType.GLOBAL):
            ops.Const(1.0, blob_out="same")
        with Task(workspace_type=WorkspaceType.GLOBAL):
            ops.Const(2.0, blob_out="same")
    with pytest.raises(AssertionError, match="multiple parallel steps: same"):
        net_printer.analyze(job)


def test_private_tasks_may_reuse_names_and_do_not_leak_them():
    with Job() as job:
        with Task():
            ops.Const(1.0, blob_out="tmp")
        with Task():
            ops.Const(2.0, blob_out="tmp")
        with Task():
            ops.Copy(["tmp"], ["copy"])  # the private tasks' blob is gone here
    with pytest.raises(AssertionError, match="Blob undefined: tmp"):
        net_printer.analyze(job)


def test_log_info_prints_text_and_blobs(capfd):
    net = core.Net("logging")
    x = net.Const(np.array([7], np.int64), "x")
    net.LogInfo("hello there", x)
    assert [op.type for op in net.Proto().op] == ["GivenTensorInt64Fill", "GivenTensorStringFill", "Print", "Print"]
    workspace.RunNetOnce(net)
    printed = capfd.readouterr()
    assert "hello there" in printed.out + printed.err
    assert "7" in printed.out + printed.err


def test_debug_net_logs_each_op_before_it():
    net = core.Net("to_debug")
    net.ConstantFill([], ["a"], shape=[1], value=1.0)
    net.Add(["a", "a"], ["b"])
    debug = net_printer.debug_net(net)
    types = [op.type for op in debug.Proto().op]
    assert types == ["GivenTensorStringFill", "Print", "ConstantFill", "GivenTensorStringFill", "Print", "Add"]
    texts = [op.arg[-1].strings[0].decode() for op in debug.Proto().op if op.type == "GivenTensorStringFill"]
    assert texts[1] == "b = Add(a, a)"
    workspace.RunNetOnce(debug)
    np.testing.assert_array_equal(workspace.FetchBlob("b"), [2.0])
    with pytest.raises(TypeError):
        net_printer.debug_net(net.Proto())
