"""DeformConv against a per-sample loop reference (deformable groups, conv groups, stride,
padding, dilation), gradients of X, offset, filter and bias by central differences."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.errors import FrameworkError
from framework.ops import get_gradient_for_op
from framework.ops.testing import assert_gradient_checks, assert_reference_checks, run_op_on


def sample(img, h, w):
    """One deformable sample of img (H x W): 0 outside, bilinear clamped at the last row/col."""
    hgt, wid = img.shape
    if not (h >= 0 and w >= 0 and h < hgt and w < wid):
        return 0.0
    hl, wl = math.floor(h), math.floor(w)
    if hl >= hgt - 1:
        hl = hh = hgt - 1
        h = float(hl)
    else:
        hh = hl + 1
    if wl >= wid - 1:
        wl = wh = wid - 1
        w = float(wl)
    else:
        wh = wl + 1
    lh, lw = h - hl, w - wl
    return (
        (1 - lh) * (1 - lw) * img[hl, wl]
        + (1 - lh) * lw * img[hl, wh]
        + lh * (1 - lw) * img[hh, wl]
        + lh * lw * img[hh, wh]
    )


def ref_deform(x, off, wt, b, stride, pad, dil, group, dg):
    n, c, hgt, wid = x.shape
    m, cg, kh, kw = wt.shape
    ho = (hgt + 2 * pad - dil * (kh - 1) - 1) // stride + 1
    wo = (wid + 2 * pad - dil * (kw - 1) - 1) // stride + 1
    y = np.zeros((n, m, ho, wo))
    for bi in range(n):
        for oc in range(m):
            g = oc // (m // group)
            for oh in range(ho):
                for ow in range(wo):
                    acc = 0.0 if b is None else b[oc]
                    for ci in range(cg):
                        ch = g * cg + ci
                        d = ch // (c // dg)
                        for i in range(kh):
                            for j in range(kw):
                                k = i * kw + j
                                dh = off[bi, d * 2 * kh * kw + 2 * k, oh, ow]
                                dw = off[bi, d * 2 * kh * kw + 2 * k + 1, oh, ow]
                                v = sample(
                                    x[bi, ch], oh * stride - pad + i * dil + dh, ow * stride - pad + j * dil + dw
                                )
                                acc += wt[oc, ci, i, j] * v
                    y[bi, oc, oh, ow] = acc
    return y


@given(
    k=st.integers(1, 3),
    stride=st.integers(1, 2),
    pad=st.integers(0, 1),
    dil=st.integers(1, 2),
    groups=st.sampled_from([(1, 1), (2, 1), (1, 2), (2, 2)]),
    bias=st.booleans(),
    seed=st.integers(0, 2**16),
)
@settings(max_examples=10, deadline=None)
def test_deform_conv(k, stride, pad, dil, groups, bias, seed):
    group, dg = groups
    if group > 1:
        dil = 1  # ConvPoolOpBase refuses dilation with group
    rng = np.random.default_rng(seed)
    n, c, m, hgt, wid = 1, 2 * max(group, dg), 2 * group, 4, 5
    ho = (hgt + 2 * pad - dil * (k - 1) - 1) // stride + 1
    wo = (wid + 2 * pad - dil * (k - 1) - 1) // stride + 1
    if ho < 1 or wo < 1:
        return
    x = rng.standard_normal((n, c, hgt, wid))
    # offsets kept 0.2 away from integers: no sample sits on a bilinear cell edge
    off = rng.integers(-2, 2, (n, 2 * dg * k * k, ho, wo)) + rng.uniform(0.2, 0.8, (n, 2 * dg * k * k, ho, wo))
    w = rng.standard_normal((m, c // group, k, k))
    b = rng.standard_normal(m) if bias else None
    ins = [x, off, w] + ([b] if bias else [])
    op = CreateOperator(
        "DeformConv",
        ["X", "O", "W", "b"][: len(ins)],
        ["Y"],
        kernel=k,
        stride=stride,
        pad=pad,
        dilation=dil,
        group=group,
        deformable_group=dg,
    )
    assert_reference_checks(op, ins, lambda *a: ref_deform(a[0], a[1], a[2], b, stride, pad, dil, group, dg))
    for i in range(len(ins)):
        assert_gradient_checks(op, ins, i, stepsize=1e-4, threshold=2e-3)


def test_deform_conv_wiring_and_errors():
    op = CreateOperator("DeformConv", ["X", "O", "W", "b"], ["Y"], kernel=1)
    ops, _ = get_gradient_for_op(op, ["Y_grad"])
    assert [(o.type, list(o.input), list(o.output)) for o in ops] == [
        ("DeformConvGradient", ["X", "O", "W", "Y_grad"], ["O_grad", "W_grad", "b_grad", "X_grad"])
    ]
    with pytest.raises(FrameworkError, match="DeformConv.*'O'"):
        run_op_on(
            CreateOperator("DeformConv", ["X", "O", "W"], ["Y"], kernel=1),
            [np.ones((1, 1, 2, 2)), np.ones((1, 3, 2, 2)), np.ones((1, 1, 1, 1))],
        )
