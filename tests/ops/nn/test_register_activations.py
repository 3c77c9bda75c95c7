"""The activations the LLVM IR conv kernels apply on the register (framework/kernels/simd_ir.activate: Relu, Relu6,
HardSwish, Swish with its vector exp and reciprocal estimate), isolated from the conv's sums: a 3x3 depthwise
conv (depthwise3.py) whose only non-zero tap is the centre's 1.0, no bias, passes x through exactly, so its
output is the activation of x alone. Relu and Relu6 are checked bit for bit, HardSwish within an ulp of numpy's float32
operations in the same order, Swish within a few float32 ulps of float64's x / (1 + exp(-x)), with NaN kept,
zero, subnormal arguments and arguments past exp's float32 range. (A signed zero does not survive the conv's
sum: the accumulator starts at +0.)"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from framework.kernels import kernel_support, window_jit

pytestmark = pytest.mark.skipif(
    not (window_jit.available() and kernel_support.usable("depthwise3")), reason="no compiled depthwise kernel here"
)

_FLAGS = {"relu": 4, "relu6": 4 | 8, "hardswish": 16, "swish": 32}


def _through(x: np.ndarray, flags: int) -> np.ndarray:
    """Activation ``flags`` of x (1, C, H, W) float32 by the 3x3 stride-1 pad-1 depthwise kernel, centre tap 1."""
    from framework.kernels import depthwise3 as d3

    c, h, w = x.shape[1:]
    wt = np.zeros((c, 1, 3, 3), np.float32)
    wt[:, 0, 1, 1] = 1.0
    y = np.full_like(x, 7.0)
    d3._depthwise3(x, wt, np.zeros(c, np.float32), y, y, 1, 1, 1, flags, 0, 1)
    return y


def _hardswish(x: np.ndarray) -> np.ndarray:
    gate = np.minimum(np.maximum(x * np.float32(1.0 / 6) + np.float32(0.5), np.float32(0)), np.float32(1))
    return x * gate


_values = hnp.arrays(
    np.float32,
    st.tuples(st.integers(1, 3), st.integers(1, 9), st.integers(1, 21)).map(lambda s: (1, *s)),
    elements=st.floats(-120, 120, width=32),
)


@settings(max_examples=60, deadline=None)
@given(x=_values)
def test_relu_relu6_hardswish_match_numpy(x):
    np.testing.assert_array_equal(_through(x, _FLAGS["relu"]), np.maximum(x, np.float32(0)))
    np.testing.assert_array_equal(_through(x, _FLAGS["relu6"]), np.clip(x, np.float32(0), np.float32(6)))
    # the compiler may fuse x / 6 + 1/2 into one multiply-add: the gate within an ulp of x / 6 (~6e-8), which is
    # a large relative error of the result where the gate nears 0 (x near -3)
    got, want = _through(x, _FLAGS["hardswish"]), _hardswish(x)
    assert np.all(np.abs(got - want) <= 2.5e-7 * np.abs(want) + 6e-8 * np.abs(x) + 1e-38)


@settings(max_examples=60, deadline=None)
@given(x=_values)
def test_swish_within_a_few_ulps(x):
    got = _through(x, _FLAGS["swish"]).astype(np.float64)
    xd = x.astype(np.float64)
    want = xd / (1.0 + np.exp(-xd))
    np.testing.assert_allclose(got, want, rtol=6e-7, atol=1e-35)


def test_swish_dense_sweep_nan_zero_and_extremes():
    x = np.linspace(-100, 100, 2 * 3 * 40 * 50, dtype=np.float32).reshape(1, 6, 40, 50)
    x[0, 0, 0, :5:2] = [0.0, 5e-39, 1e-30]  # apart from each other
    x[0, 0, 2, :5:2] = [-1e-30, -87.0, 87.0]
    got = _through(x, _FLAGS["swish"])
    assert got[0, 0, 0, 0] == 0
    # alone: the zero taps see the neighbours (0 * NaN is NaN)
    assert np.isnan(_through(np.full((1, 1, 1, 1), np.nan, np.float32), _FLAGS["swish"])).all()
    xd, gd = x.astype(np.float64).ravel(), got.astype(np.float64).ravel()
    np.testing.assert_allclose(gd, xd / (1.0 + np.exp(-xd)), rtol=6e-7, atol=1e-35)
    # past exp's float32 range the result is a tiny negative number, never a NaN or an infinity
    far = _through(np.full((1, 1, 1, 3), -300.0, np.float32), _FLAGS["swish"])
    assert np.all(np.isfinite(far)) and np.all(far <= 0) and np.all(far > -1e-30)
