"""Small behaviours of Caffe2 2020's Python API: nested device scopes merge extra_info, TaskGroup keeps
remote nets, the shared iteration counter is pinned to the CPU with Caffe2's override tag."""

from framework import core
from framework.caffe2.python import scope, task, utils
from framework.proto import caffe2_pb2


def test_device_scopes_merge_and_sort_extra_info():
    assert scope.CurrentDeviceScope() is None
    with scope.DeviceScope(core.DeviceOption(0, extra_info=["b:2"])):
        with scope.DeviceScope(core.DeviceOption(0, extra_info=["a:1", "c:3"]), node_name="n1"):
            inner = scope.CurrentDeviceScope()
            assert list(inner.extra_info) == ["a:1", "b:2", "c:3"] and inner.node_name == "n1"
        assert list(scope.CurrentDeviceScope().extra_info) == ["b:2"]
    assert scope.CurrentDeviceScope() is None


def test_task_group_remote_nets():
    tg = task.TaskGroup()
    assert repr(tg) == "TaskGroup(tasks=[], workspace_type=None, remote_nets=[])"
    net = core.Net("h36b_remote")
    tg.add_remote_net(net)
    assert tg.remote_nets() == [net]


def test_unique_mutex_iter_is_tagged_for_the_cpu():
    init_net, net = core.Net("h36b_iter_init"), core.Net("h36b_iter")
    with scope.DeviceScope(core.DeviceOption(caffe2_pb2.CUDA, 1)):
        it = utils.BuildUniqueMutexIter(init_net, net)
    assert utils.BuildUniqueMutexIter(init_net, net) == it  # once per init net
    ops = list(init_net.Proto().op) + list(net.Proto().op)
    assert [op.type for op in ops] == ["ConstantFill", "CreateMutex", "AtomicIter"]
    for op in ops:
        assert op.device_option.device_type == caffe2_pb2.CPU
        assert list(op.device_option.extra_info) == ["device_type_override:cpu"]


def test_task_names_and_reprs():
    assert repr(task.Task()) == "Task(name=local/task, node=local, outputs=[])"
    assert repr(task.TaskOutput([])) == "TaskOutput(names=[], values=None)"
    with task.TaskGroup() as tg:
        first, second = task.Task(), task.Task()
        named = task.Task(step=core.execution_step("stepname", []))
    assert [first.name, second.name, named.name] == ["local/task", "local/task:1", "local/stepname"]
    assert tg.tasks() == [first, second, named]


def test_get_blob_ref():
    net = core.Net("h36b_ref")
    net.ConstantFill([], "made", shape=[1], value=0.0)
    ref = net.GetBlobRef("made")
    assert str(ref) == "made" and isinstance(ref, core.BlobReference)
    try:
        net.GetBlobRef("never")
    except KeyError as e:
        assert "never" in str(e)
    else:
        raise AssertionError("GetBlobRef of an undefined blob must raise KeyError")
