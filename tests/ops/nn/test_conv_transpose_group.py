"""ConvTranspose with group > 1 against per-group loop references (NCHW and NHWC), gradients
of X, filter and bias by central differences."""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.errors import FrameworkError
from framework.ops.testing import assert_gradient_checks, assert_reference_checks, run_op_on


def ref_convt_nchw(x, w, stride, pad):
    """One group: x (N, C, H, W), w (C, M, kh, kw)."""
    n, c, h, wd = x.shape
    m, kh, kw = w.shape[1:]
    full = np.zeros((n, m, (h - 1) * stride + kh, (wd - 1) * stride + kw))
    for i, j in itertools.product(range(h), range(wd)):
        for a, b in itertools.product(range(kh), range(kw)):
            full[:, :, i * stride + a, j * stride + b] += x[:, :, i, j] @ w[:, :, a, b]
    return full[:, :, pad : full.shape[2] - pad, pad : full.shape[3] - pad]


def ref_grouped(x, w, b, group, stride, pad, order):
    if order == "NHWC":
        x, w = x.transpose(0, 3, 1, 2), w.transpose(0, 3, 1, 2)
    cg = x.shape[1] // group
    ys = [ref_convt_nchw(x[:, k * cg : (k + 1) * cg], w[k * cg : (k + 1) * cg], stride, pad) for k in range(group)]
    y = np.concatenate(ys, axis=1)
    if b is not None:
        y = y + b.reshape(1, -1, 1, 1)
    return y if order == "NCHW" else y.transpose(0, 2, 3, 1)


@pytest.mark.parametrize("order", ["NCHW", "NHWC"])
@given(
    group=st.integers(2, 3),
    cg=st.integers(1, 2),
    mg=st.integers(1, 2),
    k=st.integers(1, 3),
    stride=st.integers(1, 2),
    pad=st.integers(0, 1),
    bias=st.booleans(),
    seed=st.integers(0, 2**16),
)
@settings(max_examples=12, deadline=None)
def test_grouped_conv_transpose(order, group, cg, mg, k, stride, pad, bias, seed):
    rng = np.random.default_rng(seed)
    h, wd = 2, 3
    if (min(h, wd) - 1) * stride + k - 2 * pad < 1:
        return
    x = rng.standard_normal((1, group * cg, h, wd))
    w = rng.standard_normal((group * cg, mg, k, k))
    b = rng.standard_normal(group * mg) if bias else None
    if order == "NHWC":
        x, w = x.transpose(0, 2, 3, 1).copy(), w.transpose(0, 2, 3, 1).copy()
    inputs = [x, w] + ([b] if bias else [])
    op = CreateOperator(
        "ConvTranspose",
        ["X", "W", "b"][: len(inputs)],
        ["Y"],
        kernel=k,
        stride=stride,
        pad=pad,
        group=group,
        order=order,
    )
    assert_reference_checks(op, inputs, lambda *a: ref_grouped(a[0], a[1], b, group, stride, pad, order))
    for which in range(len(inputs)):
        assert_gradient_checks(op, inputs, which, stepsize=1e-3, threshold=1e-3)


def test_grouped_filter_update_is_seen():
    x = np.ones((1, 2, 2, 2), np.float32)
    op = CreateOperator("ConvTranspose", ["X", "W"], ["Y"], kernel=1, group=2)
    (y1,) = run_op_on(op, [x, np.ones((2, 1, 1, 1), np.float32)])
    (y2,) = run_op_on(op, [x, np.full((2, 1, 1, 1), 2.0, np.float32)])
    assert y1.shape == (1, 2, 2, 2) and np.all(y2 == 2 * y1)
    with pytest.raises(FrameworkError, match="ConvTranspose.*multiple of group"):
        run_op_on(op, [np.ones((1, 3, 2, 2), np.float32), np.ones((3, 1, 1, 1), np.float32)])
