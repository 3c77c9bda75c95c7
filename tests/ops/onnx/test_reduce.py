"""ONNX reductions and axis ops (ONNXReduceProd ... ONNXLpNormalization) against references
written here with Python loops / float64, including empty sets, bools and ties."""

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.errors import ArgumentError, TypeMismatchError
from framework.ops.testing import arrays, assert_reference_checks, run_op_on


def _reduce_ref(f, identity):
    """Reduce with ``f`` over the flattened cells of ``axes`` (Python floats), ``identity`` when empty."""

    def ref(x, axes, keep):
        axes = sorted({a % x.ndim for a in axes}) if axes else list(range(x.ndim))
        keep_shape = [1 if i in axes else d for i, d in enumerate(x.shape)]
        out = np.empty(keep_shape, np.float64)
        for idx in itertools.product(*[range(d) for d in keep_shape]):
            sl = tuple(slice(None) if i in axes else idx[i] for i in range(x.ndim))
            vals = [float(v) for v in np.asarray(x[sl]).ravel()]
            out[idx] = f(vals) if vals else identity
        return out if keep else out.reshape([d for i, d in enumerate(x.shape) if i not in axes])

    return ref


def _lse(vals):
    m = max(vals)
    return m + math.log(sum(math.exp(v - m) for v in vals))


REDUCE = {
    "ONNXReduceProd": (_reduce_ref(math.prod, 1.0), st.floats(-2, 2, width=32)),
    "ONNXReduceLogSum": (_reduce_ref(lambda v: math.log(sum(v)), -math.inf), st.floats(0.125, 4, width=32)),
    "ONNXReduceLogSumExp": (_reduce_ref(_lse, -math.inf), st.floats(-50, 50, width=32)),
    "ONNXReduceMax": (_reduce_ref(max, -math.inf), st.floats(-9, 9, width=32)),
    "ONNXReduceMin": (_reduce_ref(min, math.inf), st.floats(-9, 9, width=32)),
}


@pytest.mark.parametrize("op_type", list(REDUCE))
@given(data=st.data())
@settings(max_examples=12, deadline=None)
def test_float_reductions_including_empty_sets(op_type, data):
    ref, elements = REDUCE[op_type]
    shape = data.draw(st.lists(st.integers(0, 3), min_size=1, max_size=3))
    x = data.draw(arrays(shape, np.float32, elements=elements))
    axes = data.draw(st.lists(st.integers(-len(shape), len(shape) - 1), max_size=2, unique=True))
    keep = data.draw(st.sampled_from([0, 1]))
    op = CreateOperator(op_type, ["X"], ["Y"], axes=axes, keepdims=keep)
    assert_reference_checks(op, [x], lambda x: ref(x, axes, keep).astype(np.float32), threshold=1e-4)


def test_bool_and_integer_max_min_on_empty_sets():
    b = np.array([[True, False], [False, False]])
    (y,) = run_op_on(CreateOperator("ONNXReduceMax", ["X"], ["Y"], axes=[1], keepdims=0), [b])
    assert y.dtype == bool and y.tolist() == [True, False]
    (y,) = run_op_on(CreateOperator("ONNXReduceMin", ["X"], ["Y"], axes=[0], keepdims=1), [b])
    assert y.tolist() == [[False, False]]
    (y,) = run_op_on(CreateOperator("ONNXReduceMax", ["X"], ["Y"], axes=[0]), [np.zeros((0, 2), bool)])
    assert y.tolist() == [[False, False]]
    (y,) = run_op_on(CreateOperator("ONNXReduceMin", ["X"], ["Y"], axes=[1]), [np.zeros((2, 0), np.int8)])
    assert y.tolist() == [[127], [127]]
    (y,) = run_op_on(CreateOperator("ONNXReduceProd", ["X"], ["Y"]), [np.array([[3, -2], [5, 1]], np.int32)])
    assert y.dtype == np.int32 and y.tolist() == [[-30]]


@pytest.mark.parametrize("op_type, better", [("ONNXArgMax", lambda a, b: a > b), ("ONNXArgMin", lambda a, b: a < b)])
@given(data=st.data())
@settings(max_examples=15, deadline=None)
def test_arg_extremes_with_ties(op_type, better, data):
    x = data.draw(arrays((3, 4), np.int8, elements=st.integers(-2, 2)))  # many ties
    axis, keep, last = (
        data.draw(st.sampled_from([0, 1, -1])),
        data.draw(st.sampled_from([0, 1])),
        data.draw(st.sampled_from([0, 1])),
    )

    def ref(x):
        a = axis % 2
        xm = np.moveaxis(x, a, -1)
        out = np.empty(xm.shape[:-1], np.int64)
        for i, row in enumerate(xm):
            best = 0
            for j in range(1, len(row)):
                if better(row[j], row[best]) or (last and row[j] == row[best]):
                    best = j
            out[i] = best
        return np.expand_dims(out, a) if keep else out

    op = CreateOperator(op_type, ["X"], ["Y"], axis=axis, keepdims=keep, select_last_index=last)
    assert_reference_checks(op, [x], ref)


def test_hardmax_and_lp_normalization():
    x = np.array([[1.0, 3.0, 3.0], [0.0, 0.0, 0.0]], np.float32)
    (y,) = run_op_on(CreateOperator("ONNXHardmax", ["X"], ["Y"], axis=1), [x])
    assert y.tolist() == [[0, 1, 0], [1, 0, 0]]  # the first maximum
    (y,) = run_op_on(CreateOperator("ONNXHardmax", ["X"], ["Y"], axis=0), [x])
    assert y.tolist() == [[1, 1, 1], [0, 0, 0]]
    for p in (1, 2):
        (y,) = run_op_on(CreateOperator("ONNXLpNormalization", ["X"], ["Y"], axis=-1, p=p), [x])
        norm = sum(abs(v) ** p for v in (1.0, 3.0, 3.0)) ** (1 / p)
        np.testing.assert_allclose(y[0], [1 / norm, 3 / norm, 3 / norm], rtol=1e-6)
        assert y[1].tolist() == [0, 0, 0]  # 0/0 = 0


def test_errors_name_the_op():
    with pytest.raises(TypeMismatchError, match="ONNXReduceLogSum.*'X'"):
        run_op_on(CreateOperator("ONNXReduceLogSum", ["X"], ["Y"]), [np.ones(2, np.int32)])
    with pytest.raises(ArgumentError, match="ONNXArgMax.*axis 3"):
        run_op_on(CreateOperator("ONNXArgMax", ["X"], ["Y"], axis=3), [np.ones((2, 2), np.float32)])
