"""NetDef compilation: hazard ordering, validation errors, str(net), Caffe2 text nets."""

from __future__ import annotations

import numpy as np
import pytest

from framework.core import CreateOperator, DeviceOption
from framework.errors import NetError, SchemaError, UnknownOperatorError
from framework.memory.workspace import Workspace
from framework.net.graph import compile_graph, compute_chains
from framework.proto.args import make_argument
from framework.proto.framework_pb2 import NetDef


def net_of(*ops, name="n", external_input=(), external_output=(), type=""):
    net = NetDef(name=name, type=type)
    net.external_input.extend(external_input)
    net.external_output.extend(external_output)
    net.op.extend(ops)
    return net


def rec(ins, outs, name, **kw):
    return CreateOperator("_TestRecord", ins, outs, name=name, **kw)


# -- ordering -------------------------------------------------------------------
def test_consumer_declared_before_single_producer_runs_after_it():
    net = net_of(
        CreateOperator("Relu", "H", "Y", name="late"),
        CreateOperator("Relu", "X", "H", name="early"),
        external_input=["X"],
    )
    g = compile_graph(net)
    assert g.order == [1, 0]
    ws = Workspace()
    ws.feed_blob("X", np.array([-1.0, 2.0], np.float32))
    ws.run_net_once(net)
    np.testing.assert_array_equal(ws.fetch_blob("Y"), [0.0, 2.0])


def test_stable_order_keeps_declared_order_where_free():
    ops = [rec([], [f"b{i}"], f"op{i}") for i in range(6)]
    assert compile_graph(net_of(*ops)).order == list(range(6))


@pytest.mark.parametrize("net_type", ["simple", "dag"])
def test_in_place_chain_and_write_after_read(net_type):
    # op0 reads X before the in-place op1 changes it; op2 reads the new X.
    net = net_of(
        rec(["X"], ["A"], "read_old", add=0.0),
        rec(["X"], ["X"], "inplace1", add=10.0),
        rec(["X"], ["X"], "inplace2", add=100.0),
        rec(["X"], ["B"], "read_new", add=0.0),
        external_input=["X"],
        type=net_type,
    )
    g = compile_graph(net)
    assert g.order == [0, 1, 2, 3]
    kinds = {(a, b): {k for k, _ in d["kinds"]} for a, b, d in g.graph.edges(data=True)}
    assert "WaR" in kinds[(0, 1)] and "RaW" in kinds[(1, 2)] and "WaW" in kinds[(1, 2)]
    ws = Workspace()
    ws.feed_blob("X", np.array([1.0]))
    ws.create_net(net).run()
    assert ws.fetch_blob("A")[0] == 1.0
    assert ws.fetch_blob("B")[0] == 111.0


def test_counter_iter_declared_order():
    ws = Workspace()
    ws.feed_blob("iter", np.array([5], np.int64))
    net = net_of(
        rec(["iter"], ["before"], "before", add=0.0),
        CreateOperator("Iter", ["iter"], ["iter"]),
        rec(["iter"], ["after"], "after", add=0.0),
        type="dag",
    )
    n = ws.create_net(net)
    for _ in range(3):
        n.run()
    assert ws.fetch_blob("iter").reshape(-1)[0] == 8
    assert ws.fetch_blob("before")[0] == 7 and ws.fetch_blob("after")[0] == 8


def test_external_input_overwritten_keeps_declared_order():
    # X is external and written once later: earlier readers read the old value.
    net = net_of(rec(["X"], ["A"], "a", add=0.0), rec([], ["X"], "w", add=41.0), external_input=["X"])
    assert compile_graph(net).order == [0, 1]


def test_several_writers_declared_order_decides():
    net = net_of(rec([], ["B"], "w1"), rec(["B"], ["C"], "r1"), rec([], ["B"], "w2"), rec(["B"], ["D"], "r2"))
    g = compile_graph(net)
    assert g.graph.has_edge(0, 1) and g.graph.has_edge(1, 2) and g.graph.has_edge(2, 3)
    assert g.order == [0, 1, 2, 3]


def test_control_input_orders_after_producer():
    net = net_of(
        CreateOperator("_TestRecord", [], ["A"], name="waits", control_input=["flag"]),
        rec([], ["flag"], "makes_flag"),
    )
    g = compile_graph(net)
    assert g.order == [1, 0]
    kinds = g.graph.edges[1, 0]["kinds"]
    assert ("control", "flag") in kinds


