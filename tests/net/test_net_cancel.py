"""Net.cancel(): a run blocked on a queue returns and raises; a later run is not affected."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from framework.errors import NetError
from framework.memory.workspace import Workspace
from framework.proto.args import make_argument
from framework.proto.framework_pb2 import NetDef, OperatorDef


def _op(t, ins, outs, **args):
    op = OperatorDef(type=t, input=ins, output=outs)
    for k, v in args.items():
        op.arg.append(make_argument(k, v))
    return op


@pytest.mark.parametrize("net_type", ["simple", "dag", "async_scheduling"])
def test_cancel_unblocks_a_dequeue_and_the_run_raises(net_type):
    ws = Workspace()
    ws.run_operator_once(_op("CreateBlobsQueue", [], ["q"], capacity=2, num_blobs=1))
    net = NetDef(name="deq", type=net_type)
    net.op.append(_op("SafeDequeueBlobs", ["q"], ["x", "status"]))
    instance = ws.create_net(net)
    t = threading.Timer(0.3, instance.cancel)
    start = time.monotonic()
    t.start()
    with pytest.raises(NetError, match="cancelled"):
        instance.run()
    t.join()
    assert time.monotonic() - start < 30
    assert ws.get_blob("q").held.closed
    # a new run is a new run: the closed, empty queue now answers status true at once
    instance.run()
    assert bool(ws.fetch_blob("status")) is True


def test_cancel_of_a_net_without_waiting_ops_changes_nothing_for_the_next_run():
    ws = Workspace()
    ws.feed_blob("a", np.ones(3, np.float32))
    net = NetDef(name="relu")
    net.op.append(_op("Relu", ["a"], ["b"]))
    instance = ws.create_net(net)
    instance.cancel()
    instance.run()
    np.testing.assert_array_equal(ws.fetch_blob("b"), np.ones(3, np.float32))
