"""Reshape, Flatten, FlattenToVec, ResizeLike, ExpandDims, Squeeze, Transpose,
Tile, Shape, Size: numpy references, inference, gradients, in-place, errors."""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.errors import ArgumentError, FrameworkError, GradientError, ShapeError
from framework.memory.workspace import Workspace
from framework.ops import create_operator, get_gradient_for_op
from framework.ops.testing import arrays, assert_gradient_checks, assert_reference_checks, shapes
from tests.ops.helpers import float_arrays, run_fed

int_arrays = shapes(min_dims=1, max_dims=3, max_side=4).flatmap(lambda s: arrays(s, np.int32))


# -- Reshape ----------------------------------------------------------------------------------
@st.composite
def reshape_case(draw):
    x = draw(float_arrays)
    kind = draw(st.sampled_from(["perm", "minus", "zero"]))
    if kind == "zero":  # a 0 copies the input dim at the same position
        new = list(x.shape)
        new[draw(st.integers(0, x.ndim - 1))] = 0
        return x, new
    new = list(draw(st.permutations(x.shape)))
    if draw(st.booleans()):
        new.append(1)
    if kind == "minus":
        new[draw(st.integers(0, len(new) - 1))] = -1
    return x, new


def _np_reshape(x, new):
    target = [x.shape[k] if d == 0 else d for k, d in enumerate(new)]
    return x.reshape(target)


@given(case=reshape_case())
def test_reshape_by_argument(case):
    x, new = case
    op = CreateOperator("Reshape", ["X"], ["Y", "old"], shape=new)
    assert_reference_checks(op, [x], lambda x: [_np_reshape(x, new), np.array(x.shape, np.int64)])


@given(case=reshape_case())
def test_reshape_by_input_and_gradient(case):
    x, new = case
    op = CreateOperator("Reshape", ["X", "S"], ["Y", "old"])
    s = np.array(new, np.int64)
    out = assert_reference_checks(
        op, [x, s], lambda x, s: [_np_reshape(x, new), np.array(x.shape, np.int64)], check_inference=False
    )
    assert out[1].dtype == np.int64
    assert_gradient_checks(op, [x, s], 0, check_inference=False)


def test_reshape_in_place_keeps_the_buffer():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    ws = Workspace()
    ws.feed_blob("X", x)
    before = ws.get_blob("X")._obj.storage
    create_operator(CreateOperator("Reshape", ["X"], ["X", "old"], shape=[2, -1]), ws).run()
    assert ws.get_blob("X")._obj.storage is before
    np.testing.assert_array_equal(ws.fetch_blob("X"), x.reshape(2, 6))
    np.testing.assert_array_equal(ws.fetch_blob("old"), [3, 4])


def test_reshape_gradient_op_shape():
    ops, g = get_gradient_for_op(CreateOperator("Reshape", ["X"], ["Y", "old"], shape=[-1]), ["Y_grad", None])
    assert [o.type for o in ops] == ["Reshape"]
    assert list(ops[0].input) == ["Y_grad", "old"] and list(ops[0].output) == ["X_grad", "_X_grad_dims"]
    assert not any(a.name == "shape" for a in ops[0].arg)
    assert g == ["X_grad"]


def test_reshape_empty_and_int():
    op = CreateOperator("Reshape", ["X"], ["Y", "old"], shape=[3, 0])
    assert_reference_checks(op, [np.zeros((3, 0), np.int32)], lambda x: [x, np.array([3, 0], np.int64)])


