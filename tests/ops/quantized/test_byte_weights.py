"""ByteWeightDequant and GivenTensorByteStringToUInt8Fill: codes on the [min, max] grid against the
float64 formula and Caffe2's float32 steps, string-tensor codes, the fill's three shape sources,
non-UTF-8 bytes, empty outputs, and the errors."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.errors import ArgumentError, ShapeError, TypeMismatchError
from framework.ops.testing import assert_reference_checks, run_op_on


def ref_dequant(codes, lo, hi, shape):
    """min + code * (max - min) / 255, in float64."""
    return (np.float64(lo) + codes.astype(np.float64) * ((np.float64(hi) - np.float64(lo)) / 255.0)).reshape(shape)


@settings(max_examples=30, deadline=None)
@given(
    shape=st.lists(st.integers(0, 4), min_size=0, max_size=3),
    lo=st.floats(-10, 0, width=32),
    span=st.floats(0, 20, width=32),
    seed=st.integers(0, 99),
)
def test_dequant_matches_the_grid(shape, lo, span, seed):
    hi = float(np.float32(lo + span))
    codes = np.random.default_rng(seed).integers(0, 256, int(np.prod(shape))).astype(np.uint8)
    op = CreateOperator("ByteWeightDequant", ["w"], ["y"], shape=shape, min=lo, max=hi)
    (y,) = assert_reference_checks(op, [codes], lambda c: ref_dequant(c, lo, hi, shape), threshold=1e-5)
    assert y.dtype == np.float32 and y.shape == tuple(shape)
    # Caffe2's float32 steps: step = float((max - min) / 255.0), y = float(code * step) + min
    step = np.float32(float(np.float32(np.float32(hi) - np.float32(lo))) / 255.0)
    exact = (codes.astype(np.float32) * step + np.float32(lo)).reshape(shape)
    np.testing.assert_allclose(y, exact, rtol=2e-7, atol=2e-7)


def test_defaults_and_endpoints():
    (y,) = run_op_on(CreateOperator("ByteWeightDequant", ["w"], ["y"], shape=[3]), [np.array([0, 255, 51], np.uint8)])
    np.testing.assert_allclose(y, [-3.0, 3.0, -3.0 + 51 * 6 / 255], rtol=1e-6)
    (s,) = run_op_on(CreateOperator("ByteWeightDequant", ["w"], ["y"]), [np.array([255], np.uint8)])
    assert s.shape == () and s == np.float32(3.0)  # no shape: a scalar, one byte


def test_codes_from_a_string_tensor():
    raw = bytes([0, 128, 255, 7])
    strings = np.array([raw, b"ignored"], dtype=object)
    op = CreateOperator("ByteWeightDequant", ["w"], ["y"], shape=[2, 2], min=0.0, max=1.0)
    (y,) = run_op_on(op, [strings])
    np.testing.assert_allclose(y, ref_dequant(np.frombuffer(raw, np.uint8), 0.0, 1.0, (2, 2)), rtol=1e-6)


def test_dequant_errors_name_op_and_blob():
    op = CreateOperator("ByteWeightDequant", ["w"], ["y"], shape=[2, 3])
    with pytest.raises(ShapeError, match=r"ByteWeightDequant.*'w'.*5 bytes.*6 elements"):
        run_op_on(op, [np.zeros(5, np.uint8)])
    with pytest.raises(TypeMismatchError, match="'w'.*float32"):
        run_op_on(op, [np.zeros(6, np.float32)])
    with pytest.raises(TypeMismatchError, match="'w'"):
        run_op_on(op, [np.array([], dtype=object)])
    with pytest.raises(ArgumentError, match="shape"):
        run_op_on(CreateOperator("ByteWeightDequant", ["w"], ["y"], shape=[-1]), [np.zeros(1, np.uint8)])
    with pytest.raises(ArgumentError, match="finite"):
        run_op_on(CreateOperator("ByteWeightDequant", ["w"], ["y"], max=float("nan")), [np.zeros(1, np.uint8)])


@settings(max_examples=30, deadline=None)
@given(raw=st.binary(min_size=0, max_size=12), data=st.data())
def test_byte_string_fill(raw, data):
    n = len(raw)
    shape = data.draw(st.sampled_from([[n], [1, n]] + ([[2, n // 2]] if n % 2 == 0 else [])))
    op = CreateOperator("GivenTensorByteStringToUInt8Fill", [], ["out"], values=[raw], shape=shape)
    expected = np.array(list(raw), dtype=np.uint8).reshape(shape)
    (out,) = assert_reference_checks(op, [], lambda: expected)
    assert out.dtype == np.uint8


def test_byte_string_fill_shape_sources_and_dtype():
    raw = bytes([1, 2, 3, 0xFF, 0x80, 0])  # not UTF-8
    want = np.frombuffer(raw, np.uint8)
    like = CreateOperator("GivenTensorByteStringToUInt8Fill", ["x"], ["out"], values=[raw], extra_shape=[3])
    assert_reference_checks(like, [np.zeros(2, np.float32)], lambda x: want.reshape(2, 3))
    as_shape = CreateOperator("GivenTensorByteStringToUInt8Fill", ["s"], ["out"], values=[raw], input_as_shape=1)
    assert_reference_checks(as_shape, [np.array([3, 2], np.int64)], lambda s: want.reshape(3, 2), check_inference=False)
    typed = CreateOperator("GivenTensorByteStringToUInt8Fill", [], ["out"], values=[raw], shape=[6], dtype="string")
    np.testing.assert_array_equal(run_op_on(typed, [])[0], want)
    # Caffe2's documented example
    val = np.array([1, 2, 3], dtype=np.uint8)
    op = CreateOperator("GivenTensorByteStringToUInt8Fill", [], ["out"], values=[val.tobytes()], shape=val.shape)
    np.testing.assert_array_equal(run_op_on(op, [])[0], val)


def test_byte_string_fill_errors():
    def make(**kw):
        return run_op_on(CreateOperator("GivenTensorByteStringToUInt8Fill", [], ["out"], **kw), [])

    with pytest.raises(ArgumentError, match="GivenTensorByteStringToUInt8Fill.*3 elements.*2 bytes"):
        make(values=[b"ab"], shape=[3])
    with pytest.raises(ArgumentError, match="exactly one byte string"):
        make(values=[b"a", b"b"], shape=[1])
    with pytest.raises(ArgumentError, match="values.*required"):
        make(shape=[0])
    with pytest.raises(ArgumentError, match="undefined"):
        make(values=[b"a"], shape=[1], dtype=0)
    with pytest.raises(ArgumentError, match="dtype"):
        make(values=[b"a"], shape=[1], dtype=2)
    with pytest.raises(ShapeError, match="GivenTensorByteStringToUInt8Fill.*'out'.*4 elements.*3 bytes"):
        op = CreateOperator("GivenTensorByteStringToUInt8Fill", ["x"], ["out"], values=[b"abc"])
        run_op_on(op, [np.zeros(4, np.float32)])
