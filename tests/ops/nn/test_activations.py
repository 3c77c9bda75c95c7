"""Activations against independent float64 numpy references, gradients by central differences."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.errors import ArgumentError, GradientError, ShapeError, TypeMismatchError
from framework.memory.workspace import Workspace
from framework.ops import create_operator, get_gradient_for_op
from framework.ops.erf import erf
from framework.ops.testing import arrays, assert_gradient_checks, assert_reference_checks, shapes
from tests.ops.helpers import run_fed

SELU_A = 1.6732632423543772848170429916717
SELU_S = 1.0507009873554804934193349852946


def _erf(x):
    return np.vectorize(math.erf, otypes=[np.float64])(x)


def _sig(x):
    return 1.0 / (1.0 + np.exp(-x))


# name -> (kwargs, reference on float64)
REFS = {
    "Relu": ({}, lambda x: np.where(x > 0, x, 0.0)),
    "LeakyRelu": ({}, lambda x: np.where(x >= 0, x, 0.01 * x)),
    "LeakyRelu/alpha": ({"alpha": 0.3}, lambda x: np.where(x >= 0, x, 0.3 * x)),
    "LeakyRelu/alpha>1": ({"alpha": 2.5}, lambda x: np.where(x >= 0, x, 2.5 * x)),
    "Elu": ({}, lambda x: np.where(x > 0, x, np.exp(x) - 1.0)),
    "Elu/alpha": ({"alpha": 0.5}, lambda x: np.where(x > 0, x, 0.5 * (np.exp(x) - 1.0))),
    "Selu": ({}, lambda x: SELU_S * np.where(x > 0, x, SELU_A * (np.exp(x) - 1.0))),
    "Selu/args": ({"alpha": 1.5, "scale": 1.2}, lambda x: 1.2 * np.where(x > 0, x, 1.5 * (np.exp(x) - 1.0))),
    "Sigmoid": ({}, _sig),
    "Tanh": ({}, np.tanh),
    "Softplus": ({}, lambda x: np.log(1.0 + np.exp(x))),
    "Softsign": ({}, lambda x: x / (1.0 + np.abs(x))),
    "Swish": ({}, lambda x: x * _sig(x)),
    "Gelu": ({}, lambda x: x * 0.5 * (1.0 + _erf(x / math.sqrt(2.0)))),
    "Gelu/fast": (
        {"fast_gelu": True},
        lambda x: 0.5 * x * (1.0 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3))),
    ),
    "HardSigmoid": ({}, lambda x: np.clip(0.2 * x + 0.5, 0.0, 1.0)),
    "HardSigmoid/args": ({"alpha": 0.5, "beta": 0.25}, lambda x: np.clip(0.5 * x + 0.25, 0.0, 1.0)),
}
CASES = sorted(REFS)


def _op_type(case):
    return case.split("/")[0]


def _ref(case):
    kwargs, fn = REFS[case]

    def reference(x):
        return fn(x.astype(np.float64)).astype(x.dtype)

    return kwargs, reference


def _away_from_kinks(x, case):
    """Push values off the points where the op is not differentiable (0, HardSigmoid's clip edges)."""
    x = np.where(np.abs(x) < 0.05, np.where(x < 0, -0.05, 0.05), x)
    if case.startswith("HardSigmoid"):
        kwargs = REFS[case][0]
        a, b = kwargs.get("alpha", 0.2), kwargs.get("beta", 0.5)
        for edge in ((0 - b) / a, (1 - b) / a):
            x = np.where(np.abs(x - edge) < 0.05, edge + 0.05, x)
    return x


@pytest.mark.parametrize("case", CASES)
@settings(max_examples=12)
@given(shape=shapes(min_dims=1, max_dims=4), dtype=st.sampled_from([np.float32, np.float64]), data=st.data())
def test_forward_matches_reference(case, shape, dtype, data):
    x = data.draw(arrays(shape, dtype, elements=st.floats(-4, 4, width=32)))
    kwargs, reference = _ref(case)
    op = CreateOperator(_op_type(case), ["X"], ["Y"], **kwargs)
    assert_reference_checks(op, [x], reference, threshold=1e-5 if dtype == np.float64 else 1e-4)


@pytest.mark.parametrize("case", CASES)
def test_in_place(case):
    x = np.random.default_rng(1).uniform(-3, 3, (3, 4, 2)).astype(np.float32)
    kwargs, reference = _ref(case)
    op = CreateOperator(_op_type(case), ["X"], ["X"], **kwargs)
    assert_reference_checks(op, [x], reference)


@pytest.mark.parametrize("case", CASES)
def test_empty_tensor(case):
    kwargs, reference = _ref(case)
    op = CreateOperator(_op_type(case), ["X"], ["Y"], **kwargs)
    out = assert_reference_checks(op, [np.zeros((0, 3), np.float32)], reference)
    assert out[0].shape == (0, 3)


@pytest.mark.parametrize("case", CASES)
@settings(max_examples=5)
@given(shape=shapes(min_dims=1, max_dims=3, max_side=4), data=st.data())
def test_gradient(case, shape, data):
    x = data.draw(arrays(shape, np.float64, elements=st.floats(-3, 3)))
    x = _away_from_kinks(x, case)
    kwargs, _ = _ref(case)
    op = CreateOperator(_op_type(case), ["X"], ["Y"], **kwargs)
    assert_gradient_checks(op, [x], 0, threshold=1e-4, stepsize=1e-5)


@pytest.mark.parametrize("case", ["Relu", "Sigmoid", "Tanh", "Elu", "Selu", "LeakyRelu", "Softplus", "HardSigmoid"])
def test_gradient_op_in_place_on_dy(case):
    """Gradient ops that read (Y, dY) may write dX over dY."""
    x = _away_from_kinks(np.random.default_rng(2).uniform(-2, 2, (4, 5)), case)
    kwargs, _ = _ref(case)
    fwd = CreateOperator(_op_type(case), ["X"], ["Y"], **kwargs)
    (gop,), _ = get_gradient_for_op(fwd, ["Y_grad"])
    ws = Workspace()
    ws.feed_blob("X", x)
    create_operator(fwd, ws).run()
    ws.feed_blob("dY", np.ones_like(x) * 0.5)
    gop.input[1] = "dY"
    gop.output[0] = "dY"
    create_operator(gop, ws).run()
    expected_ws = Workspace()
    gop2 = CreateOperator(gop.type, [gop.input[0], "g"], ["dx"], arg=list(gop.arg))
    expected_ws.feed_blob(gop.input[0], ws.fetch_blob(gop.input[0]))
    expected_ws.feed_blob("g", np.ones_like(x) * 0.5)
    create_operator(gop2, expected_ws).run()
    np.testing.assert_allclose(ws.fetch_blob("dY"), expected_ws.fetch_blob("dx"))


def test_gradient_makers_follow_caffe2_conventions():
    def grad_of(op_type, **kw):
        (g,), gi = get_gradient_for_op(CreateOperator(op_type, ["X"], ["Y"], **kw), ["Y_grad"])
        return g.type, list(g.input), list(g.output), gi

    assert grad_of("Relu") == ("ReluGradient", ["Y", "Y_grad"], ["X_grad"], ["X_grad"])
    assert grad_of("Sigmoid")[:2] == ("SigmoidGradient", ["Y", "Y_grad"])
    assert grad_of("Tanh")[:2] == ("TanhGradient", ["Y", "Y_grad"])
    assert grad_of("Softsign")[:2] == ("SoftsignGradient", ["X", "Y_grad"])
    assert grad_of("Swish")[:2] == ("SwishGradient", ["X", "Y", "Y_grad"])
    assert grad_of("Gelu")[:2] == ("GeluGradient", ["Y_grad", "X"])
    g = get_gradient_for_op(CreateOperator("LeakyRelu", ["X"], ["Y"], alpha=0.2), ["Y_grad"])[0][0]
    assert [a.name for a in g.arg] == ["alpha"]
    ops, gi = get_gradient_for_op(CreateOperator("PRelu", ["X", "W"], ["Y"]), ["Y_grad"])
    assert list(ops[0].input) == ["Y", "Y_grad", "X", "W"] and gi == ["X_grad", "W_grad"]


def test_softsign_in_place_gradient_is_refused():
    with pytest.raises(GradientError, match="in-place"):
        get_gradient_for_op(CreateOperator("Softsign", ["X"], ["X"]), ["X_grad"])


# -- PRelu ---------------------------------------------------------------------------------


def _prelu_ref(order):
    def reference(x, w):
        if w.size == 1:
            s = w.reshape(())
        elif order == "NCHW":
            s = w.reshape((-1,) + (1,) * (x.ndim - 2))
        else:
            s = w
        return np.where(x > 0, x, x * s)

    return reference


@pytest.mark.parametrize("order", ["NCHW", "NHWC"])
@settings(max_examples=15)
@given(shape=shapes(min_dims=2, max_dims=4), shared=st.booleans(), data=st.data())
def test_prelu(order, shape, shared, data):
    c = shape[1] if order == "NCHW" else shape[-1]
    x = data.draw(arrays(shape, np.float32))
    w = data.draw(arrays((1,) if shared else (c,), np.float32))
    op = CreateOperator("PRelu", ["X", "W"], ["Y"], order=order)
    assert_reference_checks(op, [x, w], _prelu_ref(order))


@pytest.mark.parametrize("order", ["NCHW", "NHWC"])
@pytest.mark.parametrize("shared", [True, False])
def test_prelu_gradient(order, shared):
    rng = np.random.default_rng(3)
    x = _away_from_kinks(rng.uniform(-2, 2, (2, 3, 2, 2)), "PRelu")
    c = 3 if order == "NCHW" else 2
    w = rng.uniform(0.1, 0.5, (1,) if shared else (c,))
    op = CreateOperator("PRelu", ["X", "W"], ["Y"], order=order)
    assert_gradient_checks(op, [x, w], 0)
    assert_gradient_checks(op, [x, w], 1)


def test_prelu_in_place_and_errors():
    x = np.array([[-1.0, 2.0], [3.0, -4.0]], np.float32)
    out = assert_reference_checks(
        CreateOperator("PRelu", ["X", "W"], ["X"]), [x, np.array([0.5, 0.25], np.float32)], _prelu_ref("NCHW")
    )
    np.testing.assert_allclose(out[0], [[-0.5, 2.0], [3.0, -1.0]])
    ws = Workspace()
    ws.feed_blob("X", x)
    ws.feed_blob("W", np.ones(3, np.float32))
    with pytest.raises(ShapeError, match=r"PRelu.*'W'.*3 values.*2 channels"):
        create_operator(CreateOperator("PRelu", ["X", "W"], ["Y"]), ws).run()
    with pytest.raises(ArgumentError, match=r"PRelu.*order"):
        create_operator(CreateOperator("PRelu", ["X", "W"], ["Y"], order="CHWN"), ws)


# -- dtypes and errors --------------------------------------------------------------------------


def test_relu_supports_integers():
    x = np.array([[-3, 0, 5]], np.int32)
    out = assert_reference_checks(CreateOperator("Relu", ["X"], ["Y"]), [x], lambda x: np.maximum(x, 0))
    assert out[0].dtype == np.int32


@pytest.mark.parametrize("op_type", ["Sigmoid", "Tanh", "Elu", "LeakyRelu", "Gelu", "Softsign"])
def test_float_only_ops_reject_integers(op_type):
    ws = Workspace()
    ws.feed_blob("ints", np.array([1, 2], np.int64))
    with pytest.raises(TypeMismatchError, match=rf"{op_type}.*'ints'.*floats.*int64"):
        create_operator(CreateOperator(op_type, ["ints"], ["Y"]), ws).run()


def test_selu_rejects_scale_not_above_one():
    with pytest.raises(ArgumentError, match=r'Selu "s".*scale.*> 1'):
        create_operator(CreateOperator("Selu", ["X"], ["Y"], name="s", scale=0.5), Workspace())


def test_gradient_op_shape_mismatch_names_blobs():
    feeds = {"Y": np.ones((2, 3), np.float32), "dY": np.ones((3, 2), np.float32)}
    with pytest.raises(ShapeError, match=r"SigmoidGradient") as err:
        run_fed(CreateOperator("SigmoidGradient", ["Y", "dY"], ["dX"]), feeds)
    # both blobs are named with their own shapes, in whichever order the check reports them
    assert re.search(r"'Y'\) has shape \[2, 3\]", str(err.value)), err.value
    assert re.search(r"'dY'\) has shape \[3, 2\]", str(err.value)), err.value


def test_sigmoid_and_softplus_do_not_overflow():
    x = np.array([-1000.0, -50.0, 0.0, 50.0, 1000.0], np.float32)
    ws = Workspace()
    ws.feed_blob("X", x)
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        for op_type in ("Sigmoid", "Softplus", "Swish"):
            create_operator(CreateOperator(op_type, ["X"], ["Y"]), ws).run()
            assert np.all(np.isfinite(ws.fetch_blob("Y")))
    np.testing.assert_allclose(ws.fetch_blob("Y")[[2, 3]], [0.0, 50.0])


def test_erf_approximation_accuracy():
    x = np.linspace(-5, 5, 2001)
    got = erf(x, np.empty_like(x))
    assert np.max(np.abs(got - _erf(x))) < 2e-7


def test_relu_gradient_compile_fast_path():
    ws = Workspace()
    ws.feed_blob("Y", np.array([0.0, 1.0, 2.0]))
    ws.feed_blob("dY", np.array([5.0, 6.0, 7.0]))
    op = create_operator(CreateOperator("ReluGradient", ["Y", "dY"], ["dX"]), ws)
    op.run()
    fast = op.compile()
    ws.feed_blob("Y", np.array([3.0, -1.0, 2.0]))
    fast()
    np.testing.assert_array_equal(ws.fetch_blob("dX"), [5.0, 0.0, 7.0])


@pytest.mark.parametrize("in_place", [False, True])
def test_selu_gradient_needs_equal_sizes_only_and_shapes_dx_as_y(in_place):
    # Caffe2's SeluGradient enforces dY.numel() == Y.numel() and writes dX shaped as Y.
    alpha, scale = 1.3, 1.1
    y = np.array([[[0.5, -0.4, 2.0], [-1.0, 0.1, -0.2]]], np.float32)  # (1, 2, 3)
    dy = np.arange(1.0, 7.0, dtype=np.float32).reshape(2, 3)
    out = "dY" if in_place else "dX"
    op = CreateOperator("SeluGradient", ["Y", "dY"], [out], alpha=alpha, scale=scale)
    ws, _ = run_fed(op, {"Y": y, "dY": dy})
    flat_y, flat_dy = y.reshape(-1).astype(np.float64), dy.reshape(-1).astype(np.float64)
    expected = np.array([scale * g if v > 0 else g * (v + alpha * scale) for v, g in zip(flat_y, flat_dy)])
    got = ws.fetch_blob(out)
    assert got.shape == y.shape
    np.testing.assert_allclose(got.reshape(-1), expected, rtol=1e-6)
    with pytest.raises(ShapeError, match="sizes must be equal"):
        run_fed(op, {"Y": y, "dY": np.ones(5, np.float32)})