@pytest.mark.parametrize(
    "old,shape,expected",
    [
        ((0, 3), [0, -1], (0, 0)),  # an empty input infers -1 as 0
        ((2, 0), [-1, 0], (0, 0)),
        ((0,), [0, -1], (0, 0)),
        ((4, 0), [1, -1], (1, 0)),
        ((0, 0), [0, 0, 0], (0, 0, 0)),  # a 0 past the input's rank stays 0
        ((4, 2, 1), [0, 0, 0], (4, 2, 1)),
        ((4, 2, 1), [0, -1, 0], (4, 2, 1)),
        ((4, 3, 2), [-1, 0], (8, 3)),
        ((), [1, -1], (1, 1)),
        # Caffe2 copies dims for 0s only when the input has elements: an empty input keeps them 0
        ((1, 0), [0], (0,)),  # the gradient of reshaping a [0] tensor to [1, -1]
        ((3, 0), [0, 5], (0, 5)),
    ],
)
@pytest.mark.parametrize("from_input", [False, True])
def test_reshape_zero_dims_as_caffe2(old, shape, expected, from_input):
    x = np.arange(math.prod(old), dtype=np.float32).reshape(old)
    if from_input:
        op = CreateOperator("Reshape", ["X", "S"], ["Y", "old"])
        inputs = [x, np.array(shape, np.int64)]
    else:
        op = CreateOperator("Reshape", ["X"], ["Y", "old"], shape=shape)
        inputs = [x]
    # (the shape inferred from an input blob is unknown before the run)
    reference = lambda x, *s: [x.reshape(expected), np.array(old, np.int64)]  # noqa: E731
    assert_reference_checks(op, inputs, reference, check_inference=not from_input)


@pytest.mark.parametrize(
    "kwargs,inputs,match,exc",
    [
        (dict(), ["X"], "'shape' is missing", ArgumentError),
        (dict(shape=[-1, -1]), ["X"], "more than one missing", ArgumentError),
        (dict(shape=[2]), ["X", "S"], "do not pass the argument 'shape'", ArgumentError),
        (dict(shape=[5]), ["X"], r"does not agree with the input \(2, 3\)", ShapeError),
        (dict(shape=[4, -1]), ["X"], "does not agree", ShapeError),
        (dict(shape=[1, 1, 0]), ["X"], "non-empty input .* to zero size", ShapeError),
    ],
)
def test_reshape_errors(kwargs, inputs, match, exc):
    op = CreateOperator("Reshape", inputs, ["Y", "old"], name="rs", **kwargs)
    with pytest.raises(exc, match=match) as e:
        run_fed(op, {"X": np.zeros((2, 3), np.float32), "S": np.array([6], np.int64)})
    assert 'Reshape "rs"' in str(e.value)


# -- Flatten, FlattenToVec, ResizeLike -------------------------------------------------------
@given(x=float_arrays, data=st.data())
def test_flatten(x, data):
    axis = data.draw(st.integers(0, x.ndim))
    op = CreateOperator("Flatten", ["X"], ["Y"], axis=axis)
    ref = x.reshape(math.prod(x.shape[:axis]), math.prod(x.shape[axis:]))
    assert_reference_checks(op, [x], lambda x: [ref])
    assert_gradient_checks(op, [x], 0)


@given(x=st.one_of(float_arrays, int_arrays))
def test_flatten_to_vec(x):
    op = CreateOperator("FlattenToVec", ["X"], ["Y"])
    assert_reference_checks(op, [x], lambda x: [x.ravel()])
    if x.dtype == np.float32:
        assert_gradient_checks(op, [x], 0)


def test_flatten_errors():
    with pytest.raises(ShapeError, match=r"Flatten.*'X' \(2,\) must be >= axis 3"):
        run_fed(CreateOperator("Flatten", ["X"], ["Y"], axis=3), {"X": np.zeros(2, np.float32)})
    with pytest.raises(ShapeError, match="FlattenToVec.*scalar"):
        run_fed(CreateOperator("FlattenToVec", ["X"], ["Y"]), {"X": np.array(1.0, np.float32)})


@given(x=float_arrays)
def test_resize_like(x):
    like = np.zeros(x.size, np.int32)
    op = CreateOperator("ResizeLike", ["X", "L"], ["Y"])
    assert_reference_checks(op, [x, like], lambda x, like: [x.reshape(-1)])
    with pytest.raises(ShapeError, match="differ in size"):
        run_fed(op, {"X": x, "L": np.zeros(x.size + 1)})


