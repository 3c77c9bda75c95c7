"""Caffe2's ``core`` internals: ``IR``, ``_REGISTERED_OPERATORS``, engines, and the ``Net`` methods beyond
building ops (observers, external views, op names from creation sites, reroute_tensor, partial clones)."""

import numpy as np
import pytest

from framework import core, workspace
from framework.core import CreateOperator, GradientRegistry
from framework.errors import FrameworkError, ModelError, NetError, OrphanStopGradientError


@pytest.fixture(autouse=True)
def _fresh():
    workspace.ResetWorkspace()
    yield
    workspace.ResetWorkspace()


@GradientRegistry.RegisterGradient("_IrTestDirect")
def _direct_grad(op, g_output):
    return CreateOperator("_IrTestDirectGradient", [g_output[0]], [op.input[0] + "_grad"]), [op.input[0] + "_grad"]


def test_ir_versions_and_backward_pass_with_autosplit_sum():
    ops = [
        CreateOperator("_IrTestDirect", "in", "in"),
        CreateOperator("_IrTestDirect", "in", "h1"),
        CreateOperator("_IrTestDirect", "in", "h2"),
        CreateOperator("Sum", ["h1", "h2"], "out"),
    ]
    ir = core.IR(ops)
    assert [(dict(i), dict(o)) for _, i, o in ir.ssa] == [
        ({"in": 0}, {"in": 1}),
        ({"in": 1}, {"h1": 0}),
        ({"in": 1}, {"h2": 0}),
        ({"h1": 0, "h2": 0}, {"out": 0}),
    ]
    assert ir.frontier == {"in": 1, "h1": 0, "h2": 0, "out": 0}
    assert sorted(ir.input_usages["in"][1]) == [1, 2]
    grad_ops, grads = ir.GetBackwardPass({"out": "out_grad"})
    sums = [op for op in grad_ops if op.type == "Sum"]
    assert len(sums) == 1 and list(sums[0].output) == ["in_grad"]
    assert list(sums[0].input) == ["in_grad", "_in_grad_autosplit_0"]
    assert grad_ops[-1].type == "_IrTestDirectGradient" and not grad_ops[-1].is_gradient_op
    assert grads[core.BlobReference("in")] == "in_grad"


def test_get_backward_pass_keeps_dead_gradient_ops_but_the_net_path_prunes_them():
    ops = [CreateOperator("_IrTestDirect", "x", "h"), CreateOperator("StopGradient", "h", "h"),
           CreateOperator("_IrTestDirect", "h", "out")]  # fmt: skip
    grad_ops, grads = GradientRegistry.GetBackwardPass(ops, {"out": "out_grad"})
    assert [(op.type, list(op.output)) for op in grad_ops] == [("_IrTestDirectGradient", ["h_grad"])]
    assert {str(k): str(v) for k, v in grads.items()} == {"out": "out_grad"}
    net = core.Net("prune")
    net.Proto().op.extend(ops)
    net.AddGradientOperators({"out": "out_grad"})
    assert len(net.Proto().op) == 3  # the dead gradient op is dropped when building a net
    with pytest.raises(OrphanStopGradientError) as e:
        GradientRegistry.GetBackwardPass(ops[:1] + [CreateOperator("StopGradient", "h", "orphan")] + ops[2:], ["out"])
    assert isinstance(e.value, ValueError) and "orphan" in str(e.value)


def test_gradient_of_an_op_with_the_wrong_arity_names_the_schema():
    net = core.Net("bad")
    net.Proto().op.extend([CreateOperator("Mul", ["a"], ["m"])])
    with pytest.raises(FrameworkError, match="schema"):
        net.AddGradientOperators(["m"])


def test_registered_operators_and_engines():
    assert "Relu" in core._REGISTERED_OPERATORS and "NoSuchOp" not in core._REGISTERED_OPERATORS
    assert len(core._REGISTERED_OPERATORS) == len(list(core._REGISTERED_OPERATORS)) > 500
    assert core.IsOperatorWithEngine("Relu", "CUDNN") and core.IsOperatorWithEngine("Conv", "DEFAULT")
    assert not core.IsOperatorWithEngine("Relu", "NOEXIST") and not core.IsOperatorWithEngine("NoSuchOp", "DEFAULT")


def test_observers_watch_the_created_net():
    net = core.Net("obs")
    net.ConstantFill([], "x", shape=[3], value=1.0)
    net.Relu("x", "y")
    with pytest.raises(NetError, match="CreateNet"):
        net.AddObserver("TimeObserver")
    workspace.CreateNet(net)
    timer, counter = net.AddObserver("TimeObserver"), net.AddObserver("RunCountObserver")
    workspace.RunNet(net, 3)
    assert net.NumObservers() == 2 and timer.average_time() > 0.0
    assert counter.debug_info() == "This operator runs 6 times."
    net.RemoveObserver(timer)
    assert net.NumObservers() == 1
    with pytest.raises(FrameworkError, match="unknown observer"):
        net.AddObserver("MagicObserver")


