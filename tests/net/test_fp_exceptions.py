"""Caffe2's --caffe2_operator_throw_if_fp_exceptions: ops fail on division by zero, overflow, invalid values."""

from __future__ import annotations

import numpy as np
import pytest

from framework.caffe2.c_extension import global_init
from framework.errors import OperatorError
from framework.memory.workspace import Workspace
from framework.proto.framework_pb2 import NetDef, OperatorDef
from framework.runtime.state import RUNTIME


@pytest.fixture(autouse=True)
def _flag_off_after():
    yield
    RUNTIME.fp_exceptions = False


@pytest.mark.parametrize("net_type", ["simple", "dag"])
@pytest.mark.parametrize(
    "op, feeds",
    [(OperatorDef(type="Div", input=["a", "b"], output=["y"]), {"a": [1.0], "b": [0.0]}),
     (OperatorDef(type="Log", input=["a"], output=["y"]), {"a": [-1.0]}),
     (OperatorDef(type="Exp", input=["a"], output=["y"]), {"a": [1000.0]})],
)  # fmt: skip
def test_flag_turns_fp_exceptions_into_op_errors(net_type, op, feeds):
    ws = Workspace()
    for k, v in feeds.items():
        ws.feed_blob(k, np.array(v, np.float32))
    net = NetDef(name=f"fp_{net_type}", type=net_type)
    net.op.append(op)
    ws.create_net(net)
    ws.run_net(net.name)  # off by default: inf / NaN as numpy gives them
    assert not np.isfinite(ws.fetch_blob("y")).all()
    global_init(["prog", "--caffe2_operator_throw_if_fp_exceptions=1"])
    with pytest.raises(OperatorError, match=f"{op.type}.*FloatingPointError"):
        ws.run_net(net.name)
    global_init(["prog", "--caffe2_operator_throw_if_fp_exceptions=0"])
    ws.run_net(net.name)


def test_reset_forgets_the_flag():
    global_init(["prog", "--caffe2_operator_throw_if_fp_exceptions"])
    assert RUNTIME.fp_exceptions
    RUNTIME.reset()
    assert not RUNTIME.fp_exceptions
