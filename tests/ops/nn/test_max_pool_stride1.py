"""Stride-1 max pooling on the compiled kernel (window_kernels._max_pool's whole-plane paths: GoogLeNet's 3x3 pad-1
pools over 28x28 to 7x7 planes, and other paddings): the numpy path's values bit for bit (NaN wins, the sign of a
zero kept, -inf under padding gives the pad value), every geometry, several planes per block."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.kernels import kernel_support, window_jit
from framework.memory.workspace import Workspace
from framework.ops import create_operator

pytest.importorskip("numba")


def _run(op_def, x, jit=True):
    with pytest.MonkeyPatch.context() as mp:
        if not jit:
            mp.setattr(window_jit, "_kernels", None)
        ws = Workspace()
        ws.feed_blob("X", x)
        op = create_operator(op_def, ws)
        op.run()
        op.run()  # the prepared state again: same values
        return ws.fetch_blob("Y").copy(), op


def _same_bits(got, want):
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)  # NaN where NaN
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(1, 2),
    c=st.integers(1, 40),
    h=st.integers(1, 16),
    w=st.integers(1, 16),
    pads=st.tuples(*[st.integers(0, 2)] * 4),
    seed=st.integers(0, 2**16),
)
def test_stride1_max_pool_equals_the_numpy_path(n, c, h, w, pads, seed):
    if not (window_jit.available() and kernel_support.usable("max_pool")):
        pytest.skip("the compiled max_pool kernel is not usable here")
    t, left, b, r = pads
    if h + t + b < 3 or w + left + r < 3:
        return
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, c, h, w)).astype(np.float32)
    special = rng.integers(0, 5, x.shape)
    x[special == 0] = np.nan
    x[special == 1] = -0.0
    x[special == 2] = 0.0
    if c > 1:
        x[:, 1] = -np.inf  # a plane of -inf: padded windows give the pad value, inner ones -inf
    op_def = CreateOperator("MaxPool", ["X"], ["Y"], kernel=3, stride=1, pad_t=t, pad_l=left, pad_b=b, pad_r=r)
    got, op = _run(op_def, x)
    assert getattr(op._sep, "direct", False), "the case does not reach the compiled max_pool kernel"
    want, _ = _run(op_def, x, jit=False)
    _same_bits(got, want)


def test_googlenet_geometries_in_blocks_of_planes():
    if not (window_jit.available() and kernel_support.usable("max_pool")):
        pytest.skip("the compiled max_pool kernel is not usable here")
    rng = np.random.default_rng(1)
    for c, hw in ((192, 28), (512, 14), (832, 7)):
        x = rng.standard_normal((1, c, hw, hw)).astype(np.float32)
        x.reshape(-1)[::97] = np.nan
        op_def = CreateOperator("MaxPool", ["X"], ["Y"], kernel=3, stride=1, pad=1)
        got, op = _run(op_def, x)
        assert window_jit.max_pool_row(op._geo)[0] > hw * hw  # several planes per pass
        want, _ = _run(op_def, x, jit=False)
        _same_bits(got, want)
