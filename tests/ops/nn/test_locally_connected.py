"""LC, LC1D, LC2D, LC3D (locally connected layers) against a per-position loop reference,
NCHW and NHWC, with gradient checks of X, filter and bias."""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.errors import FrameworkError
from framework.ops import get_gradient_for_op
from framework.ops.testing import assert_gradient_checks, assert_reference_checks, run_op_on


def ref_lc(x, w, b, kernel, stride, pad, order):
    """x NCHW-like (N, C, *sp); w (*out, M, C, *kernel)."""
    if order == "NHWC":
        x = np.moveaxis(x, -1, 1)
        w = np.moveaxis(w, -1, 3)  # (oh, ow, M, C, kh, kw)
    r = x.ndim - 2
    xp = np.pad(x, [(0, 0), (0, 0)] + [(pad, pad)] * r)
    out = [(x.shape[2 + i] + 2 * pad - kernel) // stride + 1 for i in range(r)]
    n, m = x.shape[0], w.shape[r]
    y = np.zeros((n, m, *out))
    for pos in itertools.product(*(range(o) for o in out)):
        win = xp[(slice(None), slice(None)) + tuple(slice(p * stride, p * stride + kernel) for p in pos)]
        y[(slice(None), slice(None)) + pos] = np.tensordot(
            win, w[pos], axes=(list(range(1, win.ndim)), list(range(1, win.ndim)))
        )
        if b is not None:
            y[(slice(None), slice(None)) + pos] += b[pos]
    return y if order == "NCHW" else np.moveaxis(y, 1, -1)


@pytest.mark.parametrize(
    "op_type,rank,order",
    [("LC1D", 1, "NCHW"), ("LC2D", 2, "NCHW"), ("LC", 2, "NHWC"), ("LC3D", 3, "NCHW"), ("LC", 1, "NCHW")],
)
@given(
    k=st.integers(1, 2), stride=st.integers(1, 2), pad=st.integers(0, 1), bias=st.booleans(), seed=st.integers(0, 2**16)
)
@settings(max_examples=8, deadline=None)
def test_locally_connected(op_type, rank, order, k, stride, pad, bias, seed):
    rng = np.random.default_rng(seed)
    sp = [3] * rank if rank < 3 else [2, 2, 2]
    out = [(s + 2 * pad - k) // stride + 1 for s in sp]
    if min(out) < 1:
        return
    n, c, m = 2, 2, 2
    x = rng.standard_normal((n, c, *sp))
    w = rng.standard_normal((*out, m, c) + (k,) * rank)
    if order == "NHWC":
        x = np.moveaxis(x, 1, -1).copy()
        w = np.moveaxis(w, rank + 1, -1).copy()
    b = rng.standard_normal((*out, m)) if bias else None
    ins = [x, w] + ([b] if bias else [])
    op = CreateOperator(op_type, ["X", "W", "b"][: len(ins)], ["Y"], kernel=k, stride=stride, pad=pad, order=order)
    assert_reference_checks(op, ins, lambda *a: ref_lc(a[0], a[1], b, k, stride, pad, order))
    for i in range(len(ins)):
        assert_gradient_checks(op, ins, i, stepsize=1e-3, threshold=1e-3)


def test_lc_gradient_wiring_and_errors():
    op = CreateOperator("LC2D", ["X", "W"], ["Y"], kernel=1)
    ops, g = get_gradient_for_op(op, ["Y_grad"])
    assert [(o.type, list(o.input), list(o.output)) for o in ops] == [
        ("LC2DGradient", ["X", "W", "Y_grad"], ["W_grad", "X_grad"])
    ]
    op3 = CreateOperator("LC", ["X", "W", "b"], ["Y"], kernel=1, no_gradient_to_input=1)
    ops, _ = get_gradient_for_op(op3, ["Y_grad"])
    assert list(ops[0].output) == ["W_grad", "b_grad"]
    with pytest.raises(FrameworkError, match="LC2D.*'W'"):
        run_op_on(op, [np.ones((1, 2, 3, 3)), np.ones((3, 3, 4, 3, 1, 1))])
    with pytest.raises(FrameworkError, match="group"):
        run_op_on(
            CreateOperator("LC", ["X", "W"], ["Y"], kernel=1, group=2),
            [np.ones((1, 2, 3, 3)), np.ones((3, 3, 2, 1, 1, 1))],
        )


def test_lc_needs_spatial_dims():
    with pytest.raises(FrameworkError, match="LC.*'X'"):
        run_op_on(CreateOperator("LC", ["X", "W"], ["Y"], kernel=1), [np.ones(3), np.ones(3)])
