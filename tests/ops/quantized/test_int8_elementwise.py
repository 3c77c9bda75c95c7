"""Int8Relu / Int8LeakyRelu / Int8Sigmoid / Int8Add / Int8AddRelu / Int8Sum / Int8SumRelu against scalar
references of QNNPACK's arithmetic (clamp.c, leaky-relu.c, sigmoid.c, add.c + requantization.h), each also
checked against the float function on dequantized values (within the steps Caffe2's int8 tests allow)."""

from __future__ import annotations

import math
import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.errors import FrameworkError
from framework.memory.workspace import Workspace
from tests.ops.quantized.int8_helpers import check_int8, q8, run

f32 = np.float32
shapes = st.lists(st.integers(0, 4), min_size=1, max_size=3).map(tuple)
scales = st.sampled_from([0.0078125, 0.01, 0.02, 0.05, 0.1, 0.5])


def codes(shape, seed):
    return np.random.default_rng(seed).integers(0, 256, shape).astype(np.uint8)


def dq(c, scale, zp):
    return (c.astype(np.int64) - zp) * float(f32(scale))


def exponent(v):
    return (struct.unpack("<I", struct.pack("<f", v))[0] >> 23) - 127


def ref_add(a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp, relu):
    """QNNPACK's add, one element at a time in Python integers."""
    ra, rb = f32(f32(a_scale) / f32(y_scale)), f32(f32(b_scale) / f32(y_scale))
    shift = 21 - exponent(max(ra, rb))
    ma, mb = round(float(ra) * 2.0**shift), round(float(rb) * 2.0**shift)  # exact products; ties to even
    out = np.empty(a.shape, np.uint8)
    for idx in np.ndindex(a.shape):
        acc = ma * (int(a[idx]) - a_zp) + mb * (int(b[idx]) - b_zp)
        q, r = divmod(abs(acc), 1 << shift)  # round half away from zero
        v = q + (1 if 2 * r >= (1 << shift) else 0)
        v = v if acc >= 0 else -v
        out[idx] = min(max(v + y_zp, y_zp if relu else 0), 255)
    return out


@settings(max_examples=25, deadline=None)
@given(shape=shapes, zp=st.integers(0, 255), scale=scales, seed=st.integers(0, 2**16))
def test_relu(shape, zp, scale, seed):
    x = codes(shape, seed)
    op = CreateOperator("Int8Relu", ["X"], ["Y"], Y_scale=scale, Y_zero_point=zp)
    expected = np.array([max(int(v), zp) for v in x.reshape(-1)], np.uint8).reshape(shape)
    check_int8(op, [q8(x, scale, zp)], [(expected, scale, zp)])


def test_relu_in_place_and_parameter_check():
    ws = Workspace()
    ws.feed_blob("X", q8(np.array([0, 100, 200]), 0.5, 128))
    ws.run_operator_once(CreateOperator("Int8Relu", ["X"], ["X"], Y_scale=0.5, Y_zero_point=128))
    assert ws.get_blob("X")._obj.numpy().tolist() == [128, 128, 200]
    with pytest.raises(FrameworkError, match="must equal the input's quantization"):
        ws.run_operator_once(CreateOperator("Int8Relu", ["X"], ["Y"], Y_scale=1.0, Y_zero_point=128))
    assert not ws.has_blob("Y") or ws.get_blob("Y").is_empty


@settings(max_examples=25, deadline=None)
@given(shape=shapes, zp=st.integers(0, 255), scale=scales, seed=st.integers(0, 2**16))
def test_sigmoid(shape, zp, scale, seed):
    x = codes(shape, seed)
    expected = np.empty(shape, np.uint8)
    for idx in np.ndindex(shape):
        v = f32(scale) * f32(int(x[idx]) - zp)
        e = f32(math.exp(-float(v))) if -float(v) < 700 else f32(np.inf)
        s = f32(256.0) / (f32(1.0) + e)
        expected[idx] = int(np.rint(min(max(s, f32(0)), f32(255))))
    op = CreateOperator("Int8Sigmoid", ["X"], ["Y"], Y_scale=1 / 256, Y_zero_point=0)
    (y,) = check_int8(op, [q8(x, scale, zp)], [(expected, 1 / 256, 0)])
    real = 1 / (1 + np.exp(-dq(x, scale, zp)))
    assert np.all(np.abs(y.numpy() / 256 - np.minimum(real, 255 / 256)) <= 0.5 / 256 + 1e-6)


def test_sigmoid_needs_qnnpacks_output_quantization():
    ws = Workspace()
    ws.feed_blob("X", q8(np.arange(4), 0.1, 2))
    with pytest.raises(FrameworkError, match="1/256"):
        ws.run_operator_once(CreateOperator("Int8Sigmoid", ["X"], ["Y"]))


