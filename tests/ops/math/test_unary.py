"""Unary math ops and their gradients."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.errors import GradientError, TypeMismatchError
from framework.ops import get_gradient_for_op
from framework.ops.testing import arrays, assert_gradient_checks, assert_reference_checks, run_op_on, shapes

# name -> (reference in float64, input elements, integer dtypes allowed)
POS = st.floats(0.25, 3.0, width=32)
ANY = st.floats(-3.0, 3.0, width=32)
AWAY = st.one_of(st.floats(-3.0, -0.25, width=32), st.floats(0.25, 3.0, width=32))
UNARY = {
    "Negative": (np.negative, ANY, True),
    "Abs": (np.abs, AWAY, True),
    "Exp": (np.exp, ANY, False),
    "Log": (np.log, POS, False),
    "Sqr": (np.square, ANY, True),
    "Sqrt": (np.sqrt, POS, False),
    "Rsqrt": (lambda x: 1.0 / np.sqrt(x), POS, False),
    "Sign": (np.sign, ANY, True),
    "Cos": (np.cos, ANY, False),
    "Sin": (np.sin, ANY, False),
    "Reciprocal": (lambda x: 1.0 / x, AWAY, False),
}
DIFFERENTIABLE = [k for k in UNARY if k != "Sign"]


def _ref(f, dtype):
    return lambda x: f(x.astype(np.float64)).astype(dtype)


@pytest.mark.parametrize("op_type", list(UNARY))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@given(data=st.data())
@settings(max_examples=10)
def test_unary_float(op_type, dtype, data):
    f, elements, _ = UNARY[op_type]
    x = data.draw(arrays(data.draw(shapes(0, 3, 0, 4)), dtype, elements=elements))
    assert_reference_checks(CreateOperator(op_type, ["X"], ["Y"]), [x], _ref(f, dtype))
    assert_reference_checks(CreateOperator(op_type, ["X"], ["X"]), [x], _ref(f, dtype))


@pytest.mark.parametrize("op_type", [k for k, v in UNARY.items() if v[2]])
@pytest.mark.parametrize("dtype", [np.int32, np.int64])
@given(data=st.data())
@settings(max_examples=10)
def test_unary_integer(op_type, dtype, data):
    f = UNARY[op_type][0]
    x = data.draw(arrays(data.draw(shapes(0, 3, 0, 4)), dtype))
    assert_reference_checks(CreateOperator(op_type, ["X"], ["Y"]), [x], lambda x: f(x).astype(dtype))


@pytest.mark.parametrize("op_type", [k for k, v in UNARY.items() if not v[2]] + ["Scale", "Clip"])
def test_float_only_ops_refuse_integers(op_type):
    with pytest.raises(TypeMismatchError, match=rf"{op_type}.*'X'.*int32.*floating point"):
        run_op_on(CreateOperator(op_type, ["X"], ["Y"]), [np.ones(3, np.int32)])


@pytest.mark.parametrize("op_type", DIFFERENTIABLE)
@given(data=st.data())
@settings(max_examples=6)
def test_unary_gradients(op_type, data):
    _, elements, _ = UNARY[op_type]
    x = data.draw(arrays(data.draw(shapes(1, 3, 1, 3)), np.float64, elements=elements))
    assert_gradient_checks(CreateOperator(op_type, ["X"], ["Y"]), [x], 0, threshold=1e-3)


@given(x=arrays((2, 3), np.float32), scale=st.floats(-4, 4))
@settings(max_examples=15)
def test_scale(x, scale):
    op = CreateOperator("Scale", ["X"], ["Y"], scale=scale)
    ref = lambda x: (x * np.float32(scale)).astype(np.float32)  # noqa: E731
    assert_reference_checks(op, [x], ref)
    assert_reference_checks(CreateOperator("Scale", ["X"], ["X"], scale=scale), [x], ref)
    assert_gradient_checks(op, [x], 0)


def test_scale_defaults_to_one_and_takes_an_int_losslessly():
    x = np.arange(4, dtype=np.float32)
    assert_reference_checks(CreateOperator("Scale", ["X"], ["Y"]), [x], lambda x: x)
    assert_reference_checks(CreateOperator("Scale", ["X"], ["Y"], scale=3), [x], lambda x: 3 * x)


@given(
    x=arrays((3, 4), np.float64, elements=st.floats(-2, 2)),
    lo=st.floats(-1.5, -0.05),
    hi=st.floats(0.05, 1.5),
)
@settings(max_examples=15)
def test_clip(x, lo, hi):
    # keep values off the bounds so central differences are well defined
    x = np.where(np.abs(x - lo) < 1e-2, x + 0.05, x)
    x = np.where(np.abs(x - hi) < 1e-2, x + 0.05, x)
    op = CreateOperator("Clip", ["X"], ["Y"], min=lo, max=hi)
    assert_reference_checks(op, [x], lambda x: np.minimum(np.maximum(x, lo), hi))
    assert_reference_checks(
        CreateOperator("Clip", ["X"], ["X"], min=lo, max=hi), [x], lambda x: np.minimum(np.maximum(x, lo), hi)
    )
    assert_gradient_checks(op, [x], 0)


def test_clip_defaults_are_unbounded():
    x = np.array([-1e30, 0.0, 1e30], dtype=np.float32)
    assert_reference_checks(CreateOperator("Clip", ["X"], ["Y"]), [x], lambda x: x)
    assert_reference_checks(CreateOperator("Clip", ["X"], ["Y"], min=0.0), [x], lambda x: np.maximum(x, 0))


def test_sign_must_not_be_differentiated():
    with pytest.raises(GradientError, match="should not"):
        get_gradient_for_op(CreateOperator("Sign", ["X"], ["Y"]), ["Y_grad"])


def test_gradient_makers_follow_caffe2():
    def types(op_type, **kw):
        ops, g = get_gradient_for_op(CreateOperator(op_type, ["X"], ["Y"], **kw), ["Y_grad"])
        assert g == ["X_grad"]
        return [(o.type, list(o.input)) for o in ops]

    assert types("Exp") == [("Mul", ["Y", "Y_grad"])]
    assert types("Log") == [("Div", ["Y_grad", "X"])]
    assert types("Negative") == [("Negative", ["Y_grad"])]
    assert types("Sqr") == [("Scale", ["Y_grad"]), ("Mul", ["X_grad", "X"])]
    assert types("Clip", min=0.0) == [("ClipGradient", ["Y", "Y_grad"])]
    assert types("Rsqrt") == [("RsqrtGradient", ["Y_grad", "Y"])]


def test_empty_input():
    x = np.zeros((0, 3), np.float32)
    for op_type in UNARY:
        assert_reference_checks(CreateOperator(op_type, ["X"], ["Y"]), [x], lambda x: x)
