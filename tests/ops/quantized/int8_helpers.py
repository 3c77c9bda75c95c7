"""Shared checks of the int8 op tests: run an op on fed Int8TensorCPU / float inputs, compare every output
(codes, scale, zero point) with a reference, check inferred shapes == real shapes and that a second run
allocates nothing. References are written in the tests (numpy), never taken from the code under test."""

from __future__ import annotations

import numpy as np

from framework.memory.allocator import memory_reporter
from framework.memory.int8_tensor import Int8TensorCPU
from framework.memory.tensor import Tensor
from framework.memory.workspace import Workspace
from framework.ops import create_operator
from framework.ops.inference import infer_op
from framework.ops.schema import TensorSpec


def q8(data, scale=0.01, zero_point=127):
    """An Int8TensorCPU of ``data`` (uint8 unless int32 is given)."""
    arr = np.asarray(data)
    if arr.dtype != np.int32:
        arr = arr.astype(np.uint8)
    return Int8TensorCPU.from_numpy(arr, scale, zero_point)


def spec(value):
    if isinstance(value, Int8TensorCPU):
        return TensorSpec(value.shape, value.t._array.dtype)
    arr = np.asarray(value)
    return TensorSpec(arr.shape, arr.dtype)


def fetch(ws, name):
    obj = ws.get_blob(name)._obj
    if isinstance(obj, Int8TensorCPU):
        return obj
    assert isinstance(obj, Tensor), f"output '{name}' holds {type(obj).__name__}"
    return obj.numpy()


def run(op_def, inputs, ws=None):
    """Feed ``inputs`` (by op_def's input order), run once; (workspace, operator, outputs)."""
    ws = ws if ws is not None else Workspace()
    for name, value in zip(op_def.input, inputs):
        ws.feed_blob(name, value)
    op = create_operator(op_def, ws)
    op.run()
    return ws, op, [fetch(ws, n) for n in op_def.output]


def check_int8(op_def, inputs, expected, check_realloc=True):
    """Run ``op_def`` and compare each output with ``expected``: ``(codes, scale, zero_point)`` for an
    Int8TensorCPU output, an array for a float one (exact for integer data, 1e-6 relative for float)."""
    ws, op, outs = run(op_def, inputs)
    inferred = infer_op(op_def, [spec(v) for v in inputs], strict=True)
    for k, (got, exp, sp) in enumerate(zip(outs, expected, inferred)):
        label = f"{op_def.type} output {k}"
        if isinstance(exp, tuple):
            assert isinstance(got, Int8TensorCPU), f"{label}: {type(got).__name__}, expected an Int8TensorCPU"
            codes, scale, zp = exp
            codes = np.asarray(codes)
            np.testing.assert_array_equal(got.numpy(), codes, err_msg=label)
            assert got.numpy().dtype == codes.dtype, f"{label}: dtype {got.numpy().dtype} != {codes.dtype}"
            assert got.scale == np.float32(scale) and got.zero_point == zp, (
                f"{label}: scale/zero_point {got.scale}/{got.zero_point} != {np.float32(scale)}/{zp}"
            )
            real = got.numpy()
        else:
            np.testing.assert_allclose(got, exp, rtol=1e-6, atol=1e-6, err_msg=label)
            real = got
        assert sp.shape is not None and tuple(sp.shape) == real.shape, f"{label}: inferred {sp.shape} != {real.shape}"
        assert sp.dtype is not None and np.dtype(sp.dtype) == real.dtype, f"{label}: inferred dtype {sp.dtype}"
    if check_realloc:
        before = memory_reporter().allocations
        op.run()
        assert memory_reporter().allocations == before, f"{op_def.type}: a second run allocated"
    return outs