# -- ExpandDims / Squeeze ---------------------------------------------------------------------
@given(x=float_arrays, data=st.data())
def test_expand_dims_and_squeeze_round_trip(x, data):
    dims = sorted(data.draw(st.sets(st.integers(0, x.ndim), min_size=1, max_size=3)))
    dims = [d for k, d in enumerate(dims) if d <= x.ndim + k]
    expanded = x
    for d in dims:
        expanded = np.expand_dims(expanded, d)
    op = CreateOperator("ExpandDims", ["X"], ["Y"], dims=dims)
    assert_reference_checks(op, [x], lambda x: [expanded])
    assert_gradient_checks(op, [x], 0)
    sq = CreateOperator("Squeeze", ["Y"], ["Z"], dims=dims)
    assert_reference_checks(sq, [expanded], lambda y: [x])
    assert_gradient_checks(sq, [expanded], 0)


def test_expand_squeeze_in_place():
    ws, _ = run_fed(CreateOperator("ExpandDims", ["X"], ["X"], dims=[0, 3]), {"X": np.ones((2, 3), np.int64)})
    assert ws.fetch_blob("X").shape == (1, 2, 3, 1)
    create_operator(CreateOperator("Squeeze", ["X"], ["X"], dims=[3, 0]), ws).run()
    assert ws.fetch_blob("X").shape == (2, 3)


def test_expand_squeeze_errors():
    with pytest.raises(ArgumentError, match="'dims' must be provided"):
        run_fed(CreateOperator("Squeeze", ["X"], ["Y"]), {"X": np.zeros((1,))})
    with pytest.raises(ArgumentError, match="non-negative"):
        run_fed(CreateOperator("ExpandDims", ["X"], ["Y"], dims=[-1]), {"X": np.zeros((1,))})
    with pytest.raises(ShapeError, match=r"Squeeze.*dimension 1 of input 'X' \(1, 2\) must be 1"):
        run_fed(CreateOperator("Squeeze", ["X"], ["Y"], dims=[1]), {"X": np.zeros((1, 2))})
    with pytest.raises(ShapeError, match="needs at least 4 dimensions"):
        run_fed(CreateOperator("Squeeze", ["X"], ["Y"], dims=[3]), {"X": np.zeros((1, 2))})
    with pytest.raises(ShapeError, match="ExpandDims.*needs at least"):
        run_fed(CreateOperator("ExpandDims", ["X"], ["Y"], dims=[5]), {"X": np.zeros((1, 2))})


# -- Transpose ------------------------------------------------------------------------------------
@given(x=st.one_of(float_arrays, int_arrays), data=st.data())
def test_transpose(x, data):
    axes = data.draw(st.one_of(st.just(None), st.permutations(range(x.ndim))))
    op = CreateOperator("Transpose", ["X"], ["Y"], axes=axes)
    ref = np.transpose(x, axes) if axes is not None else x.T
    assert_reference_checks(op, [x], lambda x: [ref])
    if x.dtype == np.float32:
        assert_gradient_checks(op, [x], 0)


def test_transpose_errors():
    with pytest.raises(ArgumentError, match="permutation"):
        run_fed(CreateOperator("Transpose", ["X"], ["Y"], axes=[0, 0]), {"X": np.zeros((2, 2))})
    with pytest.raises(ShapeError, match=r"Transpose.*do not match input 'X' \(2, 2\)"):
        run_fed(CreateOperator("Transpose", ["X"], ["Y"], axes=[0, 2, 1]), {"X": np.zeros((2, 2))})