def test_external_views_next_blob_and_file_names():
    net = core.Net("views")
    net.Sum(["a", "b"], ["s"])
    assert [str(b) for b in net.external_inputs] == ["a", "b"] and net.external_outputs == []
    with core.NameScope("ns"):
        assert str(net.NextScopedBlob("t")) == "ns/t" and str(net.NextBlob("t")) == "t"
    assert str(net.NextBlob("t")) == "t_auto_0"  # names already handed out are not handed out again
    assert str(net.NextBlob("s")) == "s_auto_0"
    net.PopulateProtoWithFileName()
    file, line, func = net.Proto().op[0].name.rsplit(":", 2)
    assert file.endswith("test_core_internals_api.py") and int(line) > 0
    assert func == "test_external_views_next_blob_and_file_names"
    net._CheckLookupTables()


def test_reroute_tensor_inserts_the_producer_and_renames_consumers():
    net = core.Net("reroute")
    net.Relu("x", "y")
    consumer = net.Proto().op.add()
    consumer.CopyFrom(CreateOperator("Sigmoid", ["y"], ["z"]))
    net.AddExternalOutput(core.BlobReference("y"))
    producer = CreateOperator("Scale", ["y"], ["y_scaled"], scale=2.0)
    changed = net.reroute_tensor("y", producer, can_modify=[net.Proto().op[1]])
    assert changed == 1
    assert [op.type for op in net.Proto().op] == ["Relu", "Scale", "Sigmoid"]
    assert list(net.Proto().op[2].input) == ["y_scaled"] and "y_scaled" in net.Proto().external_output
    workspace.FeedBlob("x", np.array([-1.0, 2.0], np.float32))
    workspace.RunNetOnce(net)
    np.testing.assert_allclose(workspace.FetchBlob("z"), 1 / (1 + np.exp(-np.array([0.0, 4.0]))), rtol=1e-6)
    with pytest.raises(NetError, match="does not read"):
        net.reroute_tensor("x", CreateOperator("Relu", ["q"], ["r"]))


def test_clone_partial_prefixes_and_rejects_dependent_inputs():
    net = core.Net("orig")
    a1, a2 = net.AddExternalInput("a1", "a2")
    b1, b2 = net.Concat([a1, a2], ["b1", "b2"], axis=0)
    c1 = net.Sum([b1, "p"], ["c1"])
    c2 = net.Sum([b2], ["c2"])
    d = net.Sum([c1, c2], ["d"])
    clone, (out,) = net.ClonePartial("f", {a1: "x1", a2: "x2"}, [d])
    assert str(out) == "f/d" and set(clone.Proto().external_input) == {"x1", "x2", "p"}
    assert {o for op in clone.Proto().op for o in op.output} == {"f/b1", "f/b2", "f/c1", "f/c2", "f/d"}
    with pytest.raises(ModelError):
        net.ClonePartial("g", [a1, a2, c2], [d])


def test_device_option_equal():
    cpu_a, cpu_b = core.DeviceOption(0), core.DeviceOption(0, 5)
    assert core.device_option_equal(cpu_a, cpu_b)  # two CPU options, whatever the id
    cpu_b.node_name = "n"
    assert core.device_option_equal(cpu_a, cpu_b) and not core.device_option_equal(cpu_a, cpu_b, ignore_node_name=False)
    assert not core.device_option_equal(cpu_a, core.DeviceOption(1, 0))
    assert core.device_option_equal(core.DeviceOption(1, 2), core.DeviceOption(1, 2))
    assert not core.device_option_equal(core.DeviceOption(1, 2), core.DeviceOption(1, 3))
    assert not core.device_option_equal(cpu_a, None) and core.device_option_equal(None, None)


def test_plan_create_from_proto_rebuilds_steps_and_nets():
    init, train = core.Net("pinit"), core.Net("ptrain")
    init.ConstantFill([], "c", shape=[1], value=0.0)
    train.Add(["c", "c"], "c")
    inner = core.execution_step("inner", train, num_iter=3)
    plan = core.Plan("p")
    plan.AddStep(core.execution_step("outer", [core.execution_step("i", init), inner]))
    copy = core.Plan.create_from_proto(plan.Proto())
    got, want = copy.Proto(), plan.Proto()
    # as in Caffe2, a Net made from a NetDef takes a name not used yet in this process ("pinit" -> "pinit_1"),
    # and the copy's steps name the copy's nets
    assert [list(n.op) for n in got.network] == [list(n.op) for n in want.network]

    def step_nets(step):
        yield from step.network
        for sub in step.substep:
            yield from step_nets(sub)

    assert set(step_nets(got.execution_step[0])) == {n.name for n in got.network}
    assert [n.Name() for n in copy.Nets()] == [n.name for n in got.network]
    outer = copy.Steps()[0]
    assert [s.Name() for s in outer.Substeps()] == ["i", "inner"] and outer.Substeps()[1].Proto().num_iter == 3
    bad = plan.Proto()
    bad.execution_step[0].substep[0].network[0] = "missing"
    with pytest.raises(NetError, match="unknown net 'missing'"):
        core.Plan.create_from_proto(bad)
