"""Fills: exact values for the deterministic ones, statistics for the random ones,
shape/dtype inference, seeding, and the argument errors."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator, DeviceOption
from framework.errors import ArgumentError, FrameworkError
from framework.memory.workspace import Workspace
from framework.ops import create_operator, get_gradient_for_op
from framework.ops.testing import assert_inferred_shapes, assert_reference_checks, run_op_on, shapes
from framework.proto.framework_pb2 import TensorProto
from tests.ops.helpers import DTYPE_PAIRS

small_shapes = shapes(min_dims=1, max_dims=3, min_side=1, max_side=4)


def _nothing(*_):
    return []


# -- ConstantFill -------------------------------------------------------------------
@given(shape=small_shapes, value=st.floats(-5, 5, width=32))
def test_constant_fill_float_value_gives_float32(shape, value):
    op = CreateOperator("ConstantFill", [], ["Y"], shape=list(shape), value=value)
    assert_reference_checks(op, [], lambda: [np.full(shape, value, dtype=np.float32)], threshold=0)


@given(shape=small_shapes, value=st.integers(-100, 100))
def test_constant_fill_int_value_gives_int64(shape, value):
    op = CreateOperator("ConstantFill", [], ["Y"], shape=list(shape), value=value)
    (y,) = assert_reference_checks(op, [], lambda: [np.full(shape, value, dtype=np.int64)])
    assert y.dtype == np.int64


@pytest.mark.parametrize(
    "dtype,np_dtype",
    DTYPE_PAIRS,
)
def test_constant_fill_dtype_argument(dtype, np_dtype):
    op = CreateOperator("ConstantFill", [], ["Y"], shape=[2, 3], value=1.0, dtype=dtype)
    (y,) = assert_reference_checks(op, [], lambda: [np.ones((2, 3), dtype=np_dtype)])
    assert y.dtype == np_dtype


def test_constant_fill_string():
    op = CreateOperator("ConstantFill", [], ["Y"], shape=[2], value="ab", dtype=TensorProto.STRING)
    (y,) = run_op_on(op, [])
    assert y.dtype == object and list(y) == [b"ab", b"ab"]


@given(x=small_shapes.flatmap(lambda s: st.just(np.zeros(s, np.int32))), extra=st.lists(st.integers(0, 3), max_size=2))
def test_constant_fill_copies_input_shape_plus_extra_shape(x, extra):
    op = CreateOperator("ConstantFill", ["X"], ["Y"], value=2.0, extra_shape=extra)
    assert_reference_checks(op, [x], lambda x: [np.full(x.shape + tuple(extra), 2.0, np.float32)])


def test_constant_fill_input_as_shape():
    op = CreateOperator("ConstantFill", ["S"], ["Y"], value=3, input_as_shape=1, extra_shape=[2])
    out = assert_reference_checks(
        op, [np.array([2, 1], np.int64)], lambda s: [np.full((2, 1, 2), 3, np.int64)], check_inference=False
    )
    assert out[0].shape == (2, 1, 2)


def test_constant_fill_in_place_and_empty():
    ws = Workspace()
    ws.feed_blob("X", np.arange(6, dtype=np.float32).reshape(2, 3))
    op = create_operator(CreateOperator("ConstantFill", ["X"], ["X"], value=0.5), ws)
    op.run()
    np.testing.assert_array_equal(ws.fetch_blob("X"), np.full((2, 3), 0.5, np.float32))
    op = CreateOperator("ConstantFill", [], ["Y"], shape=[0, 3], value=1.0)
    assert_reference_checks(op, [], lambda: [np.zeros((0, 3), np.float32)])


# -- deterministic fills --------------------------------------------------------------
@given(shape=small_shapes)
def test_range_fill(shape):
    op = CreateOperator("RangeFill", [], ["Y"], shape=list(shape))
    n = int(np.prod(shape))
    assert_reference_checks(op, [], lambda: [np.array(range(n), dtype=np.float32).reshape(shape)])


def _diagonal_reference(shape, value, dtype):
    out = np.zeros(int(np.prod(shape)), dtype)
    if len(shape) == 2:
        step = shape[1] + 1
    else:
        step = 1 + sum(shape[0] ** k for k in range(1, len(shape)))
    i = 0
    while i < out.size:
        out[i] = value
        i += step
    return out.reshape(shape)


@given(rows=st.integers(1, 6), cols=st.integers(1, 6), value=st.integers(-3, 3))
def test_diagonal_fill_2d_including_tall(rows, cols, value):
    op = CreateOperator("DiagonalFill", [], ["Y"], shape=[rows, cols], value=value)
    assert_reference_checks(op, [], lambda: [_diagonal_reference((rows, cols), value, np.int64)])


@given(d=st.integers(1, 4), nd=st.integers(3, 4))
def test_diagonal_fill_nd_equal_dims(d, nd):
    op = CreateOperator("DiagonalFill", [], ["Y"], shape=[d] * nd, value=1.5)
    assert_reference_checks(op, [], lambda: [_diagonal_reference((d,) * nd, 1.5, np.float32)])


def test_diagonal_fill_errors():
    with pytest.raises(FrameworkError, match="DiagonalFill.*2-D"):
        run_op_on(CreateOperator("DiagonalFill", [], ["Y"], shape=[3], value=1.0), [])
    with pytest.raises(FrameworkError, match="equal length"):
        run_op_on(CreateOperator("DiagonalFill", [], ["Y"], shape=[2, 2, 3], value=1.0), [])


GIVEN = [
    ("GivenTensorFill", [1.5, -2.0, 3.25, 0.0], np.float32),
    ("GivenTensorDoubleFill", [1.5, -2.0, 3.25, 0.0], np.float64),
    ("GivenTensorIntFill", [1, -2, 3, 0], np.int32),
    ("GivenTensorInt64Fill", [1, -2, 3, 2**40], np.int64),
    ("GivenTensorBoolFill", [1, 0, 1, 1], np.bool_),
]


@pytest.mark.parametrize("op_type,values,dtype", GIVEN)
def test_given_tensor_fills(op_type, values, dtype):
    op = CreateOperator(op_type, [], ["Y"], shape=[2, 2], values=values)
    (y,) = assert_reference_checks(op, [], lambda: [np.array(values).astype(dtype).reshape(2, 2)])
    assert y.dtype == dtype


def test_given_tensor_fill_shape_from_input_and_dtype_arg():
    op = CreateOperator("GivenTensorFill", ["X"], ["Y"], values=[1.0, 2.0, 3.0], dtype=TensorProto.INT64)
    (y,) = assert_reference_checks(op, [np.zeros((3, 1), np.float32)], lambda x: [np.array([[1], [2], [3]])])
    assert y.dtype == np.int64


def test_given_tensor_string_fill_keeps_raw_bytes():
    op = CreateOperator("GivenTensorStringFill", [], ["Y"], shape=[3], values=[b"a", b"\xff\x00", "c"])
    (y,) = run_op_on(op, [])
    assert y.dtype == object and list(y) == [b"a", b"\xff\x00", b"c"]
    assert_inferred_shapes(op, [], [y])  # strict inference parses the non-UTF-8 values too


def test_given_tensor_fill_size_mismatch():
    with pytest.raises(ArgumentError, match=r'GivenTensorFill "g".*3 values'):
        run_op_on(CreateOperator("GivenTensorFill", [], ["Y"], name="g", shape=[2, 2], values=[1.0, 2.0, 3.0]), [])
    op = CreateOperator("GivenTensorFill", ["X"], ["Y"], values=[1.0, 2.0, 3.0])
    with pytest.raises(FrameworkError, match="does not match"):
        run_op_on(op, [np.zeros(2, np.float32)])


# -- random fills -----------------------------------------------------------------------
N = (200, 50)


def _run_random(op):
    return assert_reference_checks(op, [], _nothing)[0]


def test_uniform_fill_statistics():
    y = _run_random(CreateOperator("UniformFill", [], ["Y"], shape=list(N), min=-2.0, max=3.0))
    assert y.dtype == np.float32 and y.shape == N
    assert y.min() >= -2.0 and y.max() < 3.0
    assert abs(y.mean() - 0.5) < 0.1
    assert abs(y.std() - 5 / np.sqrt(12)) < 0.05


def test_uniform_fill_bounds_from_inputs():
    op = CreateOperator("UniformFill", ["X", "lo", "hi"], ["Y"])
    ws = Workspace()
    y = run_op_on(op, [np.zeros((100, 3), np.float32), np.array(5.0, np.float32), np.array(6.0, np.float32)], ws)[0]
    assert y.shape == (100, 3) and y.min() >= 5.0 and y.max() < 6.0
    y = run_op_on(op, [np.zeros((100, 3), np.float32), np.array(6.0, np.float32), np.array(5.0, np.float32)], ws)[0]
    assert y.shape == (0, 3)


def test_uniform_int_fill_is_inclusive():
    y = _run_random(CreateOperator("UniformIntFill", [], ["Y"], shape=[5000], min=-2, max=2))
    assert y.dtype == np.int32
    assert set(np.unique(y).tolist()) == {-2, -1, 0, 1, 2}
    assert abs(y.mean()) < 0.15


def test_gaussian_fill_statistics():
    y = _run_random(CreateOperator("GaussianFill", [], ["Y"], shape=list(N), mean=1.5, std=0.5))
    assert y.dtype == np.float32
    assert abs(y.mean() - 1.5) < 0.03 and abs(y.std() - 0.5) < 0.03


def test_xavier_fill_scale():
    y = _run_random(CreateOperator("XavierFill", [], ["Y"], shape=[400, 12]))
    scale = np.sqrt(3.0 / 12)
    assert y.min() >= -scale and y.max() <= scale
    assert y.max() > 0.9 * scale and y.min() < -0.9 * scale
    assert abs(y.std() - scale / np.sqrt(3)) < 0.02


def test_msra_fill_scale():
    y = _run_random(CreateOperator("MSRAFill", [], ["Y"], shape=[8, 1000]))
    std = np.sqrt(2.0 / 8)  # fan_out = size / dim(1) = 8
    assert abs(y.mean()) < 0.03 and abs(y.std() - std) < 0.03


@pytest.mark.parametrize("op_type", ["UniformFill", "GaussianFill", "XavierFill", "MSRAFill", "UniformIntFill"])
def test_random_fills_are_reproducible_with_a_seed(op_type):
    def run(seed):
        op = CreateOperator(op_type, [], ["Y"], shape=[4, 5], device_option=DeviceOption(random_seed=seed))
        return run_op_on(op, [])[0]

    np.testing.assert_array_equal(run(7), run(7))
    assert not np.array_equal(run(7), run(8))


def test_random_fill_second_run_differs():
    ws = Workspace()
    op = create_operator(CreateOperator("GaussianFill", [], ["Y"], shape=[10], random_seed=3), ws)
    op.run()
    first = ws.fetch_blob("Y").copy()
    op.run()
    assert not np.array_equal(first, ws.fetch_blob("Y"))


# -- errors and gradients ------------------------------------------------------------------
@pytest.mark.parametrize(
    "kwargs,inputs,match",
    [
        (dict(shape=[2], value=1.0), ["X"], "cannot set the 'shape' argument and pass in an input"),
        (dict(extra_shape=[2], value=1.0), [], "extra_shape"),
        (dict(input_as_shape=1, value=1.0), [], "input_as_shape"),
        (dict(shape=[2], value=1.0, dtype=TensorProto.UNDEFINED), [], "undefined"),
        (dict(shape=[2], value=1.0, dtype=99), [], "dtype"),
        (dict(shape=[2], value="x"), [], "unexpected type"),
    ],
)
def test_constant_fill_argument_errors(kwargs, inputs, match):
    ws = Workspace()
    ws.feed_blob("X", np.zeros(2, np.float32))
    with pytest.raises(ArgumentError, match=match) as e:
        create_operator(CreateOperator("ConstantFill", inputs, ["Y"], name="cf", **kwargs), ws)
    assert 'ConstantFill "cf"' in str(e.value)


def test_random_fill_argument_errors():
    ws = Workspace()
    with pytest.raises(ArgumentError, match="UniformFill.*bigger"):
        create_operator(CreateOperator("UniformFill", [], ["Y"], shape=[2], min=1.0, max=0.0), ws)
    with pytest.raises(ArgumentError, match="GaussianFill.*std"):
        create_operator(CreateOperator("GaussianFill", [], ["Y"], shape=[2], std=0.0), ws)
    with pytest.raises(ArgumentError, match="XavierFill.*FLOAT"):
        create_operator(CreateOperator("XavierFill", [], ["Y"], shape=[2], dtype=TensorProto.INT32), ws)
    with pytest.raises(FrameworkError, match="MSRAFill.*2 dimensions"):
        run_op_on(CreateOperator("MSRAFill", [], ["Y"], shape=[3]), [])
    with pytest.raises(FrameworkError, match="1-D integer"):
        run_op_on(CreateOperator("ConstantFill", ["S"], ["Y"], input_as_shape=1), [np.zeros((2, 2), np.int64)])


@pytest.mark.parametrize(
    "op_type",
    ["ConstantFill", "UniformFill", "GaussianFill", "XavierFill", "MSRAFill", "RangeFill", "GivenTensorFill"],
)
def test_fills_have_no_gradient(op_type):
    op = CreateOperator(op_type, ["X"], ["Y"])
    ops, g = get_gradient_for_op(op, ["Y_grad"])
    assert ops == [] and g == [None]


@settings(max_examples=10)
@given(seed=st.integers(0, 2**31 - 1))
def test_same_seed_same_values_through_two_workspaces(seed):
    a = run_op_on(CreateOperator("UniformFill", [], ["Y"], shape=[3], random_seed=seed), [], Workspace())[0]
    b = run_op_on(CreateOperator("UniformFill", [], ["Y"], shape=[3], random_seed=seed), [], Workspace())[0]
    np.testing.assert_array_equal(a, b)


def test_run_once_fills_on_the_first_run_only():
    from framework.memory.workspace import Workspace
    from framework.proto.framework_pb2 import NetDef

    for run_once, expect_same in ((1, True), (0, False)):
        ws = Workspace()
        net = NetDef(name="n", op=[CreateOperator("GaussianFill", [], ["x"], shape=[50], run_once=run_once)])
        n = ws.create_net(net)
        n.run()
        first = ws.fetch_blob("x")
        n.run()
        assert np.array_equal(first, ws.fetch_blob("x")) == expect_same