def test_chains_group_linear_runs():
    net = net_of(
        rec(["X"], ["a1"], "a1"),
        rec(["a1"], ["a2"], "a2"),
        rec(["X"], ["b1"], "b1"),
        rec(["b1"], ["b2"], "b2"),
        rec(["a2", "b2"], ["Y"], "join"),
        external_input=["X"],
    )
    g = compile_graph(net)
    chains = compute_chains(g.graph, g.order)
    assert sorted(map(tuple, chains)) == [(0, 1), (2, 3), (4,)]


# -- validation -----------------------------------------------------------------
def test_undefined_blob_error_names_op_and_blob_with_suggestion():
    net = net_of(rec(["data"], ["y"], "fc1"), rec(["dta_"], ["z"], "fc2"), external_input=["data"])
    with pytest.raises(NetError) as e:
        compile_graph(net)
    msg = str(e.value)
    assert 'op #1 _TestRecord "fc2"' in msg and "'dta_'" in msg and "Did you mean: data" in msg
    assert 'net "n"' in msg


def test_blob_in_workspace_is_accepted():
    net = net_of(rec(["W"], ["y"], "a"))
    ws = Workspace()
    with pytest.raises(NetError):
        compile_graph(net, ws.has_blob)
    ws.feed_blob("W", np.ones(2))
    compile_graph(net, ws.has_blob)


def test_read_before_first_of_several_writers():
    net = net_of(rec(["B"], ["C"], "early"), rec([], ["B"], "w1"), rec(["B"], ["B"], "w2"))
    with pytest.raises(NetError, match=r"reads 'B' before its first writer \(op #1 _TestRecord \"w1\"\)"):
        compile_graph(net)


def test_external_output_never_produced():
    net = net_of(rec(["X"], ["Y"], "a"), external_input=["X"], external_output=["Y", "Yy"])
    with pytest.raises(NetError, match=r"external output 'Yy' is never produced.*Did you mean: Y"):
        compile_graph(net)


def test_cycle_lists_ops():
    net = net_of(CreateOperator("Relu", "A", "B", name="r1"), CreateOperator("Relu", "B", "A", name="r2"))
    with pytest.raises(NetError) as e:
        compile_graph(net)
    msg = str(e.value)
    assert "cycle" in msg and 'Relu "r1"' in msg and 'Relu "r2"' in msg


def test_schema_violation_named():
    net = net_of(CreateOperator("Relu", ["X", "Z"], ["Y"], name="bad"), external_input=["X", "Z"])
    with pytest.raises(SchemaError, match=r'net "n": op #0 Relu "bad": takes 1 inputs, got 2'):
        compile_graph(net)


def test_unknown_op_type_suggests():
    net = net_of(CreateOperator("Rleu", ["X"], ["Y"]), external_input=["X"])
    with pytest.raises(UnknownOperatorError, match="Did you mean: Relu"):
        compile_graph(net)


def test_failed_creation_leaves_workspace_unchanged():
    ws = Workspace()
    ws.feed_blob("X", np.ones(3, np.float32))
    before = ws.blobs()
    # validation failure
    with pytest.raises(NetError):
        ws.create_net(net_of(CreateOperator("Relu", "X", "H"), CreateOperator("Relu", "nope", "Y")))
    # failure while constructing an op (bad argument) after others were built
    bad = net_of(
        CreateOperator("Relu", "X", "H"),
        CreateOperator("Scale", "H", "Y", scale="not a float"),
        name="bad_arg",
    )
    with pytest.raises(Exception, match="scale"):
        ws.create_net(bad)
    assert ws.blobs() == before and ws.nets() == []


def test_create_net_refuses_overwrite_and_needs_name():
    ws = Workspace()
    ws.feed_blob("X", np.ones(3, np.float32))
    net = net_of(CreateOperator("Relu", "X", "Y"), name="same")
    ws.create_net(net)
    with pytest.raises(NetError, match="overwrite"):
        ws.create_net(net)
    ws.create_net(net, overwrite=True)
    unnamed = NetDef()
    unnamed.op.extend([CreateOperator("Relu", "X", "Y")])
    with pytest.raises(NetError, match="no name"):
        ws.create_net(unnamed)
    # an empty name set explicitly is a name (Caffe2's CreateNet checks has_name only)
    ws.create_net(net_of(CreateOperator("Relu", "X", "Y"), name=""))
    assert ws.has_net("")


def test_unknown_net_type():
    ws = Workspace()
    ws.feed_blob("X", np.ones(3, np.float32))
    with pytest.raises(NetError, match="unknown net type 'dga'.*Did you mean: dag"):
        ws.create_net(net_of(CreateOperator("Relu", "X", "Y"), type="dga"))


