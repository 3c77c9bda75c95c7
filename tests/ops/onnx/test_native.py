"""ONNXMatMul / ONNXSoftmax / ONNXLogSoftmax in the input's own type (float16, integers), against
references written here with Python loops on float64 / ints."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.errors import ShapeError, TypeMismatchError
from framework.ops.testing import arrays, assert_reference_checks, run_op_on

SHAPES = [((3,), (3,)), ((2, 3), (3,)), ((3,), (3, 4)), ((2, 1, 2, 3), (4, 3, 2)), ((2, 3), (3, 2))]


def _matmul_ref(a, b):
    a2 = a.reshape(1, -1) if a.ndim == 1 else a
    b2 = b.reshape(-1, 1) if b.ndim == 1 else b
    batch = np.broadcast_shapes(a2.shape[:-2], b2.shape[:-2])
    A = np.broadcast_to(a2, batch + a2.shape[-2:]).reshape(-1, *a2.shape[-2:])
    B = np.broadcast_to(b2, batch + b2.shape[-2:]).reshape(-1, *b2.shape[-2:])
    out = np.array([[[sum(int(m[i, k]) * int(n[k, j]) for k in range(m.shape[1])) for j in range(n.shape[1])]
                     for i in range(m.shape[0])] for m, n in zip(A, B)], dtype=object)  # fmt: skip
    out = out.reshape(batch + (a2.shape[-2], b2.shape[-1]))
    if a.ndim == 1:
        out = out[..., 0, :]
    if b.ndim == 1:
        out = out[..., 0]
    return out


@given(data=st.data())
@settings(max_examples=20, deadline=None)
def test_integer_matmul_with_1d_operands(data):
    sa, sb = data.draw(st.sampled_from(SHAPES))
    dtype = data.draw(st.sampled_from([np.int32, np.int64, np.uint8]))
    a = data.draw(arrays(sa, dtype, elements=st.integers(0, 9)))
    b = data.draw(arrays(sb, dtype, elements=st.integers(0, 9)))
    ref = lambda a, b: np.array(_matmul_ref(a, b), dtype=np.int64).astype(dtype)  # noqa: E731 - wraps as the type
    assert_reference_checks(CreateOperator("ONNXMatMul", ["A", "B"], ["Y"]), [a, b], ref)


def test_float16_matmul_and_errors():
    a = np.array([[0.5, 1.5], [2.0, -1.0]], np.float16)
    (y,) = run_op_on(CreateOperator("ONNXMatMul", ["A", "B"], ["Y"]), [a, a])
    assert y.dtype == np.float16 and y.tolist() == [[3.25, -0.75], [-1.0, 4.0]]
    with pytest.raises(ShapeError, match="ONNXMatMul.*'A'.*'B'"):
        run_op_on(CreateOperator("ONNXMatMul", ["A", "B"], ["Y"]), [a, np.ones((3, 2), np.float16)])


@pytest.mark.parametrize("op_type", ["ONNXSoftmax", "ONNXLogSoftmax"])
@given(data=st.data())
@settings(max_examples=15, deadline=None)
def test_softmax_in_the_type(op_type, data):
    dtype = data.draw(st.sampled_from([np.float16, np.float32]))
    x = data.draw(arrays((2, 3, 4), dtype, elements=st.floats(-4, 4, width=16)))
    axis = data.draw(st.sampled_from([-1, 0, 1]))

    def ref(x):
        xm = np.moveaxis(x.astype(np.float64), axis, -1)
        out = np.empty_like(xm)
        for idx in np.ndindex(*xm.shape[:-1]):
            e = [math.exp(v - max(xm[idx])) for v in xm[idx]]
            out[idx] = [v / sum(e) for v in e]
        out = np.moveaxis(out, -1, axis)
        return (np.log(out) if op_type == "ONNXLogSoftmax" else out).astype(dtype)

    op = CreateOperator(op_type, ["X"], ["Y"], axis=axis)
    assert_reference_checks(op, [x], ref, threshold=4e-3 if dtype == np.float16 else 1e-5, atol=4e-3)


def test_softmax_rejects_integers():
    with pytest.raises(TypeMismatchError, match="ONNXSoftmax.*'X'"):
        run_op_on(CreateOperator("ONNXSoftmax", ["X"], ["Y"]), [np.ones((2, 2), np.int32)])
