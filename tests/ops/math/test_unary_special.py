"""Trigonometric, hyperbolic, power, rounding and special unary ops (Acos ... Logit) and their
gradients, against numpy/math references."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.errors import GradientError, TypeMismatchError
from framework.ops import get_gradient_for_op
from framework.ops.testing import arrays, assert_gradient_checks, assert_reference_checks, run_op_on, shapes

UNIT = st.floats(-0.875, 0.875, width=32)
ANY = st.floats(-2.0, 2.0, width=32)
TANSAFE = st.floats(-1.25, 1.25, width=32)
AWAY = st.one_of(st.floats(-2.0, -0.25, width=32), st.floats(0.25, 2.0, width=32))
PROB = st.floats(0.0625, 0.9375, width=32)
HALF = st.one_of(st.floats(-2.75, -0.25, width=32), st.floats(0.25, 2.75, width=32))

_erf = np.vectorize(math.erf, otypes=[np.float64])

# name -> (float64 reference, elements, differentiable)
OPS = {
    "Acos": (np.arccos, UNIT, True),
    "Asin": (np.arcsin, UNIT, True),
    "Atan": (np.arctan, ANY, True),
    "Tan": (np.tan, TANSAFE, True),
    "Cosh": (np.cosh, ANY, True),
    "Sinh": (np.sinh, ANY, True),
    "Cbrt": (lambda x: np.sign(x) * np.abs(x) ** (1.0 / 3.0), AWAY, True),
    "Cube": (lambda x: x * x * x, ANY, True),
    "Ceil": (np.ceil, HALF, False),
    "Floor": (np.floor, HALF, False),
    "Erf": (_erf, ANY, True),
    "Logit": (lambda x: np.log(x / (1 - x)), PROB, True),
}


@pytest.mark.parametrize("op_type", list(OPS))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@given(data=st.data())
@settings(max_examples=8, deadline=None)
def test_forward(op_type, dtype, data):
    f, elements, _ = OPS[op_type]
    x = data.draw(arrays(data.draw(shapes(0, 3, 0, 4)), dtype, elements=elements))

    def ref(x):
        return f(x.astype(np.float64)).astype(dtype)

    assert_reference_checks(CreateOperator(op_type, ["X"], ["Y"]), [x], ref)
    assert_reference_checks(CreateOperator(op_type, ["X"], ["X"]), [x], ref)


@pytest.mark.parametrize("op_type", [k for k, v in OPS.items() if v[2]])
@given(data=st.data())
@settings(max_examples=5, deadline=None)
def test_gradients(op_type, data):
    _, elements, _ = OPS[op_type]
    x = data.draw(arrays(data.draw(shapes(1, 3, 1, 3)), np.float64, elements=elements))
    assert_gradient_checks(CreateOperator(op_type, ["X"], ["Y"]), [x], 0, threshold=1e-3)


def test_gradient_wiring_follows_caffe2():
    def wiring(op_type):
        ops, g = get_gradient_for_op(CreateOperator(op_type, ["X"], ["Y"]), ["Y_grad"])
        assert g == ["X_grad"]
        return [(o.type, list(o.input)) for o in ops]

    for t in ("Acos", "Asin", "Atan", "Tan", "Erf", "Logit"):
        assert wiring(t) == [(f"{t}Gradient", ["X", "Y_grad"])]
    for t in ("Cosh", "Sinh", "Cube"):
        assert wiring(t) == [(f"{t}Gradient", ["Y_grad", "X"])]
    assert wiring("Cbrt") == [("CbrtGradient", ["Y_grad", "Y"])]
    for t in ("Ceil", "Floor"):
        with pytest.raises(GradientError):
            get_gradient_for_op(CreateOperator(t, ["X"], ["Y"]), ["Y_grad"])


def test_logit_clamps_with_eps_and_its_gradient_is_zero_outside():
    x = np.array([0.0, 1e-9, 0.5, 1.0, 0.3], np.float32)
    eps = 1e-3
    op = CreateOperator("Logit", ["X"], ["Y"], eps=eps)
    c = np.clip(x.astype(np.float64), eps, 1 - eps)
    assert_reference_checks(op, [x], lambda x: np.log(c / (1 - c)).astype(np.float32))
    dy = np.ones(5, np.float32)
    (dx,) = run_op_on(CreateOperator("LogitGradient", ["X", "dY"], ["dX"], eps=eps), [x, dy])
    with np.errstate(divide="ignore"):
        expect = np.where((x < eps) | (x > 1 - eps), 0.0, 1.0 / (x * (1.0 - x)))
    np.testing.assert_allclose(dx, expect, rtol=1e-5)


def test_cube_on_integers():
    x = np.array([-3, 0, 2, 5], np.int32)
    assert_reference_checks(CreateOperator("Cube", ["X"], ["Y"]), [x], lambda x: x**3)


@pytest.mark.parametrize("op_type", [k for k in OPS if k != "Cube"])
def test_integers_refused(op_type):
    with pytest.raises(TypeMismatchError, match=rf"{op_type}.*'X'"):
        run_op_on(CreateOperator(op_type, ["X"], ["Y"]), [np.ones(3, np.int32)])


def test_gradient_shape_mismatch_is_named():
    with pytest.raises(Exception, match="AcosGradient.*'dY'"):
        run_op_on(CreateOperator("AcosGradient", ["X", "dY"], ["dX"]), [np.zeros(3), np.zeros(4)])
