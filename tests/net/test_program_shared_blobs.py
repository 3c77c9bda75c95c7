"""The compiled fast path stays correct when ops of different shapes share one blob."""

import numpy as np

from framework.core import CreateOperator
from framework.memory.workspace import Workspace
from framework.proto.framework_pb2 import NetDef


def test_blob_reused_with_another_shape_later_in_the_run():
    # "s" first holds relu(x) (shape 2x3), then is overwritten with a larger 4x5 tensor.
    net = NetDef(name="shared", external_input=["x", "z"], external_output=["y", "w"])
    net.op.extend(
        [
            CreateOperator("Relu", ["x"], ["s"]),
            CreateOperator("Relu", ["s"], ["y"]),
            CreateOperator("Relu", ["z"], ["s"]),
            CreateOperator("Relu", ["s"], ["w"]),
        ]
    )
    ws = Workspace()
    x = np.arange(-3, 3, dtype=np.float32).reshape(2, 3)
    z = np.arange(-10, 10, dtype=np.float32).reshape(4, 5)
    ws.feed_blob("x", x)
    ws.feed_blob("z", z)
    n = ws.create_net(net)
    for _ in range(4):
        n.run()
        np.testing.assert_array_equal(ws.fetch_blob("y"), np.maximum(x, 0))
        np.testing.assert_array_equal(ws.fetch_blob("w"), np.maximum(z, 0))
