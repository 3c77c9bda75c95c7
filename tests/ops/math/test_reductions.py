"""Reductions and their gradients."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.errors import FrameworkError, GradientError, ShapeError, TypeMismatchError
from framework.ops import get_gradient_for_op
from framework.ops.testing import arrays, assert_gradient_checks, assert_reference_checks, run_op_on, shapes

NP = {"Sum": np.sum, "Mean": np.mean, "Max": np.max, "Min": np.min}
REDUCE = {"ReduceSum": "Sum", "ReduceMean": "Mean", "ReduceMax": "Max", "ReduceMin": "Min"}
FRONT_BACK = {
    "ReduceFrontSum": ("Sum", True),
    "ReduceFrontMean": ("Mean", True),
    "ReduceFrontMax": ("Max", True),
    "ReduceBackSum": ("Sum", False),
    "ReduceBackMean": ("Mean", False),
    "ReduceBackMax": ("Max", False),
}


def _distinct(shape, seed):
    """float64 values without ties (max/min gradients are ill-defined at ties)."""
    n = int(np.prod(shape))
    return (np.random.RandomState(seed).permutation(n).reshape(shape) * 0.1 - 0.3 * n / 10).astype(np.float64)


@st.composite
def shape_and_axes(draw, min_dims=1):
    shape = draw(shapes(min_dims, 4, 1, 4))
    axes = draw(
        st.none()
        | st.lists(
            st.integers(-len(shape), len(shape) - 1),
            min_size=1,
            max_size=len(shape),
            unique_by=lambda a: a % len(shape),
        )
    )
    return shape, axes


@pytest.mark.parametrize("op_type", list(REDUCE))
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64])
@given(sa=shape_and_axes(), keepdims=st.sampled_from([0, 1]), data=st.data())
@settings(max_examples=10)
def test_reduce(op_type, dtype, sa, keepdims, data):
    kind = REDUCE[op_type]
    if kind == "Mean" and np.dtype(dtype).kind != "f":
        return
    shape, axes = sa
    x = data.draw(arrays(shape, dtype))
    kw = {"keepdims": keepdims} if keepdims == 0 else {}
    if axes is not None:
        kw["axes"] = axes
    op = CreateOperator(op_type, ["X"], ["Y"], **kw)
    ax = None if axes is None else tuple(a % len(shape) for a in axes)
    assert_reference_checks(op, [x], lambda x: NP[kind](x, axis=ax, keepdims=bool(keepdims)).astype(dtype))


@pytest.mark.parametrize("op_type", list(REDUCE))
@given(sa=shape_and_axes(), keepdims=st.sampled_from([0, 1]), seed=st.integers(0, 99))
@settings(max_examples=6)
def test_reduce_gradient(op_type, sa, keepdims, seed):
    shape, axes = sa
    kw = {"keepdims": keepdims}
    if axes is not None:
        kw["axes"] = axes
    op = CreateOperator(op_type, ["X"], ["Y"], **kw)
    assert_gradient_checks(op, [_distinct(shape, seed)], 0)


def test_reduce_errors():
    x = np.ones((2, 3), np.float32)
    with pytest.raises(ShapeError, match=r'ReduceSum "r".*axis 2 is out of range'):
        run_op_on(CreateOperator("ReduceSum", ["X"], ["Y"], name="r", axes=[2]), [x])
    with pytest.raises(ShapeError, match=r"ReduceMax.*repeat"):
        run_op_on(CreateOperator("ReduceMax", ["X"], ["Y"], axes=[1, -1]), [x])
    with pytest.raises(TypeMismatchError, match=r"ReduceMean.*'X'.*int32"):
        run_op_on(CreateOperator("ReduceMean", ["X"], ["Y"]), [np.ones(3, np.int32)])


def test_reduce_empty():
    x = np.zeros((0, 3), np.float32)
    assert_reference_checks(
        CreateOperator("ReduceSum", ["X"], ["Y"], axes=[0]), [x], lambda x: np.zeros((1, 3), np.float32)
    )
    assert_reference_checks(
        CreateOperator("ReduceMax", ["X"], ["Y"], axes=[0], keepdims=0), [x], lambda x: np.full(3, -np.inf, np.float32)
    )


# -- Front / Back ---------------------------------------------------------------------------------


def _fb_ref(kind, front, k, x, lengths=None):
    split = k if front else x.ndim - k
    rows, cols = int(np.prod(x.shape[:split])), int(np.prod(x.shape[split:]))
    x2 = x.reshape(rows, cols).astype(np.float64)
    if not front:
        x2 = x2.T
    out = np.empty(x2.shape[1])
    for j in range(x2.shape[1]):
        seg = x2[: (lengths[j] if lengths is not None else x2.shape[0]), j]
        if kind == "Sum":
            out[j] = seg.sum()
        elif kind == "Mean":
            out[j] = seg.mean() if seg.size else 0.0
        else:
            out[j] = seg.max() if seg.size else -np.inf
    return out.reshape(x.shape[k:] if front else x.shape[:split]).astype(x.dtype)


@pytest.mark.parametrize("name", list(FRONT_BACK))
@given(data=st.data())
@settings(max_examples=10)
def test_front_back(name, data):
    kind, front = FRONT_BACK[name]
    shape = data.draw(shapes(1, 4, 1, 4))
    k = data.draw(st.integers(1, len(shape)))
    x = data.draw(arrays(shape, np.float32))
    kw = {} if k == 1 else {"num_reduce_dim": k}
    op = CreateOperator(name, ["X"], ["Y"], **kw)
    assert_reference_checks(op, [x], lambda x: _fb_ref(kind, front, k, x))
    assert_gradient_checks(op, [_distinct(shape, data.draw(st.integers(0, 99)))], 0)


@pytest.mark.parametrize("name", list(FRONT_BACK))
def test_front_back_with_lengths(name):
    kind, front = FRONT_BACK[name]
    x = _distinct((4, 3), 7)
    n_seg = 3 if front else 4
    lengths = np.array([1, 4, 2][:n_seg] if front else [1, 3, 2, 3], dtype=np.int32)
    op = CreateOperator(name, ["X", "L"], ["Y"])
    assert_reference_checks(op, [x, lengths], lambda x, lengths: _fb_ref(kind, front, 1, x, lengths))
    assert_gradient_checks(op, [x, lengths], 0)
    with pytest.raises(ShapeError, match=rf"{name}.*lengths \('L'\)"):
        run_op_on(op, [x, np.ones(7, np.int32)])


def test_front_back_errors():
    with pytest.raises(ShapeError, match=r"ReduceFrontSum.*num_reduce_dim 3"):
        run_op_on(CreateOperator("ReduceFrontSum", ["X"], ["Y"], num_reduce_dim=3), [np.ones((2, 2), np.float32)])


# -- SumElements / SumSqrElements -------------------------------------------------------------------


@pytest.mark.parametrize("op_type", ["SumElements", "SumSqrElements"])
@pytest.mark.parametrize("average", [0, 1])
@given(x=st.builds(lambda s: s, shapes(0, 3, 0, 4)).flatmap(lambda s: arrays(s, np.float32)))
@settings(max_examples=15)
def test_sum_elements(op_type, average, x):
    def ref(x):
        v = (x.astype(np.float64) ** (2 if op_type == "SumSqrElements" else 1)).sum()
        if average and x.size:
            v /= x.size
        return np.array(v, np.float32)

    op = CreateOperator(op_type, ["X"], ["Y"], average=average)
    assert_reference_checks(op, [x], ref)
    if x.size:
        assert_gradient_checks(op, [x], 0)


# -- RowwiseMax / ColwiseMax ------------------------------------------------------------------------


@pytest.mark.parametrize("op_type,axis", [("RowwiseMax", 2), ("ColwiseMax", 1)])
@given(shape=shapes(3, 3, 1, 4), seed=st.integers(0, 99))
@settings(max_examples=10)
def test_rowwise_colwise_max(op_type, axis, shape, seed):
    x = _distinct(shape, seed).astype(np.float32)
    op = CreateOperator(op_type, ["X"], ["Y"])
    assert_reference_checks(op, [x], lambda x: x.max(axis=axis))
    assert_gradient_checks(op, [x], 0)


def test_rowwise_max_needs_3d():
    with pytest.raises(ShapeError, match=r"RowwiseMax.*'X'.*3-D.*\[2, 3\]"):
        run_op_on(CreateOperator("RowwiseMax", ["X"], ["Y"]), [np.ones((2, 3), np.float32)])


# -- ArgMax / ArgMin --------------------------------------------------------------------------------


@pytest.mark.parametrize("op_type,fn", [("ArgMax", np.argmax), ("ArgMin", np.argmin)])
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
@given(shape=shapes(1, 4, 1, 4), keepdims=st.sampled_from([0, 1]), data=st.data())
@settings(max_examples=10)
def test_argmax_argmin(op_type, fn, dtype, shape, keepdims, data):
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    x = data.draw(arrays(shape, dtype))
    kw = {"keepdims": keepdims}
    if axis != -1:
        kw["axis"] = axis
    op = CreateOperator(op_type, ["X"], ["I"], **kw)
    assert_reference_checks(op, [x], lambda x: fn(x, axis=axis, keepdims=bool(keepdims)).astype(np.int64))


def test_argmax_defaults_and_ties():
    x = np.array([[1.0, 3.0, 3.0], [2.0, 2.0, 0.0]], np.float32)
    (i,) = run_op_on(CreateOperator("ArgMax", ["X"], ["I"]), [x])
    np.testing.assert_array_equal(i, [[1], [0]])
    assert i.dtype == np.int64
    with pytest.raises(GradientError, match="should not"):
        get_gradient_for_op(CreateOperator("ArgMax", ["X"], ["I"]), ["I_grad"])


def test_gradient_makers_follow_caffe2():
    ops, _ = get_gradient_for_op(CreateOperator("ReduceMean", ["X"], ["Y"], axes=[0]), ["Y_grad"])
    assert ops[0].type == "ReduceMeanGradient" and list(ops[0].input) == ["Y_grad", "X", "Y"]
    ops, _ = get_gradient_for_op(CreateOperator("ReduceFrontMax", ["X", "L"], ["Y"]), ["Y_grad"])
    assert list(ops[0].input) == ["Y_grad", "X", "Y", "L"]
    ops, _ = get_gradient_for_op(CreateOperator("SumElements", ["X"], ["Y"]), ["Y_grad"])
    assert ops[0].type == "SumElementsGradient" and list(ops[0].input) == ["X", "Y_grad"]
    ops, _ = get_gradient_for_op(CreateOperator("RowwiseMax", ["X"], ["Y"]), ["Y_grad"])
    assert list(ops[0].input) == ["X", "Y", "Y_grad"]


# -- RowWiseArgMax -----------------------------------------------------------------------------------


def _row_argmax_ref(x):
    """Caffe2's loop: a running maximum replaced only by a strictly greater value."""
    out = np.zeros((x.shape[0], 1), np.int32)
    for r, row in enumerate(x):
        best, arg = row[0], 0
        for c in range(1, len(row)):
            if row[c] > best:
                best, arg = row[c], c
        out[r, 0] = arg
    return out


@given(
    x=st.integers(0, 5).flatmap(
        lambda n: st.integers(1, 6).flatmap(
            lambda d: arrays((n, d), np.float32, elements=st.sampled_from([-np.inf, -1.0, 0.0, 2.0, np.nan]))
        )
    )
)
@settings(max_examples=40, deadline=None)
def test_row_wise_arg_max(x):
    (z,) = assert_reference_checks(CreateOperator("RowWiseArgMax", ["X"], ["Z"]), [x], _row_argmax_ref)
    assert z.dtype == np.int32


def test_row_wise_arg_max_errors_and_no_gradient():
    with pytest.raises(FrameworkError, match="RowWiseArgMax.*'X'"):
        run_op_on(CreateOperator("RowWiseArgMax", ["X"], ["Z"]), [np.zeros(3, np.float32)])
    with pytest.raises(FrameworkError, match="RowWiseArgMax.*no columns"):
        run_op_on(CreateOperator("RowWiseArgMax", ["X"], ["Z"]), [np.zeros((2, 0), np.float32)])
    assert get_gradient_for_op(CreateOperator("RowWiseArgMax", ["X"], ["Z"]), ["Z_grad"]) == ([], [None])
