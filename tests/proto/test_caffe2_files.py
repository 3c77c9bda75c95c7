"""Caffe2-format text files (written by hand from reference/caffe2.md) parse with every field intact."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from framework.proto import read_net, read_plan, read_proto, write_binary, write_text
from framework.proto.framework_pb2 import CUDA, NetDef, PlanDef, TensorProto

DATA = Path(__file__).parent / "data"


def _args(op_or_net):
    return {a.name: a for a in op_or_net.arg}


def test_caffe2_netdef_text_every_field():
    net = read_net(DATA / "caffe2_net.pbtxt")
    assert net.name == "caffe2_style_net"
    assert net.type == "dag"
    assert net.num_workers == 4
    assert net.device_option.device_type == CUDA == 1
    assert net.device_option.device_id == 1
    assert [a.name for a in net.arg] == ["first_iter_only_one_worker", "label"]
    assert _args(net)["first_iter_only_one_worker"].i == 1
    assert _args(net)["label"].s == b"net-level"
    assert list(net.external_input) == ["data", "fc_w", "fc_b", "label", "init_done"]
    assert list(net.external_output) == ["loss"]
    assert len(net.op) == 3

    fc = net.op[0]
    assert list(fc.input) == ["data", "fc_w", "fc_b"]
    assert list(fc.output) == ["fc"]
    assert (fc.name, fc.type, fc.engine) == ("fc1", "FC", "CUDNN,DEFAULT")
    assert list(fc.control_input) == ["init_done"]
    assert fc.HasField("is_gradient_op") and not fc.is_gradient_op
    assert fc.debug_info == 'File "model.py", line 12'
    d = fc.device_option
    assert (d.device_type, d.device_id, d.random_seed, d.node_name, d.numa_node_id) == (1, 3, 1701, "node0", 1)

    a = _args(fc)
    assert [x.name for x in fc.arg] == [
        "axis",
        "alpha",
        "order",
        "shape",
        "scales",
        "names",
        "body",
        "branches",
        "value",
    ]
    assert a["axis"].i == 1 and not a["axis"].HasField("f")
    assert a["alpha"].f == pytest.approx(0.25) and not a["alpha"].HasField("i")
    assert a["order"].s == b"NCHW"
    assert list(a["shape"].ints) == [2, 3, -1]
    np.testing.assert_allclose(list(a["scales"].floats), [0.5, 1.5])
    # The string literal containing "cuda_gpu_id: 7" must not be rewritten.
    assert list(a["names"].strings) == [b"a", b'b"quoted" cuda_gpu_id: 7']
    inner = a["body"].n
    assert inner.name == "inner" and inner.op[0].type == "Relu"
    assert list(inner.external_input) == ["x"] and list(inner.external_output) == ["y"]
    assert [n.name for n in a["branches"].nets] == ["then", "else"]
    assert a["branches"].nets[0].op[0].type == "Copy"
    t = a["value"].t
    assert (list(t.dims), t.data_type, list(t.float_data), t.name) == ([2], TensorProto.FLOAT, [1.0, 2.0], "const")

    relu = net.op[1]
    assert relu.HasField("device_option") and relu.device_option.HasField("device_id")
    assert relu.device_option.device_id == 0
    assert not relu.HasField("engine") and not relu.HasField("name")

    loss = net.op[2]
    assert loss.is_gradient_op and list(loss.control_input) == ["fc"] and list(loss.output) == ["xent", "loss"]


def test_caffe2_plan_text_every_field():
    plan = read_plan(DATA / "caffe2_plan.pbtxt")
    assert plan.name == "train_plan"
    assert [n.name for n in plan.network] == ["init", "train"]
    assert plan.network[1].type == "simple"
    assert plan.network[1].device_option.HasField("device_id")  # the later spelling
    assert plan.network[0].op[0].arg[0].ints == [1]
    init_step, loop, legacy = plan.execution_step
    assert (init_step.name, list(init_step.network)) == ("init_step", ["init"])
    assert loop.concurrent_substeps and loop.should_stop_blob == "stop"
    assert loop.HasField("only_once") and not loop.only_once
    assert loop.HasField("create_workspace") and loop.num_concurrent_instances == 2
    train, report = loop.substep
    assert (train.name, list(train.network), train.num_iter) == ("train_step", ["train"], 100)
    assert (report.network[0], report.run_every_ms) == ("report_net", 1000)
    assert legacy.criteria_network == "criteria"
    assert (legacy.report_net, legacy.report_interval) == ("report_net", 10)


@pytest.mark.parametrize("name,cls", [("caffe2_net.pbtxt", NetDef), ("caffe2_plan.pbtxt", PlanDef)])
def test_binary_and_text_round_trip(tmp_path, name, cls):
    msg = read_proto(DATA / name, cls)
    write_binary(msg, tmp_path / "m.pb")
    back = read_proto(tmp_path / "m.pb", cls)
    assert back == msg
    assert (tmp_path / "m.pb").read_bytes() == msg.SerializeToString()
    write_text(msg, tmp_path / "m.pbtxt")
    assert read_proto(tmp_path / "m.pbtxt", cls) == msg
    # Our text writer uses the later spelling; it must read back the same.
    if cls is NetDef:
        assert "device_id: 3" in (tmp_path / "m.pbtxt").read_text()


def test_unknown_fields_of_a_newer_binary_are_kept(tmp_path):
    net = NetDef(name="n")
    data = net.SerializeToString() + bytes([0xF8, 0x07, 0x05])  # field 127, varint 5: unknown here
    (tmp_path / "new.pb").write_bytes(data)
    back = read_net(tmp_path / "new.pb")
    assert back.name == "n"
    assert back.SerializeToString() == data