# -- Tile ----------------------------------------------------------------------------------------------
@given(x=float_arrays, tiles=st.integers(0, 3), data=st.data())
def test_tile(x, tiles, data):
    axis = data.draw(st.integers(-x.ndim, x.ndim - 1))
    reps = [1] * x.ndim
    reps[axis] = tiles
    op = CreateOperator("Tile", ["X"], ["Y"], tiles=tiles, axis=axis)
    assert_reference_checks(op, [x], lambda x: [np.tile(x, reps)])
    if tiles:
        assert_gradient_checks(op, [x], 0)


def test_tile_from_inputs_and_gradient():
    x = np.arange(6, dtype=np.float64).reshape(2, 3)
    op = CreateOperator("Tile", ["X", "t", "a"], ["Y"])
    t, a = np.array(2, np.int32), np.array(1, np.int32)
    assert_reference_checks(op, [x, t, a], lambda x, t, a: [np.tile(x, (1, 2))], check_inference=False)
    assert_gradient_checks(op, [x, t, a], 0, check_inference=False)
    ops, _ = get_gradient_for_op(op, ["Y_grad"])
    assert list(ops[0].input) == ["Y_grad", "t", "a"]


def test_tile_errors():
    with pytest.raises(ShapeError, match="Tile.*axis 2 is out of range"):
        run_fed(CreateOperator("Tile", ["X"], ["Y"], tiles=2, axis=2), {"X": np.zeros((2, 2))})
    with pytest.raises(ShapeError, match="'tiles' must be >= 0"):
        run_fed(CreateOperator("Tile", ["X"], ["Y"], tiles=-1), {"X": np.zeros((2, 2))})


# -- Shape, Size -------------------------------------------------------------------------------------
@given(x=st.one_of(float_arrays, int_arrays))
def test_shape_and_size(x):
    assert_reference_checks(CreateOperator("Shape", ["X"], ["S"]), [x], lambda x: [np.array(x.shape, np.int64)])
    assert_reference_checks(CreateOperator("Size", ["X"], ["S"]), [x], lambda x: [np.array(x.size, np.int64)])
    axes = [x.ndim - 1, 0]
    op = CreateOperator("Shape", ["X"], ["S"], axes=axes)
    assert_reference_checks(op, [x], lambda x: [np.array([x.shape[a] for a in axes], np.int64)])


def test_shape_of_empty_and_scalar():
    assert_reference_checks(CreateOperator("Shape", ["X"], ["S"]), [np.zeros((0, 2))], lambda x: [np.array([0, 2])])
    assert_reference_checks(CreateOperator("Size", ["X"], ["S"]), [np.float32(3)], lambda x: [np.array(1)])


@pytest.mark.parametrize("op_type", ["Shape", "Size"])
def test_shape_size_must_not_be_differentiated(op_type):
    with pytest.raises(GradientError, match="should not"):
        get_gradient_for_op(CreateOperator(op_type, ["X"], ["S"]), ["S_grad"])


def test_errors_name_the_op_on_run():
    with pytest.raises(FrameworkError, match=r'op Shape "sh".*axis 5'):
        run_fed(CreateOperator("Shape", ["X"], ["S"], name="sh", axes=[5]), {"X": np.zeros((2,))})


def test_reshape_empty_input_to_a_non_empty_shape_is_refused():
    op = CreateOperator("Reshape", ["X"], ["Y", "old"], shape=[3])
    with pytest.raises(ShapeError, match="does not agree with the empty input"):
        run_fed(op, {"X": np.zeros((0,), np.float32)})


def test_reshape_gradient_of_an_empty_tensor_gives_its_shape_back():
    ws = Workspace()
    ws.feed_blob("X", np.zeros((0,), np.float32))
    fwd = CreateOperator("Reshape", ["X"], ["Y", "old"], shape=[1, -1])
    create_operator(fwd, ws).run()
    assert ws.fetch_blob("Y").shape == (1, 0)
    (gop,), g_in = get_gradient_for_op(fwd, ["dY", None])
    ws.feed_blob("dY", np.zeros((1, 0), np.float32))
    create_operator(gop, ws).run()
    assert ws.fetch_blob(g_in[0]).shape == (0,)
