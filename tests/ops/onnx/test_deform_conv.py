"""ONNXDeformConv against a per-tap loop with zero-padded bilinear sampling."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.errors import FrameworkError
from framework.ops.testing import assert_reference_checks, run_op_on


def bilinear(img, y, x):
    h, w = img.shape
    y0, x0 = math.floor(y), math.floor(x)
    total = 0.0
    for yy in (y0, y0 + 1):
        for xx in (x0, x0 + 1):
            if 0 <= yy < h and 0 <= xx < w:
                total += (1 - abs(y - yy)) * (1 - abs(x - xx)) * float(img[yy, xx])
    return total


def ref_deform(x, w, off, b, mask, st, pads, dil, g, og):
    n, c, h, wd = x.shape
    m, cpg, kh, kw = w.shape
    oh, ow = off.shape[2:]
    y = np.zeros((n, m, oh, ow))
    for ni, mi, i, j in np.ndindex(n, m, oh, ow):
        grp = mi // (m // g)
        acc = 0.0 if b is None else float(b[mi])
        for ci in range(grp * cpg, (grp + 1) * cpg):
            o = ci // (c // og)
            for a, bb in np.ndindex(kh, kw):
                t = (o * kh + a) * kw + bb
                yy = i * st[0] - pads[0] + a * dil[0] + off[ni, 2 * t, i, j]
                xx = j * st[1] - pads[1] + bb * dil[1] + off[ni, 2 * t + 1, i, j]
                v = bilinear(x[ni, ci], yy, xx) * (1.0 if mask is None else mask[ni, t, i, j])
                acc += v * w[mi, ci - grp * cpg, a, bb]
        y[ni, mi, i, j] = acc
    return y


@settings(max_examples=15, deadline=None)
@given(
    seed=st.integers(0, 999),
    g=st.sampled_from([1, 2]),
    og=st.sampled_from([1, 2]),
    bias=st.booleans(),
    with_mask=st.booleans(),
    stride=st.integers(1, 2),
    pad=st.integers(0, 1),
    dil=st.integers(1, 2),
)
def test_deform_conv_matches_loop(seed, g, og, bias, with_mask, stride, pad, dil):
    rng = np.random.default_rng(seed)
    n, c, h, wd, m, kh, kw = 1, 2, 4, 5, 2, 2, 2
    x = rng.standard_normal((n, c, h, wd)).astype(np.float32)
    w = rng.standard_normal((m, c // g, kh, kw)).astype(np.float32)
    oh = (h + 2 * pad - ((kh - 1) * dil + 1)) // stride + 1
    ow = (wd + 2 * pad - ((kw - 1) * dil + 1)) // stride + 1
    off = (rng.standard_normal((n, og * kh * kw * 2, oh, ow)) * 1.5).astype(np.float32)
    b = rng.standard_normal(m).astype(np.float32) if bias else None
    mask = rng.random((n, og * kh * kw, oh, ow)).astype(np.float32) if with_mask else None
    ins, names = [x, w, off], ["x", "w", "off"]
    if bias:
        ins, names = ins + [b], names + ["b"]
    if with_mask:
        ins, names = ins + [mask], names + ["mask"]
    st_, pads, dils = [stride] * 2, [pad] * 4, [dil] * 2
    op = CreateOperator(
        "ONNXDeformConv",
        names,
        ["y"],
        has_bias=int(bias),
        has_mask=int(with_mask),
        strides=st_,
        pads=pads,
        dilations=dils,
        group=g,
        offset_group=og,
    )
    assert_reference_checks(op, ins, lambda *_: ref_deform(x, w, off, b, mask, st_, pads, dils, g, og), threshold=1e-4)


def test_deform_conv_bad_offset_names_the_blob():
    x, w = np.zeros((1, 1, 3, 3), np.float32), np.zeros((1, 1, 2, 2), np.float32)
    with pytest.raises(FrameworkError, match="offset 'off'"):
        run_op_on(
            CreateOperator("ONNXDeformConv", ["x", "w", "off"], ["y"]), [x, w, np.zeros((1, 8, 3, 3), np.float32)]
        )