# -- net-level settings ------------------------------------------------------------
def test_net_device_option_and_args_reach_ops():
    net = net_of(
        CreateOperator("Scale", "X", "Y"),
        CreateOperator("Scale", "X", "Z", scale=3.0, device_option=DeviceOption(0, random_seed=7)),
        external_input=["X"],
    )
    net.device_option.CopyFrom(DeviceOption(1, 0))
    net.arg.extend([make_argument("scale", 2.0), make_argument("num_workers", 2)])
    g = compile_graph(net)
    op0, op1 = g.net_def.op
    assert op0.device_option.device_type == 1 and op1.device_option.random_seed == 7
    assert [a.name for a in op0.arg] == ["scale"] and op1.arg[0].f == 3.0
    ws = Workspace()
    ws.feed_blob("X", np.ones(2, np.float32))
    ws.run_net_once(net)
    assert ws.fetch_blob("Y")[0] == 2.0 and ws.fetch_blob("Z")[0] == 3.0


def test_str_one_op_per_line_in_execution_order():
    net = net_of(
        CreateOperator("Relu", "H", "Y"),
        CreateOperator("FC", ["X", "W", "b"], "H", axis=1),
        external_input=["X", "W", "b"],
    )
    ws = Workspace()
    for n, s in (("X", (2, 3)), ("W", (4, 3)), ("b", (4,))):
        ws.feed_blob(n, np.ones(s, np.float32))
    created = ws.create_net(net)
    assert str(created) == "H = FC(X, W, b, axis=1)\nY = Relu(H)"


# -- Caffe2 text nets --------------------------------------------------------------
CAFFE2_TEXT = """
name: "caffe2_mlp"
type: "dag"
num_workers: 2
external_input: "data"
external_input: "fc1_w"
external_input: "fc1_b"
external_output: "prob"
device_option {
  device_type: 1
  cuda_gpu_id: 0
}
arg {
  name: "num_workers"
  i: 2
}
op {
  input: "fc1"
  output: "relu1"
  name: "relu1"
  type: "Relu"
  engine: "CUDNN"
}
op {
  input: "data"
  input: "fc1_w"
  input: "fc1_b"
  output: "fc1"
  name: "fc1"
  type: "FC"
  arg {
    name: "axis"
    i: 1
  }
}
op {
  input: "relu1"
  output: "prob"
  name: "sigmoid"
  type: "Sigmoid"
  control_input: "fc1"
}
"""


def _feed_mlp(ws):
    rng = np.random.default_rng(0)
    ws.feed_blob("data", rng.standard_normal((2, 3)).astype(np.float32))
    ws.feed_blob("fc1_w", rng.standard_normal((4, 3)).astype(np.float32))
    ws.feed_blob("fc1_b", rng.standard_normal(4).astype(np.float32))


def _mlp_reference(ws):
    x, w, b = (ws.fetch_blob(n) for n in ("data", "fc1_w", "fc1_b"))
    h = np.maximum(x @ w.T + b, 0)
    return 1 / (1 + np.exp(-h))


def test_caffe2_text_net_compiles_and_runs(tmp_path):
    ws = Workspace()
    _feed_mlp(ws)
    net = ws.create_net(CAFFE2_TEXT)
    from framework.net.executors.dag import _num_workers

    assert net.type == "dag" and _num_workers(net.net_def) == 2
    assert len(net.chains) == 1 and net.num_workers == 1  # one linear chain needs one worker
    assert [op.type for op in net.ops_in_order()] == ["FC", "Relu", "Sigmoid"]
    assert all(op.device_option.device_type == 1 for op in net.net_def.op)
    assert net.net_def.op[0].engine == "CUDNN"
    net.run()
    np.testing.assert_allclose(ws.fetch_blob("prob"), _mlp_reference(ws), rtol=1e-5)
    # the same net from a text file and from a binary file
    from framework.proto.io import parse_text

    proto = parse_text(CAFFE2_TEXT, NetDef)
    text_file = tmp_path / "net.pbtxt"
    text_file.write_text(CAFFE2_TEXT)
    bin_file = tmp_path / "net.pb"
    bin_file.write_bytes(proto.SerializeToString())
    for src in (str(text_file), str(bin_file)):
        ws2 = Workspace()
        _feed_mlp(ws2)
        ws2.run_net_once(src)
        np.testing.assert_allclose(ws2.fetch_blob("prob"), ws.fetch_blob("prob"), rtol=1e-6)


def test_caffe2_text_net_undefined_input_with_external_list():
    text = CAFFE2_TEXT.replace('external_input: "fc1_b"\n', "")
    with pytest.raises(NetError, match=r"'fc1_b'.*not an external input"):
        compile_graph(text)


def test_log_is_isolated(op_log):
    assert op_log == []
