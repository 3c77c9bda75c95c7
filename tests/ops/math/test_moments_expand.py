"""Moments, BatchMoments, ReduceL1/L2, Expand, ElementwiseLinear, Mod, IsMemberOf and
SumElementsInt against numpy references, with gradient checks."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.errors import ArgumentError, FrameworkError, ShapeError, TypeMismatchError
from framework.ops import get_gradient_for_op
from framework.ops.testing import (
    arrays,
    assert_gradient_checks,
    assert_inferred_shapes,
    assert_reference_checks,
    run_op_on,
    shapes,
)
from framework.proto.framework_pb2 import TensorProto


def _axes_case(data, min_side=1):
    shape = data.draw(shapes(1, 4, min_side, 4))
    axes = data.draw(st.lists(st.integers(0, len(shape) - 1), unique=True, min_size=1, max_size=len(shape)))
    keep = data.draw(st.integers(0, 1))
    return shape, sorted(axes), keep


@given(data=st.data())
@settings(max_examples=25, deadline=None)
def test_moments(data):
    shape, axes, keep = _axes_case(data)
    x = data.draw(arrays(shape, np.float64))
    op = CreateOperator("Moments", ["X"], ["mean", "var"], axes=axes, keepdims=keep)

    def ref(x):
        m = x.mean(axis=tuple(axes), keepdims=bool(keep))
        v = x.var(axis=tuple(axes), keepdims=bool(keep))
        return [m, v]

    assert_reference_checks(op, [x], ref)
    assert_gradient_checks(op, [x], 0, outputs_with_grads=(0, 1))


def test_moments_default_axes_are_all():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    assert_reference_checks(
        CreateOperator("Moments", ["X"], ["m", "v"]), [x], lambda x: [x.mean().reshape(1, 1), x.var().reshape(1, 1)]
    )


@pytest.mark.parametrize("order", ["NCHW", "NHWC"])
@given(data=st.data())
@settings(max_examples=15, deadline=None)
def test_batch_moments(order, data):
    shape = data.draw(shapes(2, 4, 1, 4))
    x = data.draw(arrays(shape, np.float64))
    c = 1 if order == "NCHW" else len(shape) - 1
    axes = tuple(a for a in range(len(shape)) if a != c)
    op = CreateOperator("BatchMoments", ["X"], ["mu", "var"], order=order)
    assert_reference_checks(op, [x], lambda x: [x.mean(axis=axes), (x * x).mean(axis=axes)])
    assert_gradient_checks(op, [x], 0, outputs_with_grads=(0, 1))


@pytest.mark.parametrize("p", [1, 2])
@given(data=st.data())
@settings(max_examples=20, deadline=None)
def test_reduce_lp(p, data):
    shape, axes, keep = _axes_case(data)
    x = data.draw(arrays(shape, np.float64, elements=st.floats(0.1, 1.0) | st.floats(-1.0, -0.1)))
    op = CreateOperator(f"ReduceL{p}", ["X"], ["Y"], axes=axes, keepdims=keep)

    def ref(x):
        a = tuple(axes)
        return (
            np.abs(x).sum(axis=a, keepdims=bool(keep)) if p == 1 else np.sqrt((x * x).sum(axis=a, keepdims=bool(keep)))
        )

    assert_reference_checks(op, [x], ref)
    assert_gradient_checks(op, [x], 0)


def test_reduce_l2_gradient_at_zero_norm_passes_dy_through():
    x = np.zeros((2, 3))
    ws_out = run_op_on(
        CreateOperator("ReduceL2Gradient", ["dY", "X", "Y"], ["dX"], axes=[1]),
        [np.array([[2.0], [3.0]]), x, np.zeros((2, 1))],
    )
    np.testing.assert_array_equal(ws_out[0], np.array([[2.0] * 3, [3.0] * 3]))


def test_reductions_empty_and_errors():
    x = np.zeros((0, 3), np.float32)
    assert_reference_checks(
        CreateOperator("ReduceL1", ["X"], ["Y"], axes=[0]), [x], lambda x: np.zeros((1, 3), np.float32)
    )
    with pytest.raises(ShapeError, match="ReduceL2"):
        run_op_on(CreateOperator("ReduceL2", ["X"], ["Y"], axes=[5]), [np.ones((2, 2))])
    with pytest.raises(TypeMismatchError, match="Moments.*'X'"):
        run_op_on(CreateOperator("Moments", ["X"], ["m", "v"]), [np.ones(3, np.int32)])
    with pytest.raises(ShapeError, match="BatchMoments"):
        run_op_on(CreateOperator("BatchMoments", ["X"], ["m", "v"]), [np.ones(3)])


@given(data=st.data())
@settings(max_examples=25, deadline=None)
def test_expand(data):
    xs = data.draw(shapes(0, 3, 1, 3))
    # target: per trailing dim either X's dim, 1, or (when X's is 1) anything
    extra = data.draw(st.lists(st.integers(1, 3), max_size=2))
    tail = [data.draw(st.sampled_from([d, 1] if d != 1 else [1, 2, 3])) for d in xs]
    target = np.array(extra + tail, dtype=np.int64)
    x = data.draw(arrays(xs, np.float64))
    op = CreateOperator("Expand", ["X", "shape"], ["Y"])

    def ref(x, s):
        out = np.broadcast_shapes(x.shape, tuple(int(d) for d in s))
        return np.broadcast_to(x, out).copy()

    (y,) = assert_reference_checks(op, [x, target], ref, check_inference=False)
    assert_inferred_shapes(op, [x, target], [y], require_known=False)
    assert_gradient_checks(op, [x, target], 0)


@pytest.mark.parametrize(
    "x_shape,target,expected",
    [((1, 3, 1), [3, -1, 3], (3, 3, 3)), ((4, 1, 2), [4, -1, 2, 2], (4, 4, 2, 2)), ((2, 3), [-1, -1], (2, 3))],
)
def test_expand_minus_one_keeps_the_dim(x_shape, target, expected):
    # as PyTorch's expand: -1 keeps X's size there (Caffe2 counts it as 1)
    x = np.arange(np.prod(x_shape), dtype=np.float32).reshape(x_shape)
    op = CreateOperator("Expand", ["X", "shape"], ["Y"])
    ref = lambda x, s: np.broadcast_to(x, expected).copy()  # noqa: E731
    assert_reference_checks(op, [x, np.array(target, np.int64)], ref, check_inference=False)
    assert_gradient_checks(op, [x.astype(np.float64), np.array(target, np.int64)], 0)


def test_expand_refuses_incompatible_shapes():
    with pytest.raises(ShapeError, match="Expand.*'X'"):
        run_op_on(CreateOperator("Expand", ["X", "s"], ["Y"]), [np.ones((2, 3)), np.array([4, 3], np.int64)])
    with pytest.raises(TypeMismatchError, match="Expand.*'s'"):
        run_op_on(CreateOperator("Expand", ["X", "s"], ["Y"]), [np.ones((2, 3)), np.array([2.0, 3.0])])


@given(data=st.data())
@settings(max_examples=20, deadline=None)
def test_elementwise_linear(data):
    shape = data.draw(shapes(2, 4, 0, 3))
    axis = data.draw(st.integers(1, len(shape) - 1))
    d = int(np.prod(shape[axis:]))
    x, a, b = (data.draw(arrays(s, np.float64)) for s in (shape, (d,), (d,)))
    op = CreateOperator("ElementwiseLinear", ["X", "a", "b"], ["Y"], axis=axis)

    def ref(x, a, b):
        n = int(np.prod(shape[:axis]))
        return (x.reshape(n, d) * a[None, :] + b[None, :]).reshape(shape)

    assert_reference_checks(op, [x, a, b], ref)
    if x.size:
        for i in range(3):
            assert_gradient_checks(op, [x, a, b], i)


def test_elementwise_linear_errors():
    op = CreateOperator("ElementwiseLinear", ["X", "a", "b"], ["Y"])
    with pytest.raises(ShapeError, match="ElementwiseLinear.*'a'"):
        run_op_on(op, [np.ones((2, 3)), np.ones(4), np.ones(3)])
    with pytest.raises(ShapeError, match="axis"):
        run_op_on(op, [np.ones(3), np.ones(3), np.ones(3)])


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
@given(data=st.data())
@settings(max_examples=20, deadline=None)
def test_mod(dtype, data):
    x = data.draw(arrays(data.draw(shapes(0, 3, 0, 4)), dtype, elements=st.integers(-100, 100)))
    divisor = data.draw(st.integers(-7, 7).filter(bool))
    follow = data.draw(st.booleans())

    def ref(x):
        out = np.array([int(np.sign(v) * (abs(int(v)) % abs(divisor))) for v in x.reshape(-1)], dtype=dtype)
        if follow:  # sign of the divisor: shift nonzero results of the other sign
            out = np.where((out != 0) & ((out > 0) != (divisor > 0)), out + divisor, out).astype(dtype)
        return out.reshape(x.shape)

    op = CreateOperator("Mod", ["X"], ["Y"], divisor=divisor, sign_follow_divisor=follow)
    assert_reference_checks(op, [x], ref)
    assert_reference_checks(CreateOperator("Mod", ["X"], ["X"], divisor=divisor), [x], lambda x: np.fmod(x, divisor))


def test_mod_errors():
    with pytest.raises(ArgumentError, match="divisor"):
        run_op_on(CreateOperator("Mod", ["X"], ["Y"]), [np.ones(3, np.int32)])
    with pytest.raises(TypeMismatchError, match="Mod.*'X'"):
        run_op_on(CreateOperator("Mod", ["X"], ["Y"], divisor=2), [np.ones(3)])


@given(
    x=arrays((3, 4), np.int64, elements=st.integers(-5, 5)),
    values=st.lists(st.integers(-5, 5), max_size=5),
)
@settings(max_examples=20, deadline=None)
def test_is_member_of_ints(x, values):
    op = CreateOperator("IsMemberOf", ["X"], ["Y"], value=values)
    assert_reference_checks(op, [x], lambda x: np.array([[v in values for v in row] for row in x], dtype=bool))
    op32 = CreateOperator("IsMemberOf", ["X"], ["Y"], value=values, dtype=TensorProto.INT32)
    assert_reference_checks(op32, [x.astype(np.int32)], lambda x: np.isin(x, values))


def test_is_member_of_strings_and_errors():
    x = np.array([b"a", b"bc", b"d"], dtype=object)
    op = CreateOperator("IsMemberOf", ["X"], ["Y"], value=["bc", "d", "zz"])
    (y,) = run_op_on(op, [x])
    np.testing.assert_array_equal(y, [False, True, True])
    with pytest.raises(FrameworkError, match="IsMemberOf"):
        run_op_on(op, [np.ones(3, np.int32)])
    with pytest.raises(TypeMismatchError, match="IsMemberOf.*'X'"):
        run_op_on(CreateOperator("IsMemberOf", ["X"], ["Y"], value=[1]), [np.ones(3)])


@given(data=st.data())
@settings(max_examples=15, deadline=None)
def test_sum_elements_int(data):
    x = data.draw(arrays(data.draw(shapes(0, 3, 0, 4)), np.int32, elements=st.integers(-1000, 1000)))
    assert_reference_checks(
        CreateOperator("SumElementsInt", ["X"], ["s"]),
        [x],
        lambda x: np.array(sum(int(v) for v in x.reshape(-1)), np.int32),
    )
    with pytest.raises(TypeMismatchError, match="SumElementsInt"):
        run_op_on(CreateOperator("SumElementsInt", ["X"], ["s"]), [x.astype(np.int64)])


def test_gradient_wiring():
    def wiring(op_type, ins, outs, g_out):
        ops, g = get_gradient_for_op(CreateOperator(op_type, ins, outs), g_out)
        return [(o.type, list(o.input), list(o.output)) for o in ops]

    assert wiring("Moments", ["X"], ["m", "v"], ["m_grad", "v_grad"]) == [
        ("MomentsGradient", ["m_grad", "v_grad", "X", "m"], ["X_grad"])
    ]
    assert wiring("BatchMoments", ["X"], ["m", "v"], ["m_grad", "v_grad"]) == [
        ("BatchMomentsGradient", ["m_grad", "v_grad", "X"], ["X_grad"])
    ]
    assert wiring("ElementwiseLinear", ["X", "a", "b"], ["Y"], ["Y_grad"]) == [
        ("ElementwiseLinearGradient", ["Y_grad", "X", "a"], ["X_grad", "a_grad", "b_grad"])
    ]
    assert wiring("Expand", ["X", "s"], ["Y"], ["Y_grad"]) == [("ExpandGradient", ["Y_grad", "X"], ["X_grad"])]
    assert wiring("ReduceL1", ["X"], ["Y"], ["Y_grad"]) == [("ReduceL1Gradient", ["Y_grad", "X", "Y"], ["X_grad"])]
