"""caffe2.python.nomnigraph: NetDef <-> NNModule (exact round trip), tensor versions, edge order under edits,
execution order, subgraph matching and replacement, annotations."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework import core, workspace
from framework.caffe2.python import nomnigraph as ng
from framework.errors import NetError
from framework.proto import caffe2_pb2


def _net_def():
    net = core.Net("h36b_rt")
    net.Proto().type = "dag"
    net.Proto().num_workers = 3
    net.Proto().external_input.extend(["X", "W", "b", "unused_in"])
    net.FC(["X", "W", "b"], ["Y"], axis=1)
    net.Relu(["Y"], ["Y"])  # in place: reads one version of Y, writes another
    op = net.Add(["Y", "Y"], ["Z"])  # the same tensor twice
    op_def = net.Proto().op[-1]
    op_def.engine = "SENTINEL"
    op_def.device_option.device_type = 1
    op_def.device_option.node_name = "n1"
    del op
    net.Sum(["Z", "X"], ["S"], name="named_sum")
    net.Proto().external_output.extend(["S", "never_written"])
    return net.Proto()


def test_round_trip_is_exact():
    net_def = _net_def()
    nn = ng.NNModule(net_def)
    assert nn.convertToCaffe2Proto(net_def) == net_def
    # without the old proto: ops and external lists still come back, the net's own fields do not
    bare = nn.convertToCaffe2Proto()
    assert list(bare.op) == list(net_def.op)
    assert list(bare.external_input) == list(net_def.external_input) and bare.name == ""


def test_tensor_versions_producers_and_consumers():
    nn = ng.NNModule(_net_def())
    fc, relu, add, total = nn.controlFlow
    assert [t.name for t in nn.tensors].count("Y") == 2  # before and after the in-place Relu
    y_fc, y_relu = fc.outputs[0], relu.outputs[0]
    assert y_fc is not y_relu and relu.inputs == [y_fc]
    assert add.inputs == [y_relu, y_relu] and y_relu.consumers == [add, add]
    assert y_relu.producer is relu and not fc.inputs[0].hasProducer()
    assert total.getOperatorPredecessors() == [add] and fc.getOperatorSuccessors() == [relu]
    x = fc.inputs[0]
    assert x.consumers == [fc, total]
    with pytest.raises(NetError, match="not a tensor"):
        fc.consumers
    with pytest.raises(NetError, match="not an operator"):
        x.inputs


def test_replace_all_uses_keeps_input_positions_and_runs():
    net = core.Net("h36b_sub")
    net.Sub(["A", "B"], ["C"])
    nn = ng.NNModule(net)
    sub = nn.controlFlow[0]
    t = nn.createNode(ng.NeuralNetData("T"))
    nn.replaceAllUsesWith(sub.inputs[0], t)  # T takes A's place as the first operand, not the last
    assert [i.name for i in sub.inputs] == ["T", "B"]
    workspace.ResetWorkspace()
    workspace.FeedBlob("T", np.array([10.0, 20.0], np.float32))
    workspace.FeedBlob("B", np.array([1.0, 2.0], np.float32))
    workspace.RunNetOnce(nn.convertToCaffe2Proto(net.Proto()))
    np.testing.assert_array_equal(workspace.FetchBlob("C"), [9.0, 18.0])


def test_execution_order_follows_data_not_creation():
    nn = ng.NNModule()
    late = nn.createNode(ng.Operator("Late"))
    early = nn.createNode(ng.Operator("Early"))
    mid = nn.createNode(ng.Data("mid"))
    nn.createEdge(early, mid)
    nn.createEdge(mid, late)
    assert [n.name for n in nn.controlFlow] == ["Early", "Late"]
    nn.createEdge(late, nn.createNode(ng.Data("back")))
    assert nn.dataFlow.getMutableNodes()[:3] == [late, early, mid]  # creation order


def test_edges_only_between_operators_and_tensors():
    nn = ng.NNModule()
    a, b = nn.createNode(ng.Data("a")), nn.createNode(ng.Data("b"))
    with pytest.raises(NetError, match="between NeuralNetOperator and NeuralNetData"):
        nn.createEdge(a, b)
    with pytest.raises(NetError, match="takes a NeuralNetOperator"):
        nn.createNode("Relu")
    op = nn.createNode(ng.Operator("Op"))
    nn.createEdge(a, op)
    nn.deleteEdge(b, op)  # no such edge: nothing happens, as Caffe2
    nn.deleteEdge(a, op)
    assert op.inputs == []


def _chain_module():
    nn = ng.NNModule()
    conv = nn.createNode(ng.Operator("Conv"))
    y = nn.createNode(ng.Data("y"))
    relu = nn.createNode(ng.Operator("Relu"))
    z = nn.createNode(ng.Data("z"))
    x = nn.createNode(ng.Data("x"))
    for a, b in [(x, conv), (conv, y), (y, relu), (relu, z)]:
        nn.createEdge(a, b)
    return nn, (x, conv, y, relu, z)


def test_match_strict_requires_every_out_edge():
    nn, (x, conv, y, relu, z) = _chain_module()
    mg = ng.NNMatchGraph()
    c = mg.createNode(ng.Operator("Conv"), strict=True)
    t = mg.createNode(ng.Data("any"), strict=True)
    r = mg.createNode(ng.Operator("Relu"))
    mg.createEdge(c, t)
    mg.createEdge(t, r)
    matches = list(nn.match(mg))
    assert len(matches) == 1 and set(matches[0].nodes) == {conv, y, relu}
    # a second reader of y is an out-edge the strict tensor node does not account for
    nn.createEdge(y, nn.createNode(ng.Operator("Other")))
    assert list(nn.match(mg)) == []
    # non-strict: the tensor's readers are not looked at
    mg2 = ng.NNMatchGraph()
    c2 = mg2.createNode(ng.Operator("Conv"), strict=True)
    mg2.createEdge(c2, mg2.createNode(ng.Data("any")))
    assert [len(m) for m in nn.match(mg2)] == [2]


def test_replace_subgraph_rewires_and_checks_boundary():
    nn, (x, conv, y, relu, z) = _chain_module()
    mg = ng.NNMatchGraph()
    c = mg.createNode(ng.Operator("Conv"), strict=True)
    t = mg.createNode(ng.Data("t"), strict=True)
    r = mg.createNode(ng.Operator("Relu"), strict=True)
    mg.createEdge(c, t)
    mg.createEdge(t, r)
    mg.createEdge(r, mg.createNode(ng.Data("out")))
    (match,) = nn.match(mg)
    sub = ng.NNSubgraph()
    for n in match.nodes:
        sub.addNode(n)
    sub.addNode(x)
    fused = nn.createNode(ng.Operator("ConvRelu"))
    with pytest.raises(NetError, match="not listed"):
        nn.replaceSubgraph(sub, fused, [], [z])
    nn.replaceSubgraph(sub, fused, [x], [z])
    assert [n.name for n in nn.controlFlow] == ["ConvRelu"]
    assert fused.inputs == [x] and fused.outputs == [z]
    assert not nn.dataFlow.hasNode(y)


def test_unique_data_node_names():
    nn = ng.NNModule(_net_def())
    names = {nn.createUniqueDataNode("Y").name for _ in range(3)}
    assert names == {"Y_0", "Y_1", "Y_2"}
    assert nn.createUniqueDataNode("fresh").name == "fresh"


def test_annotations_copy_semantics_and_conversion():
    nn = ng.NNModule()
    node = nn.createNode(core.CreateOperator("Conv", ["ignored"], ["dropped"], kernel=3, engine="E1"))
    assert node.inputs == [] and node.annotation.operator_def.engine == "E1"
    copy = node.annotation.operator_def
    copy.engine = "not stored"  # a copy, as the pybind property
    assert node.annotation.operator_def.engine == "E1"
    annot = ng.Annotation()
    annot.setDeviceType(caffe2_pb2.CUDA)
    annot.setComponentLevels(["", "a"])
    node.setAnnotation(annot)
    annot.setDeviceType(0)  # setAnnotation stored a copy
    assert node.getAnnotation().getDeviceType() == caffe2_pb2.CUDA
    assert node.annotation.getComponentLevels() == ["", "a"]
    with pytest.raises(NetError, match="DeviceOption was never set"):
        node.annotation.device_option
    d = caffe2_pb2.DeviceOption(node_name="host2")
    node.annotation.device_option = d
    (op,) = nn.convertToCaffe2Proto().op
    assert op.type == "Conv" and op.device_option.node_name == "host2" and not op.input


def test_dot_text_and_device_map():
    nn = ng.NNModule(_net_def())
    text = str(nn.dataFlow)
    assert text.startswith("digraph G") and 'label="FC",shape="box"' in text
    d = caffe2_pb2.DeviceOption(node_name="w_host")
    assert ng.NNModule(_net_def(), {"W": d}).blob_device_options["W"].node_name == "w_host"
    with pytest.raises(NetError, match="does not use"):
        ng.NNModule(_net_def(), {"Nope": d})


@settings(max_examples=10, deadline=None, derandomize=True)
@given(ops=st.lists(st.tuples(st.sampled_from("abcd"), st.sampled_from("abcd"), st.sampled_from("abcd")), max_size=8))
def test_round_trip_of_random_nets(ops):
    net = core.Net("h36b_rand")
    net.Proto().external_input.extend(["a", "b"])
    for i, (x, y, z) in enumerate(ops):
        net.Add([x, y], [z], name=f"op{i}")
    net.Proto().external_output.extend(sorted({z for _, _, z in ops}))
    assert ng.NNModule(net).convertToCaffe2Proto(net.Proto()) == net.Proto()
