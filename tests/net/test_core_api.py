"""The Caffe2-style Python API: core (BlobReference, Net, scopes) and workspace net functions."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from framework import core
from framework.errors import NetError, UnknownOperatorError
from framework.memory.workspace import Workspace
from framework.proto.framework_pb2 import NetDef


def test_blob_reference_is_string_like():
    b = core.BlobReference("enc/x")
    assert b == "enc/x" and hash(b) == hash("enc/x") and {b: 1}["enc/x"] == 1
    assert isinstance(b + "_grad", core.BlobReference) and b + "_grad" == "enc/x_grad"
    assert "pre_" + b == "pre_enc/x"
    assert b.GetNameScope() == "enc/" and b.GetUnscopedName() == "x"
    assert repr(b) == "BlobReference('enc/x')"


def test_net_builder_outputs_and_sugar():
    net = core.Net("api")
    x = net.AddExternalInput("x")
    y = net.Relu([x], "y")
    assert isinstance(y, core.BlobReference) and y.Net() is net
    z = y.Relu([], "z")  # BlobReference sugar
    auto = net.Relu(z)  # outputs=None: a fresh unique name
    assert auto == f"{net.Name()}/Relu"
    a, b = net.add_op("_TestRecord", [z], 2)
    assert (a, b) == (f"{net.Name()}/_TestRecord:0", f"{net.Name()}/_TestRecord:1")
    again = net.Relu(z)
    assert again == f"{net.Name()}/Relu_2"
    assert net.listing().splitlines()[0] == "y = Relu(x)"
    assert str(net) == net.Name() == "api"  # Caffe2's str(net): the name (workspace.RunNet(str(net)))
    assert net.BlobIsDefined("y") and not net.BlobIsDefined("q") and net.UsesBlob("x")
    net.Relu("w_undeclared", "w_out")
    assert list(net.Proto().external_input) == ["x", "w_undeclared"]
    net.AddExternalOutput(y)
    with pytest.raises(NetError, match="not produced"):
        net.AddExternalOutput("nowhere")
    with pytest.raises(NetError, match="already has an external input"):
        net.AddExternalInput("x")


def test_unknown_op_did_you_mean():
    net = core.Net("unk")
    with pytest.raises(UnknownOperatorError, match="Did you mean: Relu"):
        net.Rleu(["x"], "y")
    assert not hasattr(net, "Rleu")
    assert not hasattr(core.BlobReference("b", net), "Rleu")


def test_unique_names():
    n1, n2 = core.Net("dup_name"), core.Net("dup_name")
    assert n1.Name() == "dup_name" and n2.Name() == "dup_name_1"
    net = core.Net("names")
    assert net.NextName() == "names_blob_0" and net.NextName() == "names_blob_1"
    net.Relu(["x"], "h")
    assert net.NextBlob("h") == "h_auto_0" and net.NextBlob("fresh") == "fresh"


def test_creation_site_recorded():
    net = core.Net("site")
    net.Relu(["x"], "y")
    info = net.Proto().op[0].debug_info
    assert "test_core_api.py" in info and "test_creation_site_recorded" in info


def test_name_and_device_scopes_are_thread_local():
    net = core.Net("scoped")
    seen = {}
    with core.NameScope("enc"), core.DeviceScope(core.DeviceOption(1, 0), node_name="n0"):
        y = net.Relu(["x"], "y")
        with core.NameScope("inner"):
            assert core.ScopedName("w") == "enc/inner/w"
        op = core.CreateOperator("Relu", "a", "b")

        def other():
            seen["scope"] = core.CurrentNameScope()
            seen["dev"] = core.CurrentDeviceScope()

        t = threading.Thread(target=other)
        t.start()
        t.join()
    assert y == "enc/y" and list(net.Proto().op[0].input) == ["enc/x"]
    assert net.Proto().op[0].device_option.device_type == 1
    assert net.Proto().op[0].device_option.node_name == "n0"
    assert list(op.input) == ["enc/a"]
    assert seen == {"scope": "", "dev": None}
    assert core.CurrentNameScope() == "" and core.CurrentDeviceScope() is None
    with core.NameScope("a"), core.NameScope("b", reset=True):
        assert core.ScopedName("x") == "b/x"


def test_create_operator_kwargs_to_arguments():
    op = core.CreateOperator("Scale", ["X"], ["Y"], scale=2.5, random_seed=3, engine="CUDNN")
    assert op.arg[0].name == "scale" and op.arg[0].f == 2.5
    assert op.device_option.random_seed == 3 and op.engine == "CUDNN"


def test_clone_clone_partial_append():
    net = core.Net("orig")
    x = net.AddExternalInput("x")
    h = net.Relu(x, "h")
    y = net.Scale(h, "y", scale=2.0)
    net.AddExternalOutput(y)
    c = net.Clone("copy", blob_remap={"h": "hh"})
    assert c.Name() == "copy" and list(c.Proto().op[0].output) == ["hh"] and list(c.Proto().op[1].input) == ["hh"]
    m = net.Clone("masked", op_id_mask=[1], update_external_list=True)
    assert [o.type for o in m.Proto().op] == ["Scale"] and list(m.Proto().external_input) == ["h"]
    p, (py,) = net.ClonePartial("part", ["h"], ["y"])
    assert [o.type for o in p.Proto().op] == ["Scale"] and list(p.Proto().external_input) == ["h"]
    assert str(py) == "part/y" and list(p.Proto().op[0].output) == ["part/y"]
    other = core.Net("other")
    other.Relu(["y"], "z")
    net.AppendNet(other)
    assert [o.type for o in net.Proto().op] == ["Relu", "Scale", "Relu"]
    net.set_rand_seed(10)
    assert [o.device_option.random_seed for o in net.Proto().op] == [10, 11, 12]
    wrapped = core.Net(net.Proto())
    # as Caffe2, the copy's name is made unique (orig -> orig_<k>)
    assert wrapped.Name().startswith("orig_") and wrapped.BlobIsDefined("z")


def test_add_gradient_operators_wraps_references():
    net = core.Net("grad")
    x = net.AddExternalInput("x")
    y = net.Relu(x, "y")
    grads = net.AddGradientOperators([y])
    assert grads["x"] == "x_grad" and isinstance(grads["x"], core.BlobReference)
    assert "ReluGradient" in [o.type for o in net.Proto().op]


def test_workspace_functions(fresh_ws):
    ws = fresh_ws
    ws.FeedBlob("x", np.array([-1.0, 2.0], np.float32))
    net = core.Net("wsnet")
    x = net.AddExternalInput("x")
    net.Relu(x, "y")
    acc = core.Net("counter")
    acc.add_op("_TestRecord", ["c"], ["c"], name="inc")
    ws.FeedBlob("c", np.zeros(1))
    assert ws.CreateNet(net) and ws.CreateNet(acc)
    with pytest.raises(NetError):
        ws.CreateNet(net)
    assert ws.CreateNet(net, overwrite=True)
    ws.RunNet(acc, num_iter=3)
    assert ws.FetchBlob("c")[0] == 3.0
    ws.RunNet("wsnet")
    np.testing.assert_array_equal(ws.FetchBlob("y"), [0.0, 2.0])
    ws.RunNetOnce(net.Proto())
    ws.RunOperatorOnce(core.CreateOperator("Scale", "y", "z", scale=3.0))
    ws.RunOperatorsOnce([core.CreateOperator("Relu", "z", "z2"), core.CreateOperator("Scale", "z2", "z3")])
    np.testing.assert_array_equal(ws.FetchBlob("z3"), [0.0, 6.0])
    shapes, types = ws.InferShapesAndTypes([net])
    assert shapes["y"] == [2] and types["y"] == 1
    shapes, types = ws.InferShapesAndTypes([net], {"x": [3, 4]})
    assert shapes["y"] == [3, 4]
    res = ws.BenchmarkNet("wsnet", 1, 2, True)
    assert len(res) == 2
    ws.RunPlan(core.Plan(core.execution_step("s", [acc], num_iter=2)))
    assert ws.FetchBlob("c")[0] == 5.0
    with pytest.raises(Exception, match="boom"):
        bad = core.Net("bad")
        bad.add_op("_TestFail", [], [], name="boom_op")
        ws.RunNetOnce(bad)
    assert ws.RunNet("missing_net", allow_fail=True) is False


def test_workspace_object_snake_case():
    ws = Workspace()
    ws.feed_blob("x", np.ones(2, np.float32))
    nd = NetDef(name="o")
    nd.op.append(core.CreateOperator("Relu", "x", "y"))
    ws.create_net(nd)
    ws.run_net("o", 2)
    ws.run_net_once(nd)
    ws.run_operator_once(core.CreateOperator("Relu", "y", "z"))
    assert ws.fetch_blob("z").tolist() == [1.0, 1.0]
    assert ws.nets() == ["o"]


def test_inference_tolerates_unknowns_and_grad_rule():
    from framework.net.inference import infer_net
    from framework.ops.schema import TensorSpec

    nd = NetDef(name="inf")
    nd.op.extend(
        [
            core.CreateOperator("Relu", "x", "y"),
            core.CreateOperator("_TestFail", ["y"], ["w_grad"]),
            core.CreateOperator("Relu", "unknown_in", "u"),
        ]
    )
    specs = infer_net(nd, {"x": TensorSpec((2, 3), np.dtype("float32")), "w": TensorSpec((5,), np.dtype("float64"))})
    assert specs["y"].shape == (2, 3) and specs["w_grad"].shape == (5,) and specs["u"].shape is None
