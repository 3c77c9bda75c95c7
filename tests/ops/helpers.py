"""Helpers shared by the op tests (``from tests.ops.helpers import ...``): an independent
reference of Caffe2's conv/pool output sizes, and one-shot op runners."""

from __future__ import annotations

import math

import numpy as np

from framework.memory.workspace import Workspace
from framework.ops import create_operator
from framework.ops.testing import arrays, feed_inputs, shapes
from framework.proto.framework_pb2 import TensorProto

float_arrays = shapes(min_dims=1, max_dims=4, max_side=4).flatmap(lambda s: arrays(s, np.float32))


def ref_size(n, k, s, d, legacy, head, tail):
    """Caffe2's output-size rules, written out per mode: (head, tail, out)."""
    dk = d * (k - 1) + 1
    if legacy == 0:
        return head, tail, (n + head + tail - dk) // s + 1
    if legacy == 1:
        return 0, 0, (n - dk) // s + 1
    if legacy == 2:
        want = -(-n // s)
        need = (want - 1) * s + k - n
        h = need // 2 if need >= 0 else -((-need) // 2)
        return h, need - h, (n + need - dk) // s + 1
    out = math.ceil((n + 2 * head - k) / s) + 1
    if head > 0 and (out - 1) * s >= n + head:
        out -= 1
    std = (n + 2 * head - k) // s + 1
    return head, head + s * (out - std), out


def case_geometry(case):
    """(heads, tails, outs) per spatial dim of a hypothesis conv/pool case dict (keys r, sizes,
    kernel, stride, dil, legacy, pads)."""
    r = case["r"]
    res = [
        ref_size(
            case["sizes"][i],
            case["kernel"][i],
            case["stride"][i],
            case["dil"][i],
            case["legacy"],
            case["pads"][i],
            case["pads"][r + i],
        )
        for i in range(r)
    ]
    return [a for a, _, _ in res], [b for _, b, _ in res], [c for _, _, c in res]


def run_once(op_def, inputs):
    """Feed ``inputs`` (in op_def's input order) into a fresh workspace and run the op once."""
    ws = Workspace()
    feed_inputs(ws, op_def, inputs)
    create_operator(op_def, ws).run()


def run_fed(op_def, feeds):
    """Feed the blobs of ``feeds`` (name -> array) into a fresh workspace, run the op once;
    (workspace, operator)."""
    ws = Workspace()
    for k, v in feeds.items():
        ws.feed_blob(k, v)
    op = create_operator(op_def, ws)
    op.run()
    return ws, op


# Every TensorProto DataType a tensor can hold numerically, with its numpy dtype.
DTYPE_PAIRS = [
    (TensorProto.FLOAT, np.float32),
    (TensorProto.DOUBLE, np.float64),
    (TensorProto.INT32, np.int32),
    (TensorProto.INT64, np.int64),
    (TensorProto.BOOL, np.bool_),
    (TensorProto.UINT8, np.uint8),
    (TensorProto.INT16, np.int16),
    (TensorProto.FLOAT16, np.float16),
]
