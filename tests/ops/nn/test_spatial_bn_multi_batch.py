"""SpatialBN's multi-batch (7-input) form: batch statistics from sums over num_batches batches, and
its gradient from summed dscale/dbias, against numpy references written from the formulas."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.errors import ArgumentError
from framework.ops import get_gradient_for_op
from framework.ops.testing import assert_reference_checks
from tests.ops.helpers import run_fed


def _bshape(order, c, ndim):
    return (c, 1, 1) if order == "NCHW" else (c,)


@settings(max_examples=20, deadline=None)
@given(
    n=st.integers(0, 3),
    c=st.integers(1, 4),
    hw=st.integers(1, 3),
    nb=st.integers(2, 4),
    order=st.sampled_from(["NCHW", "NHWC"]),
    in_place=st.booleans(),
    seed=st.integers(0, 99),
)
def test_forward_from_sums(n, c, hw, nb, order, in_place, seed):
    rng = np.random.default_rng(seed)
    shape = (n, c, hw, hw + 1) if order == "NCHW" else (n, hw, hw + 1, c)
    x = rng.standard_normal(shape).astype(np.float32)
    scale, bias = rng.standard_normal(c).astype(np.float32), rng.standard_normal(c).astype(np.float32)
    mean, var = rng.standard_normal(c).astype(np.float32), rng.random(c).astype(np.float32)
    s1 = (rng.random(c) - 0.5).astype(np.float32)
    s2 = (rng.random(c) + 1.0).astype(np.float32)
    eps, mom = 1e-3, 0.8
    outs = ["Y", "mean", "var", "bm", "bv"] if in_place else ["Y", "mean", "var", "sm", "siv"]
    op = CreateOperator(
        "SpatialBN",
        ["X", "scale", "bias", "mean", "var", "bm", "bv"],
        outs,
        order=order,
        epsilon=eps,
        momentum=mom,
        num_batches=nb,
    )

    def ref(x, scale, bias, mean, var, s1, s2):
        if n == 0:
            return x, mean, var, np.zeros(c, np.float32), np.zeros(c, np.float32)
        size = nb * x.size // c
        bm = s1 / size
        bvar = s2 / size - bm**2
        rstd = 1 / np.sqrt(bvar + eps)
        b = _bshape(order, c, x.ndim)
        y = (x - bm.reshape(b)) * (rstd * scale).reshape(b) + bias.reshape(b)
        new_mean = mom * mean + (1 - mom) * bm
        new_var = mom * var + (1 - mom) * size / (size - 1) * bvar
        return y, new_mean, new_var, bm, rstd

    assert_reference_checks(op, [x, scale, bias, mean, var, s1, s2], ref, threshold=1e-4)


@settings(max_examples=20, deadline=None)
@given(
    n=st.integers(0, 3),
    c=st.integers(1, 4),
    nb=st.integers(2, 4),
    order=st.sampled_from(["NCHW", "NHWC"]),
    in_place=st.booleans(),
    seed=st.integers(0, 99),
)
def test_gradient_from_sums(n, c, nb, order, in_place, seed):
    rng = np.random.default_rng(seed)
    shape = (n, c, 2, 3) if order == "NCHW" else (n, 2, 3, c)
    x, dy = (rng.standard_normal(shape).astype(np.float32) for _ in range(2))
    scale, mean = rng.standard_normal(c).astype(np.float32), rng.standard_normal(c).astype(np.float32)
    rstd = rng.random(c).astype(np.float32)
    ds, db = rng.standard_normal(c).astype(np.float32), rng.standard_normal(c).astype(np.float32)
    outs = ["dX", "ds", "db"] if in_place else ["dX", "dscale", "dbias"]
    op = CreateOperator(
        "SpatialBNGradient", ["X", "scale", "dY", "mean", "rstd", "ds", "db"], outs, order=order, num_batches=nb
    )

    def ref(x, scale, dy, mean, rstd, ds, db):
        if n == 0:
            return np.zeros_like(x), np.zeros(c, np.float32), np.zeros(c, np.float32)
        m = x.size // c
        dscale, dbias = ds / nb, db / nb
        b = _bshape(order, c, x.ndim)
        xhat = (x - mean.reshape(b)) * rstd.reshape(b)
        dx = (scale * rstd).reshape(b) * (dy - dbias.reshape(b) / m - xhat * dscale.reshape(b) / m)
        return dx, dscale, dbias

    assert_reference_checks(op, [x, scale, dy, mean, rstd, ds, db], ref, threshold=1e-4)


def test_gradient_maker_passes_the_sums():
    op = CreateOperator("SpatialBN", ["X", "s", "b", "m", "v", "bm", "bv"], ["Y", "m", "v", "sm", "siv"], num_batches=3)
    ops, _ = get_gradient_for_op(op, ["Y_grad", None, None, None, None])
    assert list(ops[0].input) == ["X", "s", "Y_grad", "sm", "siv", "s_grad", "b_grad"]
    assert list(ops[0].output) == ["X_grad", "s_grad", "b_grad"]


def test_multi_batch_needs_the_sums():
    op = CreateOperator("SpatialBN", ["X", "s", "b", "m", "v"], ["Y", "m", "v", "sm", "siv"], num_batches=2)
    feeds = {k: np.ones(2, np.float32) for k in "sbmv"}
    feeds["X"] = np.ones((1, 2, 1, 1), np.float32)
    with pytest.raises(ArgumentError, match="7 inputs"):
        run_fed(op, feeds)