@settings(max_examples=25, deadline=None)
@given(
    shape=shapes,
    x_zp=st.integers(0, 255),
    y_zp=st.integers(0, 255),
    x_scale=scales,
    y_scale=scales,
    alpha=st.sampled_from([0.01, 0.1, 0.3, 0.99]),
    seed=st.integers(0, 2**16),
)
def test_leaky_relu(shape, x_zp, y_zp, x_scale, y_scale, alpha, seed):
    x = codes(shape, seed)
    ratio = f32(f32(x_scale) / f32(y_scale))
    expected = np.empty(shape, np.uint8)
    for idx in np.ndindex(shape):
        v = ratio * f32(int(x[idx]) - x_zp)
        y = v * f32(alpha) if v < 0 else v
        y = min(max(y, f32(-y_zp)), f32(255 - y_zp))
        expected[idx] = int(np.rint(y)) + y_zp
    op = CreateOperator("Int8LeakyRelu", ["X"], ["Y"], alpha=alpha, Y_scale=y_scale, Y_zero_point=y_zp)
    (y,) = check_int8(op, [q8(x, x_scale, x_zp)], [(expected, y_scale, y_zp)])
    real = dq(x, x_scale, x_zp)
    real = np.where(real < 0, real * alpha, real)
    inside = (real / y_scale + y_zp > 0.5) & (real / y_scale + y_zp < 254.5)
    assert np.all(np.abs(dq(y.numpy(), y_scale, y_zp) - real)[inside] <= 0.5 * y_scale + 1e-5)


def test_leaky_relu_alpha_must_be_in_0_1():
    ws = Workspace()
    ws.feed_blob("X", q8(np.arange(4), 0.1, 2))
    with pytest.raises(FrameworkError, match="alpha"):
        ws.run_operator_once(CreateOperator("Int8LeakyRelu", ["X"], ["Y"], alpha=1.5))


@pytest.mark.parametrize("op_type,relu", [("Int8Add", False), ("Int8AddRelu", True), ("Int8Sum", False),
                                          ("Int8SumRelu", True)])  # fmt: skip
@settings(max_examples=15, deadline=None)
@given(
    shape=shapes,
    a_zp=st.integers(0, 255),
    b_zp=st.integers(0, 255),
    y_zp=st.integers(0, 255),
    a_scale=scales,
    b_scale=scales,
    y_scale=scales,
    seed=st.integers(0, 2**16),
)
def test_add(op_type, relu, shape, a_zp, b_zp, y_zp, a_scale, b_scale, y_scale, seed):
    a, b = codes(shape, seed), codes(shape, seed + 1)
    op = CreateOperator(op_type, ["A", "B"], ["C"], Y_scale=y_scale, Y_zero_point=y_zp)
    expected = ref_add(a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp, relu)
    (y,) = check_int8(op, [q8(a, a_scale, a_zp), q8(b, b_scale, b_zp)], [(expected, y_scale, y_zp)])
    real = dq(a, a_scale, a_zp) + dq(b, b_scale, b_zp)
    if relu:
        real = np.maximum(real, 0)
    inside = (real / y_scale + y_zp > 1) & (real / y_scale + y_zp < 254)
    assert np.all(np.abs(dq(y.numpy(), y_scale, y_zp) - real)[inside] <= y_scale)  # Caffe2's test: < 2 * scale


def test_add_ties_round_away_from_zero():
    # ra = rb = 0.5 (shift 22): acc = 2**21 * (a - zp) -> (a - zp) / 2, ties away from zero
    a = np.array([1, 3, 5, 0, 0], np.uint8)
    b = np.zeros(5, np.uint8)
    op = CreateOperator("Int8Add", ["A", "B"], ["C"], Y_scale=1.0, Y_zero_point=100)
    (y,) = check_int8(op, [q8(a, 0.5, 0), q8(b, 0.5, 0)], [(np.array([101, 102, 103, 100, 100], np.uint8), 1, 100)])
    op = CreateOperator("Int8Add", ["A", "B"], ["C"], Y_scale=1.0, Y_zero_point=100)
    neg = np.array([9, 7, 5, 10, 10], np.uint8)  # a - 10 = -1, -3, -5
    check_int8(op, [q8(neg, 0.5, 10), q8(b, 0.5, 0)], [(np.array([99, 98, 97, 100, 100], np.uint8), 1, 100)])


