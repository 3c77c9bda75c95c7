"""ONNX unary ops (ONNXRound ... ONNXSwish) and ONNXPRelu against references written here with
Python's math on float64; float16/bfloat16 inputs compute in float32 and round back."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.errors import TypeMismatchError
from framework.ops.testing import arrays, assert_reference_checks, run_op_on, shapes

ml_dtypes = pytest.importorskip("ml_dtypes")


def _py(f):
    return lambda x: np.vectorize(lambda v: f(float(v)), otypes=[np.float64])(x).astype(x.dtype)


def _sig(v):
    return 1 / (1 + math.exp(-v))


def _shrink(v):
    return v - 0.25 if v > 1.0 else (v + 0.25 if v < -1.0 else 0.0)


def _round_half_even(v):
    return float(round(v))  # Python's round is half-to-even


# name: (reference on one float, elements, args)
FLOAT_OPS = {
    "ONNXRound": (_round_half_even, st.sampled_from([0.5, 1.5, 2.5, -0.5, -2.5, 0.4, -1.6, 3.0]), {}),
    "ONNXAcosh": (math.acosh, st.floats(1.0, 8.0, width=32), {}),
    "ONNXAsinh": (math.asinh, st.floats(-8.0, 8.0, width=32), {}),
    "ONNXAtanh": (math.atanh, st.floats(-0.9375, 0.9375, width=32), {}),
    "ONNXCelu": (lambda v: max(0.0, v) + min(0.0, 2 * math.expm1(v / 2)), st.floats(-4, 4, width=32), {"alpha": 2.0}),
    "ONNXHardSwish": (lambda v: v * max(0.0, min(1.0, v / 6 + 0.5)), st.floats(-5, 5, width=32), {}),
    "ONNXMish": (lambda v: v * math.tanh(math.log1p(math.exp(v))), st.floats(-5, 5, width=32), {}),
    "ONNXSwish": (lambda v: v * _sig(0.75 * v), st.floats(-5, 5, width=32), {"alpha": 0.75}),
    "ONNXShrink": (_shrink, st.floats(-3, 3, width=32), {"lambd": 1.0, "bias": 0.25}),
}  # fmt: skip


@pytest.mark.parametrize("op_type", list(FLOAT_OPS))
@given(data=st.data())
@settings(max_examples=10, deadline=None)
def test_float_ops(op_type, data):
    f, elements, args = FLOAT_OPS[op_type]
    dtype = data.draw(st.sampled_from([np.float32, np.float64]))
    x = data.draw(arrays(data.draw(shapes(0, 3, 0, 4)), dtype, elements=elements))
    assert_reference_checks(CreateOperator(op_type, ["X"], ["Y"], **args), [x], _py(f), threshold=1e-5)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_low_precision_floats_compute_in_float32(dtype):
    dt = np.dtype(getattr(ml_dtypes, dtype, None) or dtype)
    x = np.array([-2.0, -0.5, 0.25, 1.5, 3.0], dtype=dt)
    (y,) = run_op_on(CreateOperator("ONNXSwish", ["X"], ["Y"]), [x])
    exp = np.array([v * _sig(v) for v in x.astype(np.float64)], np.float32).astype(dt)
    assert y.dtype == dt
    np.testing.assert_array_equal(y.astype(np.float32), exp.astype(np.float32))


def test_isinf_isnan_and_bitwise_not():
    x = np.array([np.inf, -np.inf, np.nan, 1.0, -0.0], np.float32)
    for pos, neg, exp in ((1, 1, [1, 1, 0, 0, 0]), (1, 0, [1, 0, 0, 0, 0]), (0, 1, [0, 1, 0, 0, 0])):
        op = CreateOperator("ONNXIsInf", ["X"], ["Y"], detect_positive=pos, detect_negative=neg)
        (y,) = run_op_on(op, [x])
        assert y.dtype == bool and y.tolist() == [bool(v) for v in exp]
    (y,) = run_op_on(CreateOperator("ONNXIsNaN", ["X"], ["Y"]), [x.astype(np.float16)])
    assert y.tolist() == [False, False, True, False, False]
    for dt in (np.int8, np.uint16, np.uint64):
        v = np.array([0, 1, 5, 100], dt)
        (y,) = run_op_on(CreateOperator("ONNXBitwiseNot", ["X"], ["Y"]), [v])
        bits = np.dtype(dt).itemsize * 8
        exp = [(~int(a)) % (1 << bits) for a in v]  # the complement in the type's width
        assert [int(a) % (1 << bits) for a in y] == exp


def test_shrink_on_integers_keeps_the_type():
    x = np.array([-5, -1, 0, 1, 5], np.int8)
    (y,) = run_op_on(CreateOperator("ONNXShrink", ["X"], ["Y"], lambd=1.5, bias=1.0), [x])
    assert y.dtype == np.int8 and y.tolist() == [-4, 0, 0, 0, 4]


@given(data=st.data())
@settings(max_examples=15, deadline=None)
def test_prelu_broadcasts_the_slope(data):
    dtype = data.draw(st.sampled_from([np.float32, np.int32, np.float16]))
    x = data.draw(arrays((2, 3, 4), dtype, elements=st.integers(-9, 9)))
    slope = data.draw(arrays(data.draw(st.sampled_from([(4,), (3, 1), (1,)])), dtype, elements=st.integers(-3, 3)))

    def ref(x, s):
        xb, sb = np.broadcast_arrays(x.astype(np.float64), s.astype(np.float64))
        return np.array([a * b if a < 0 else a for a, b in zip(xb.ravel(), sb.ravel())]).reshape(x.shape).astype(dtype)

    assert_reference_checks(CreateOperator("ONNXPRelu", ["A", "B"], ["Y"]), [x, slope], ref)


def test_type_errors_name_the_op_and_blob():
    with pytest.raises(TypeMismatchError, match="ONNXRound.*'X'.*int32"):
        run_op_on(CreateOperator("ONNXRound", ["X"], ["Y"]), [np.ones(2, np.int32)])
    with pytest.raises(TypeMismatchError, match="ONNXBitwiseNot.*'X'"):
        run_op_on(CreateOperator("ONNXBitwiseNot", ["X"], ["Y"]), [np.ones(2, np.float32)])
