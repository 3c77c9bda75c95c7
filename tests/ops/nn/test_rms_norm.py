"""RMSNorm and its gradient against loops written from Caffe2 2020's rms_norm_op."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.errors import FrameworkError
from framework.ops import get_gradient_for_op
from framework.ops.testing import assert_gradient_checks, assert_reference_checks, run_op_on


def _rms_norm_ref(x, gamma, beta, axis, eps):
    a = axis % x.ndim
    rows, d = math.prod(x.shape[:a]), math.prod(x.shape[a:])
    flat = x.reshape(rows, d).astype(np.float64)
    y = np.empty_like(flat)
    rrms = np.empty(rows)
    for i in range(rows):
        rrms[i] = 1.0 / math.sqrt(sum(v * v for v in flat[i]) / d + eps)
        for j in range(d):
            y[i, j] = flat[i, j] * rrms[i] * gamma.reshape(-1)[j] + beta.reshape(-1)[j]
    return [y.reshape(x.shape).astype(x.dtype), rrms.reshape(x.shape[:a]).astype(x.dtype)]


@settings(max_examples=25, deadline=None)
@given(
    dims=st.lists(st.integers(0, 4), min_size=2, max_size=4),
    axis=st.integers(1, 3),
    eps=st.sampled_from([0.0, 1e-3]),
    dtype=st.sampled_from([np.float32, np.float64]),
    seed=st.integers(0, 2**16),
)
def test_rms_norm_forward(dims, axis, eps, dtype, seed):
    axis = min(axis, len(dims) - 1)
    dims[axis:] = [max(d, 1) for d in dims[axis:]]  # rows may be empty, a row may not
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(dims) * 2 + 1).astype(dtype)
    d = math.prod(dims[axis:])
    gamma, beta = rng.standard_normal(d).astype(dtype), rng.standard_normal(d).astype(dtype)
    op = CreateOperator("RMSNorm", ["X", "gamma", "beta"], ["Y", "rrms"], axis=axis, eps=eps)
    assert_reference_checks(op, [x, gamma, beta], lambda x, g, b: _rms_norm_ref(x, g, b, axis, eps), threshold=1e-4)


@pytest.mark.parametrize("shape,axis", [((3, 4), 1), ((2, 3, 2), 1), ((2, 3, 2), 2), ((2, 3, 2), -1)])
def test_rms_norm_gradients(shape, axis):
    rng = np.random.default_rng(7)
    x = rng.standard_normal(shape) * 2 + 1
    d = math.prod(shape[axis % len(shape) :])
    gamma, beta = rng.standard_normal(d), rng.standard_normal(d)
    op = CreateOperator("RMSNorm", ["X", "gamma", "beta"], ["Y", "rrms"], axis=axis, eps=1e-3)
    for i in range(3):
        assert_gradient_checks(op, [x, gamma, beta], i, outputs_with_grads=[0], threshold=1e-4, stepsize=1e-5)


def test_rms_norm_gradient_op_is_caffe2s():
    op = CreateOperator("RMSNorm", ["X", "gamma", "beta"], ["Y", "rrms"], eps=0.5)
    (gop,), g_in = get_gradient_for_op(op, ["dY", None])
    assert gop.type == "RMSNormGradient" and list(gop.input) == ["dY", "X", "gamma", "rrms"]
    assert list(gop.output) == g_in == ["X_grad", "gamma_grad", "beta_grad"]
    # no rows: dX is empty, dgamma and dbeta are zeros
    outs = run_op_on(gop, [np.zeros((0, 3)), np.zeros((0, 3)), np.ones(3), np.zeros(0)])
    assert outs[0].shape == (0, 3) and outs[1].tolist() == [0, 0, 0] and outs[2].tolist() == [0, 0, 0]


def test_rms_norm_errors_name_the_op():
    op = CreateOperator("RMSNorm", ["X", "gamma", "beta"], ["Y", "rrms"])
    with pytest.raises(FrameworkError, match="RMSNorm.*dim >= 2"):
        run_op_on(op, [np.ones(3, np.float32), np.ones(3, np.float32), np.ones(3, np.float32)])
    with pytest.raises(FrameworkError, match="RMSNorm.*gamma"):
        run_op_on(op, [np.ones((2, 3), np.float32), np.ones(2, np.float32), np.ones(3, np.float32)])
