"""The nets layer's contracts: creation errors of Python-built nets show where the op was
created, failed runs and failed creations leave the workspace as it was, the snake_case
Workspace methods, num_workers from a net argument, dag nets serialize concurrent runs."""

from __future__ import annotations

import numpy as np
import pytest

from framework import core
from framework.caffe2.python import brew
from framework.caffe2.python.model_helper import ModelHelper
from framework.core import CreateOperator
from framework.errors import ArgumentError, NetError, OperatorError, SchemaError, UnknownOperatorError
from framework.memory.workspace import Workspace
from framework.net.executors.dag import DAGNet
from framework.proto.args import make_argument
from framework.proto.framework_pb2 import NetDef


def _ws_with_x():
    ws = Workspace()
    ws.feed_blob("X", np.ones((2, 3), np.float32))
    return ws


# -- creation errors of nets built in Python name the net, the op and its creation site ------------
def test_schema_error_shows_creation_site():
    net = core.Net("site_schema")
    net.Relu(["X", "X"], "y")  # the line the error must point at
    with pytest.raises(SchemaError) as e:
        _ws_with_x().create_net(net)
    msg = str(e.value)
    assert f'net "{net.Name()}": op #0 Relu' in msg and "takes 1 inputs" in msg
    assert "the op was created at" in msg and 'net.Relu(["X", "X"], "y")' in msg


def test_bad_argument_error_names_net_op_and_site():
    net = core.Net("site_arg")
    net.Relu("X", "h")
    net.Scale("h", "y", scale="not a number")
    ws = _ws_with_x()
    before = ws.blobs()
    with pytest.raises(ArgumentError) as e:
        ws.create_net(net)
    msg = str(e.value)
    assert f'net "{net.Name()}": op #1 Scale' in msg and "'scale'" in msg
    assert "test_net_errors_api.py" in msg and 'scale="not a number"' in msg
    assert ws.blobs() == before and ws.nets() == []  # 'h' (made by op #0) was removed again


def test_undefined_blob_error_shows_creation_site():
    net = core.Net("site_undef")
    x = net.AddExternalInput("X")
    net.Relu(x, "hidden")
    net.Relu("hiden", "y")  # "hiden" is not external, so the builder adds it as an external input
    del net.Proto().external_input[1:]  # ... as a hand-edited NetDef would lack it
    with pytest.raises(NetError) as e:
        _ws_with_x().create_net(net)
    msg = str(e.value)
    assert "op #1 Relu reads 'hiden'" in msg and "Did you mean: hidden" in msg
    assert 'net.Relu("hiden", "y")' in msg


def test_unknown_op_in_python_built_net_shows_site():
    net = core.Net("site_unknown")
    net.Proto().op.add().CopyFrom(CreateOperator("Rleu", "X", "y", debug_info="  File 'model.py', line 7"))
    with pytest.raises(UnknownOperatorError) as e:
        _ws_with_x().create_net(net)
    assert "Did you mean: Relu" in str(e.value) and "model.py', line 7" in str(e.value)


def test_creation_site_skips_framework_frames():
    m = ModelHelper("site_brew")
    brew.fc(m, "data", "fc1", dim_in=3, dim_out=2)
    info = m.net.Proto().op[0].debug_info
    assert "test_net_errors_api.py" in info and 'brew.fc(m, "data", "fc1"' in info
    assert "brew.py" not in info and "builder.py" not in info


def test_run_error_of_brew_model_points_at_user_code():
    m = ModelHelper("site_run")
    brew.fc(m, "data", "fc1", dim_in=3, dim_out=2)
    ws = Workspace()
    ws.run_net_once(m.param_init_net)
    ws.feed_blob("data", np.ones((4, 5), np.float32))  # 5 features, the layer expects 3
    net = ws.create_net(m.net)
    with pytest.raises(OperatorError) as e:
        net.run()
    msg = str(e.value)
    assert msg.startswith("error running op #0 FC") and "input 0 'data': float [4, 5]" in msg
    assert 'brew.fc(m, "data", "fc1", dim_in=3, dim_out=2)' in msg


# -- failures leave the workspace usable / unchanged -------------------------------------------------
@pytest.mark.parametrize("net_type", ["simple", "dag"])
def test_failed_run_leaves_workspace_and_net_usable(net_type):
    ws = _ws_with_x()
    ws.feed_blob("W", np.ones((4, 5), np.float32))  # wrong: K = 3
    ws.feed_blob("b", np.ones(4, np.float32))
    nd = NetDef(name="mlp", type=net_type, external_input=["X", "W", "b"])
    nd.op.extend(
        [
            CreateOperator("Relu", "X", "H"),
            CreateOperator("FC", ["H", "W", "b"], "Y"),
            CreateOperator("Relu", "Y", "Z"),
        ]
    )
    net = ws.create_net(nd)
    with pytest.raises(OperatorError, match="op #1 FC"):
        net.run()
    assert ws.last_failed_op_net_position == 1
    ws.feed_blob("W", np.ones((4, 3), np.float32))
    for _ in range(3):  # the compiled fast path is built and used after the failure
        net.run()
    np.testing.assert_array_equal(ws.fetch_blob("Z"), np.full((2, 4), 4.0, np.float32))
    ws.feed_blob("W", np.ones((4, 5), np.float32))  # fail again, on the fast path this time
    with pytest.raises(OperatorError, match="op #1 FC"):
        net.run()
    ws.feed_blob("W", np.full((4, 3), 2.0, np.float32))
    net.run()
    np.testing.assert_array_equal(ws.fetch_blob("Z"), np.full((2, 4), 7.0, np.float32))
    ws.run_operator_once(CreateOperator("Relu", "Z", "Z2"))  # other work is unaffected
    assert ws.fetch_blob("Z2")[0, 0] == 7.0