def test_add_errors():
    ws = Workspace()
    ws.feed_blob("A", q8(np.zeros((2, 3))))
    ws.feed_blob("B", q8(np.zeros((3, 2))))
    ws.feed_blob("F", np.zeros((2, 3), f32))
    with pytest.raises(FrameworkError, match="broadcast semantics is not supported"):
        ws.run_operator_once(CreateOperator("Int8Add", ["A", "B"], ["C"], Y_scale=0.01))
    with pytest.raises(FrameworkError, match="'F'.*holds a Tensor"):
        ws.run_operator_once(CreateOperator("Int8Add", ["A", "F"], ["C"], Y_scale=0.01))
    with pytest.raises(FrameworkError, match=r"2\*\*-14"):
        ws.run_operator_once(CreateOperator("Int8Add", ["A", "A"], ["C"], Y_scale=1000.0))
    with pytest.raises(FrameworkError, match="exactly 2 inputs"):
        ws.run_operator_once(CreateOperator("Int8Sum", ["A", "A", "A"], ["C"], Y_scale=0.01))
    assert not ws.has_blob("C") or ws.get_blob("C").is_empty


def test_add_in_place():
    ws, _, _ = run(CreateOperator("Int8Add", ["A", "B"], ["A"], Y_scale=0.02, Y_zero_point=5),
                   [q8(np.array([10, 20]), 0.01, 0), q8(np.array([30, 40]), 0.01, 0)])  # fmt: skip
    got = ws.get_blob("A")._obj
    assert got.numpy().tolist() == [25, 35] and got.scale == f32(0.02) and got.zero_point == 5
    assert math.isclose(float(got.scale), 0.02, rel_tol=1e-6)


def ref_softmax(x, scale):
    n = x.shape[0]
    rows = x.reshape(n, -1)
    d = rows.shape[1]
    q = min((2**32 - 1) / d, 8388607.0)
    table = [int(np.rint(q * math.exp((i - 255) * float(f32(scale))))) for i in range(256)]
    out = np.empty(rows.shape, np.uint8)
    for r in range(n):
        m = int(rows[r].max())
        e = [table[int(v) + 255 - m] for v in rows[r]]
        total = sum(e)
        out[r] = [min((v * 256 + total // 2) // total, 255) for v in e]
    return out.reshape(x.shape)


@settings(max_examples=25, deadline=None)
@given(
    shape=st.lists(st.integers(1, 4), min_size=1, max_size=3).map(tuple),
    scale=scales,
    zp=st.integers(0, 255),
    seed=st.integers(0, 2**16),
)
def test_softmax(shape, scale, zp, seed):
    x = codes(shape, seed)
    op = CreateOperator("Int8Softmax", ["X"], ["Y"], Y_scale=1 / 256, Y_zero_point=0)
    (y,) = check_int8(op, [q8(x, scale, zp)], [(ref_softmax(x, scale), 1 / 256, 0)])
    real = dq(x, scale, zp).reshape(shape[0], -1)
    real = np.exp(real - real.max(axis=1, keepdims=True))
    real = (real / real.sum(axis=1, keepdims=True)).reshape(shape)
    assert np.all(np.abs(y.numpy() / 256 - np.minimum(real, 255 / 256)) <= 1.5 / 256)


def test_softmax_empty_batch_and_errors():
    op = CreateOperator("Int8Softmax", ["X"], ["Y"], Y_scale=1 / 256, Y_zero_point=0)
    check_int8(op, [q8(np.zeros((0, 3)), 0.1, 0)], [(np.zeros((0, 3), np.uint8), 1 / 256, 0)])
    ws = Workspace()
    ws.feed_blob("X", q8(np.zeros((2, 3)), 0.1, 0))
    with pytest.raises(FrameworkError, match="1/256"):
        ws.run_operator_once(CreateOperator("Int8Softmax", ["X"], ["Y"]))
    with pytest.raises(FrameworkError, match="only axis 1"):
        ws.run_operator_once(CreateOperator("Int8Softmax", ["X"], ["Y"], axis=0, Y_scale=1 / 256))


def test_leaky_relu_in_place_matches_out_of_place():
    x = codes((3, 4), 7)
    op = CreateOperator("Int8LeakyRelu", ["X"], ["Y"], alpha=0.2, Y_scale=0.1, Y_zero_point=100)
    _, _, (expected,) = run(op, [q8(x, 0.1, 100)])
    ws, _, _ = run(CreateOperator("Int8LeakyRelu", ["X"], ["X"], alpha=0.2, Y_scale=0.1, Y_zero_point=100),
                   [q8(x, 0.1, 100)])  # fmt: skip
    np.testing.assert_array_equal(ws.get_blob("X")._obj.numpy(), expected.numpy())
