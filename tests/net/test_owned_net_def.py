"""compile_graph / instantiate with ``owned=True`` keep the NetDef handed over instead of copying it;
by default the caller's NetDef is copied and never changed (the Predictor hands over its own parse)."""

from __future__ import annotations

import numpy as np

from framework.core import CreateOperator
from framework.memory.workspace import Workspace
from framework.net.base import instantiate
from framework.net.graph import compile_graph
from framework.predictor import Predictor
from framework.proto.framework_pb2 import NetDef


def _init_net() -> NetDef:
    net = NetDef(name="init")
    net.op.append(CreateOperator("GivenTensorFill", [], ["w"], shape=[2], values=[1.5, -2.0]))
    net.device_option.random_seed = 7  # normalize_net_def copies it onto every op
    return net


def test_default_copies_and_leaves_the_caller_net_alone():
    net = _init_net()
    graph = compile_graph(net)
    assert graph.net_def is not net
    assert not net.op[0].HasField("device_option")
    assert graph.net_def.op[0].device_option.random_seed == 7


def test_owned_keeps_the_same_message():
    net = _init_net()
    graph = compile_graph(net, owned=True)
    assert graph.net_def is net
    assert net.op[0].device_option.random_seed == 7
    ws = Workspace()
    instantiate(_init_net(), ws, owned=True).run()
    np.testing.assert_array_equal(ws.fetch_blob("w"), np.array([1.5, -2.0], np.float32))


def test_predictor_does_not_change_the_callers_init_net():
    init = _init_net()
    predict = NetDef(name="p", external_input=["x", "w"], external_output=["y"])
    predict.op.append(CreateOperator("Add", ["x", "w"], ["y"]))
    before = init.SerializeToString()
    p = Predictor(init, predict, optimize=False)
    (y,) = p.run([np.ones(2, np.float32)])
    np.testing.assert_array_equal(y, np.array([2.5, -1.0], np.float32))
    assert init.SerializeToString() == before