def test_failed_create_net_with_input_blobs_is_undone(fresh_ws):
    ws = fresh_ws
    ws.FeedBlob("kept", np.ones(1, np.float32))
    bad = core.Net("bad_inputs")
    bad.Relu(["in1", "in2"], "out")
    with pytest.raises(SchemaError):
        ws.CreateNet(bad, input_blobs=["kept", "in1", "in2"])
    assert ws.Blobs() == ["kept"] and ws.Nets() == []
    good = core.Net("good_inputs")
    good.Relu("in1", "out")
    assert ws.CreateNet(good, input_blobs=["in1"]) and ws.HasBlob("in1")


def test_failed_overwrite_keeps_the_old_net():
    ws = _ws_with_x()
    nd = NetDef(name="keep", op=[CreateOperator("Relu", "X", "Y")])
    old = ws.create_net(nd)
    broken = NetDef(name="keep", op=[CreateOperator("Relu", "missing", "Y")])
    with pytest.raises(NetError, match="missing"):
        ws.create_net(broken, overwrite=True)
    assert ws.get_net("keep") is old
    ws.run_net("keep")


# -- Workspace object: the module functions in snake_case ---------------------------------------------
def test_workspace_snake_case_methods():
    ws = _ws_with_x()
    ws.run_operators_once([CreateOperator("Relu", "X", "A"), CreateOperator("Scale", "A", "B", scale=2.0)])
    np.testing.assert_array_equal(ws.fetch_blob("B"), np.full((2, 3), 2.0, np.float32))
    net = core.Net("snake")
    net.Relu("B", "C")
    shapes, types = ws.infer_shapes_and_types([net])
    assert shapes["C"] == [2, 3] and types["C"] == core.DataType.FLOAT
    shapes, _ = ws.infer_shapes_and_types([net], {"B": [5, 1]})
    assert shapes["C"] == [5, 1]
    ws.create_net(net)
    res = ws.benchmark_net(net, 1, 2, True)  # a core.Net or its name
    assert len(res) == 2 and all(r >= 0 for r in res)
    assert len(ws.benchmark_net(net.Name(), 0, 1, False)) == 1


# -- executors ----------------------------------------------------------------------------------------
def test_num_workers_from_a_net_argument():
    ws = Workspace()
    ws.feed_blob("X", np.ones(1))
    nd = NetDef(name="w", type="dag", external_input=["X"])
    nd.op.extend([CreateOperator("_TestRecord", ["X"], [f"y{i}"], name=f"b{i}") for i in range(4)])
    nd.arg.append(make_argument("num_workers", 3))
    net = ws.create_net(nd)
    assert isinstance(net, DAGNet) and net.num_workers == 3
    nd.num_workers = 2  # the NetDef field wins over the argument
    assert ws.create_net(nd, overwrite=True).num_workers == 2


def test_same_dag_net_from_two_threads_is_serialized(run_in_two_threads):
    ws = Workspace()
    ws.feed_blob("X", np.ones(1))
    nd = NetDef(name="ser", type="dag", external_input=["X"], num_workers=2)
    nd.op.extend(
        [
            CreateOperator("_TestRecord", ["X"], ["a"], name="first", sleep_ms=20),
            CreateOperator("_TestRecord", ["a"], ["b"], name="second", sleep_ms=20),
        ]
    )
    net = ws.create_net(nd)
    assert run_in_two_threads(net) == ["first", "second", "first", "second"]


def test_core_data_type_is_caffe2s():
    assert core.DataType.FLOAT == 1 and core.DataType.INT32 == 2 and core.DataType.INT64 == 10
    op = core.CreateOperator("Cast", "x", "y", to=core.DataType.INT32)
    ws = Workspace()
    ws.feed_blob("x", np.array([1.7, -2.2], np.float32))
    ws.run_operator_once(op)
    assert ws.fetch_blob("y").dtype == np.int32


@pytest.mark.parametrize(
    ("op", "message"),
    [
        (CreateOperator("FC", ["X", "W", "b"], ["X"]), "input 0 and output 0 are both 'X', but FC does not allow"),
        (CreateOperator("Iter", ["it"], ["it2"]), r"output 0 \('it2'\) must be the same blob as input 0 \('it'\)"),
        (CreateOperator("Relu", ["X"], ["Y", "Z"]), r"produces 1 outputs, got 2 \(\['Y', 'Z'\]\)"),
    ],
)
def test_schema_violations_of_in_place_rules_and_outputs(op, message):
    nd = NetDef(name="v", external_input=["X", "W", "b", "it"], op=[op])
    with pytest.raises(SchemaError, match=rf'net "v": op #0 {op.type}: {message}'):
        Workspace().create_net(nd)
