"""The device option of the Sum that core.IR adds for a multi-use blob (Caffe2 2020), and
DeviceScope with a falsy scope and a node name."""

import pytest

from framework import core
from framework.caffe2.python import scope
from framework.caffe2.python.core import IR, CreateOperator, GradientRegistry
from framework.proto import caffe2_pb2


def _two_readers(extra_info):
    dev = core.DeviceOption(caffe2_pb2.CPU, 0, extra_info=extra_info)
    return [
        CreateOperator("Relu", "in", "h1", device_option=dev),
        CreateOperator("Relu", "in", "h2", device_option=dev),
        CreateOperator("Add", ["h1", "h2"], "out"),
    ]


def test_sum_copies_the_producers_device_option_and_adds_the_tag():
    grads, _ = GradientRegistry.GetBackwardPass(_two_readers(["shard:1"]), {"out": "out_grad"})
    summed = grads[-1]
    assert summed.type == "Sum" and list(summed.output) == ["in_grad"]
    assert list(summed.device_option.extra_info) == ["shard:1", f"{IR.IS_AUTO_GEN_SUM_OPS_TAG}:1"]


def test_only_keep_tag_leaves_the_sum_with_the_auto_gen_tag_alone():
    assert IR.ONLY_KEEP_IS_AUTO_GEN_SUM_OPS_TAG == "only_keep_is_auto_gen_sum_ops_tag"
    tags = ["shard:1", f"{IR.ONLY_KEEP_IS_AUTO_GEN_SUM_OPS_TAG}:1"]
    grads, _ = GradientRegistry.GetBackwardPass(_two_readers(tags), {"out": "out_grad"})
    summed = grads[-1]
    assert summed.type == "Sum"
    assert list(summed.device_option.extra_info) == [f"{IR.IS_AUTO_GEN_SUM_OPS_TAG}:1"]


def test_device_scope_with_zero_and_a_node_name_sets_only_the_node():
    with core.DeviceScope(0, node_name="node:0"):
        current = scope.CurrentDeviceScope()
        assert current.node_name == "node:0" and current.device_type == caffe2_pb2.CPU
        net = core.Net("scoped")
        net.Relu(["x"], ["y"])
    assert net.Proto().op[0].device_option.node_name == "node:0"
    assert scope.CurrentDeviceScope() is None
    with core.DeviceScope(None):
        assert scope.CurrentDeviceScope() is None
    with pytest.raises(TypeError, match="must be a DeviceOption"):
        with core.DeviceScope(1):
            pass
