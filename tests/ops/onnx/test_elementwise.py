"""ONNX elementwise ops (ONNXAdd ... ONNXWhere) on the types Caffe2's ops lack (int8/int16,
unsigned up to uint64, bfloat16, bool and strings), with numpy broadcasting; references written
here with Python integers / float64."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.errors import ArgumentError, ShapeError, TypeMismatchError
from framework.ops.testing import arrays, assert_reference_checks, run_op_on

ml_dtypes = pytest.importorskip("ml_dtypes")

INT_TYPES = [np.int8, np.int16, np.uint8, np.uint16, np.uint32, np.uint64]


def _pyint(f):
    """Elementwise over Python ints (no overflow), wrapped back into ``dtype``."""

    def ref(a, b, dtype=None):
        dtype = dtype or a.dtype
        bits = np.dtype(dtype).itemsize * 8
        out = np.vectorize(lambda x, y: f(int(x), int(y)), otypes=[object])(a, b)
        signed = np.dtype(dtype).kind == "i"

        def wrap_one(v):
            v %= 1 << bits  # two's complement: keep the low bits
            return v - (1 << bits) if signed and v >= 1 << (bits - 1) else v

        wrap = np.vectorize(wrap_one, otypes=[object])
        return wrap(out).astype(dtype) if out.size else np.zeros(out.shape, dtype)

    return ref


def _trunc_div(x, y):
    q = abs(x) // abs(y)
    return q if (x < 0) == (y < 0) else -q


ARITH = {
    "ONNXAdd": lambda x, y: x + y,
    "ONNXSub": lambda x, y: x - y,
    "ONNXMul": lambda x, y: x * y,
    "ONNXDiv": _trunc_div,
    "ONNXBitwiseAnd": lambda x, y: x & y,
    "ONNXBitwiseOr": lambda x, y: x | y,
    "ONNXBitwiseXor": lambda x, y: x ^ y,
}
CMP = {
    "ONNXEqual": lambda a, b: a.astype(object) == b.astype(object),
    "ONNXLess": lambda a, b: a.astype(object) < b.astype(object),
    "ONNXLessOrEqual": lambda a, b: a.astype(object) <= b.astype(object),
    "ONNXGreater": lambda a, b: a.astype(object) > b.astype(object),
    "ONNXGreaterOrEqual": lambda a, b: a.astype(object) >= b.astype(object),
}
SHAPE_PAIRS = [((2, 3), (2, 3)), ((2, 3), (3,)), ((4, 1), (1, 5)), ((), (3, 2)), ((0, 3), (1, 3))]


def _draw(data, dtype, shape, nonzero=False):
    info = np.iinfo(dtype)
    lo, hi = max(int(info.min), -100), min(int(info.max), 100)
    ints = st.integers(lo, hi).filter(lambda v: v != 0) if nonzero else st.integers(lo, hi)
    return data.draw(arrays(shape, dtype, elements=ints))


@pytest.mark.parametrize("op_type", list(ARITH))
@given(data=st.data())
@settings(max_examples=12, deadline=None)
def test_integer_arithmetic(op_type, data):
    dtype = data.draw(st.sampled_from(INT_TYPES))
    sa, sb = data.draw(st.sampled_from(SHAPE_PAIRS))
    a, b = _draw(data, dtype, sa), _draw(data, dtype, sb, nonzero=op_type == "ONNXDiv")
    assert_reference_checks(CreateOperator(op_type, ["A", "B"], ["Y"]), [a, b], _pyint(ARITH[op_type]))


@pytest.mark.parametrize("op_type", list(CMP))
@given(data=st.data())
@settings(max_examples=12, deadline=None)
def test_comparisons(op_type, data):
    dtype = data.draw(st.sampled_from(INT_TYPES + [np.float16]))
    sa, sb = data.draw(st.sampled_from(SHAPE_PAIRS))
    a, b = _draw(data, np.int8, sa).astype(dtype), _draw(data, np.int8, sb).astype(dtype)
    op = CreateOperator(op_type, ["A", "B"], ["Y"])
    assert_reference_checks(op, [a, b], lambda a, b: CMP[op_type](a, b).astype(bool))


def test_equal_on_strings_and_bools():
    a = np.array([b"a", b"bc", b""], dtype=object)
    (y,) = run_op_on(CreateOperator("ONNXEqual", ["A", "B"], ["Y"]), [a, np.array([b"bc"], dtype=object)])
    np.testing.assert_array_equal(y, [False, True, False])
    (y,) = run_op_on(CreateOperator("ONNXEqual", ["A", "B"], ["Y"]), [np.array([True, False]), np.array([True])])
    np.testing.assert_array_equal(y, [True, False])


def test_bfloat16_computes_in_float32_and_rounds_back():
    a = np.array([1.0, 3.0, 0.1], ml_dtypes.bfloat16)
    b = np.array([1.0 / 256, 3.0, 7.0], ml_dtypes.bfloat16)
    (y,) = run_op_on(CreateOperator("ONNXAdd", ["A", "B"], ["Y"]), [a, b])
    exp = (a.astype(np.float32) + b.astype(np.float32)).astype(ml_dtypes.bfloat16)
    assert y.dtype == a.dtype
    np.testing.assert_array_equal(y.astype(np.float32), exp.astype(np.float32))
    assert y.astype(np.float32)[0] == 1.0  # 1 + 2**-8 rounds to 1 in bfloat16 (8 significant bits)


@given(data=st.data())
@settings(max_examples=20, deadline=None)
def test_mod_both_sign_rules(data):
    dtype = data.draw(st.sampled_from([np.int8, np.int32, np.uint16, np.float32, np.float64]))
    fmod = data.draw(st.sampled_from([0, 1]))
    a = _draw(data, np.int8, (3, 4)).astype(dtype)
    b = _draw(data, np.int8, (4,), nonzero=True).astype(dtype)

    def ref(a, b):
        num = float if np.dtype(dtype).kind == "f" else int
        one = (lambda x, y: math.fmod(x, y)) if fmod else (lambda x, y: x % y)  # Python's %: floored
        return np.vectorize(lambda x, y: one(num(x), num(y)), otypes=[np.float64])(a, b).astype(dtype)

    assert_reference_checks(CreateOperator("ONNXMod", ["A", "B"], ["Y"], fmod=fmod), [a, b], ref)


@given(data=st.data())
@settings(max_examples=25, deadline=None)
def test_bitshift(data):
    dtype = data.draw(st.sampled_from([np.uint8, np.uint16, np.uint64, np.int8, np.int32]))
    direction = data.draw(st.sampled_from(["LEFT", "RIGHT"]))
    bits = np.dtype(dtype).itemsize * 8
    lo = -128 if np.dtype(dtype).kind == "i" else 0
    x = data.draw(arrays((5,), dtype, elements=st.integers(lo, 127)))
    s = data.draw(arrays((5,), dtype, elements=st.integers(max(lo, -2), bits + 2)))

    def ref(x, s):
        out = []
        for a, k in zip(x.tolist(), s.tolist()):
            if not 0 <= k < bits:
                out.append(-1 if direction == "RIGHT" and a < 0 else 0)
            elif direction == "LEFT":
                v = (a << k) % (1 << bits)  # bits past the top are lost: wrap to the type
                out.append(v - (1 << bits) if lo and v >= 1 << (bits - 1) else v)
            else:
                out.append(a >> k)  # Python's >> is arithmetic on negatives
        return np.array(out, dtype=dtype)

    assert_reference_checks(CreateOperator("ONNXBitShift", ["X", "Y"], ["Z"], direction=direction), [x, s], ref)


def test_pow_keeps_the_base_type():
    x = np.array([2, 3, -4], np.int32)
    for y, exp in ((np.array([3.0, 0.5, 2.0], np.float32), [8, 1, 16]), (np.array([2], np.int64), [4, 9, 16])):
        (z,) = run_op_on(CreateOperator("ONNXPow", ["X", "Y"], ["Z"]), [x, y])
        assert z.dtype == np.int32
        np.testing.assert_array_equal(z, exp)
    xf = np.array([1.5, 2.0], np.float16)
    (z,) = run_op_on(CreateOperator("ONNXPow", ["X", "Y"], ["Z"]), [xf, np.array([2.0], np.float32)])
    assert z.dtype == np.float16 and z.tolist() == [2.25, 4.0]


@pytest.mark.parametrize("op_type, f", [("ONNXMax", max), ("ONNXMin", min)])
def test_variadic_max_min_broadcast_and_nan(op_type, f):
    a = np.array([[1, 5, -3]], np.int8)
    b = np.array([[2], [-7]], np.int8)
    c = np.array(4, np.int8)
    (y,) = run_op_on(CreateOperator(op_type, ["a", "b", "c"], ["y"]), [a, b, c])
    exp = [[f(int(x), int(r[0]), 4) for x in a[0]] for r in b]
    np.testing.assert_array_equal(y, np.array(exp, np.int8))
    (y,) = run_op_on(CreateOperator(op_type, ["a", "b"], ["y"]), [np.array([np.nan, 1.0]), np.array([0.0, 2.0])])
    assert np.isnan(y[0])


def test_where_broadcasts_any_type():
    cond = np.array([[True], [False]])
    x = np.array([b"x1", b"x2"], dtype=object)
    y = np.array([b"y"], dtype=object)
    (out,) = run_op_on(CreateOperator("ONNXWhere", ["c", "x", "y"], ["o"]), [cond, x, y])
    np.testing.assert_array_equal(out, np.array([[b"x1", b"x2"], [b"y", b"y"]], dtype=object))
    xs = np.arange(3, dtype=np.uint64)
    assert_reference_checks(
        CreateOperator("ONNXWhere", ["c", "x", "y"], ["o"]),
        [cond, xs, np.array(7, np.uint64)],
        lambda c, x, y: np.array([[int(v) if c[i, 0] else 7 for v in x] for i in range(2)], np.uint64),
    )


def test_errors_name_the_op_and_blobs():
    i8 = np.ones(3, np.int8)
    with pytest.raises(TypeMismatchError, match="ONNXAdd.*different dtypes"):
        run_op_on(CreateOperator("ONNXAdd", ["A", "B"], ["Y"]), [i8, np.ones(3, np.int16)])
    with pytest.raises(ShapeError, match="ONNXMul.*do not broadcast.*A, B"):
        run_op_on(CreateOperator("ONNXMul", ["A", "B"], ["Y"]), [i8, np.ones(2, np.int8)])
    with pytest.raises(ArgumentError, match="ONNXDiv.*division by zero.*'B'"):
        run_op_on(CreateOperator("ONNXDiv", ["A", "B"], ["Y"]), [i8, np.zeros(3, np.int8)])
    f32 = np.ones(3, np.float32)
    with pytest.raises(TypeMismatchError, match="ONNXBitShift.*'X'"):
        run_op_on(CreateOperator("ONNXBitShift", ["X", "Y"], ["Z"]), [f32, f32])
    with pytest.raises(ArgumentError, match="ONNXPow.*negative integer exponent"):
        run_op_on(CreateOperator("ONNXPow", ["X", "Y"], ["Z"]), [i8, -i8])
