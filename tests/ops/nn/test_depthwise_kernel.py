"""Depthwise convs on the 3x3/5x5 kernel (framework/kernels/depthwise3.py) and on the numpy strategy beside
it: hypothesis over sizes (odd ones included), strides 1 and 2, paddings, batch, bias, residual and Relu, each
against an independent float64 reference."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.kernels import conv_nchw, conv_strategies, kernel_support, window_jit
from framework.kernels.geometry import Geometry


def _reference(x, w, b, k, s, pad):
    x, w = x.astype(np.float64), w.astype(np.float64)
    n, c, h, wd = x.shape
    oh, ow = (h + 2 * pad - k) // s + 1, (wd + 2 * pad - k) // s + 1
    xp = np.zeros((n, c, h + 2 * pad, wd + 2 * pad))
    xp[:, :, pad : pad + h, pad : pad + wd] = x
    y = np.zeros((n, c, oh, ow))
    for a in range(k):
        for bb in range(k):
            y += (
                xp[:, :, a : a + s * (oh - 1) + 1 : s, bb : bb + s * (ow - 1) + 1 : s]
                * w[None, :, 0, a, bb, None, None]
            )
    return y + b[None, :, None, None]


def _kernel_usable() -> bool:
    return window_jit.available() and kernel_support.usable("depthwise3")


@settings(max_examples=40, deadline=None)
@given(
    k=st.sampled_from([3, 5]),
    s=st.sampled_from([1, 2]),
    pad=st.integers(0, 2),
    h=st.integers(5, 23),
    w_=st.integers(5, 41),
    c=st.integers(2, 9),
    n=st.integers(1, 2),
    residual=st.booleans(),
    relu=st.sampled_from([0, 1, 2]),
    numpy_path=st.booleans(),
)
def test_depthwise_equals_the_reference(k, s, pad, h, w_, c, n, residual, relu, numpy_path):
    if not numpy_path and not _kernel_usable():
        pytest.skip("the depthwise3 kernel is not usable here")
    pad = min(pad, k - 1)
    oh, ow = (h + 2 * pad - k) // s + 1, (w_ + 2 * pad - k) // s + 1
    if oh < 1 or ow < 1:
        return
    geo = Geometry((h, w_), (k, k), (s, s), (1, 1), (pad, pad), (pad, pad), (oh, ow))
    rng = np.random.default_rng(h * 100 + w_ + c)
    x = (rng.standard_normal((n, c, h, w_)) * 3).astype(np.float32)
    wt = rng.standard_normal((c, 1, k, k)).astype(np.float32)
    b = rng.standard_normal(c).astype(np.float32)
    with pytest.MonkeyPatch.context() as mp:
        if numpy_path:
            for name in ("depthwise3", "direct_depthwise", "depthwise_planes"):
                mp.setattr(conv_strategies.BY_NAME[name], "enabled", False)
        conv = conv_nchw.ConvNCHW(n, c, c, c, geo, np.float32, True, relu=relu, residual=residual)
        want_name = "depthwise" if numpy_path else "depthwise3"
        assert conv.strategy.name == want_name
        sres = rng.standard_normal((n, c, oh, ow)).astype(np.float32) if residual else None
        y = np.empty((n, c, oh, ow), np.float32)
        for _ in range(2):
            conv.run(x, wt, b, y, sres)
    want = _reference(x, wt, b, k, s, pad) + (sres if residual else 0)
    if relu:
        want = np.clip(want, 0, 6 if relu == 2 else None)
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-4 * max(1.0, np.abs(want).max()))


def _reference_pads(x, w, b, k, s, head, tail):
    """float64 depthwise conv with the zero rows/columns ``head`` before and ``tail`` after the image."""
    x, w = x.astype(np.float64), w.astype(np.float64)
    n, c, h, wd = x.shape
    xp = np.zeros((n, c, h + head[0] + tail[0], wd + head[1] + tail[1]))
    xp[:, :, head[0] : head[0] + h, head[1] : head[1] + wd] = x
    oh, ow = (xp.shape[2] - k) // s + 1, (xp.shape[3] - k) // s + 1
    y = np.zeros((n, c, oh, ow))
    for a in range(k):
        for bb in range(k):
            y += (
                xp[:, :, a : a + s * (oh - 1) + 1 : s, bb : bb + s * (ow - 1) + 1 : s]
                * w[None, :, 0, a, bb, None, None]
            )
    return y + b[None, :, None, None]


@settings(max_examples=40, deadline=None)
@given(
    k=st.sampled_from([3, 5]),
    s=st.sampled_from([1, 2]),
    pads=st.tuples(st.integers(0, 4), st.integers(0, 4), st.integers(0, 4), st.integers(0, 4)),
    h=st.integers(1, 12),
    w_=st.integers(1, 40),
    act=st.sampled_from([0, 1, 2]),
)
def test_depthwise_kernel_reads_the_image_with_any_padding(k, s, pads, h, w_, act):
    """The kernel reads the image itself (no bordered copy): rows and columns of windows outside it, unequal
    padding on the two sides, padding wider than the window and images smaller than it all count as zeros."""
    if not _kernel_usable():
        pytest.skip("the depthwise3 kernel is not usable here")
    head, tail = (pads[0], pads[1]), (pads[2], pads[3])
    oh, ow = (h + head[0] + tail[0] - k) // s + 1, (w_ + head[1] + tail[1] - k) // s + 1
    if oh < 1 or ow < 1:
        return
    geo = Geometry((h, w_), (k, k), (s, s), (1, 1), head, tail, (oh, ow))
    rng = np.random.default_rng(h * 1000 + w_ * 10 + k)
    c = 3
    x = rng.standard_normal((1, c, h, w_)).astype(np.float32)
    wt = rng.standard_normal((c, 1, k, k)).astype(np.float32)
    b = rng.standard_normal(c).astype(np.float32)
    conv = conv_nchw.ConvNCHW(1, c, c, c, geo, np.float32, True, relu=act)
    assert conv.strategy.name == "depthwise3"
    y = np.full((1, c, oh, ow), np.nan, np.float32)
    conv.run(x, wt, b, y, None)
    want = _reference_pads(x, wt, b, k, s, head, tail)
    if act:
        want = np.clip(want, 0, 6 if act == 2 else None)
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-5 * max(1.0, np.abs(want).max()))


@pytest.mark.parametrize(
    "k,h,w_,head,tail",
    [
        (3, 7, 7, (1, 1), (1, 1)),
        (5, 7, 7, (2, 2), (2, 2)),
        (5, 14, 14, (2, 2), (2, 2)),
        (3, 16, 16, (1, 1), (1, 1)),
        (5, 5, 29, (2, 2), (2, 2)),
        (3, 9, 4, (2, 0), (0, 2)),
        (5, 3, 11, (1, 3), (3, 1)),
        (3, 1, 1, (1, 1), (1, 1)),
        (5, 2, 3, (2, 2), (2, 2)),
    ],
)
@pytest.mark.parametrize("act,residual", [(0, False), (2, True)])
def test_narrow_images_in_flat_runs_of_pixels(k, h, w_, head, tail, act, residual):
    """Stride 1, output shaped as the image, at most L (3x3) or 2L (5x5) wide: the flat steps, whose vectors run
    over several rows, each lane masked by its own row and column (any split of the padding)."""
    if not _kernel_usable():
        pytest.skip("the depthwise3 kernel is not usable here")
    geo = Geometry((h, w_), (k, k), (1, 1), (1, 1), head, tail, (h, w_))
    rng = np.random.default_rng(k * 1000 + h * 31 + w_)
    n, c = 2, 5
    x = rng.standard_normal((n, c, h, w_)).astype(np.float32)
    wt = rng.standard_normal((c, 1, k, k)).astype(np.float32)
    b = rng.standard_normal(c).astype(np.float32)
    conv = conv_nchw.ConvNCHW(n, c, c, c, geo, np.float32, True, relu=act, residual=residual)
    assert conv.strategy.name == "depthwise3"
    sres = rng.standard_normal((n, c, h, w_)).astype(np.float32) if residual else None
    y = np.full((n, c, h, w_), np.nan, np.float32)
    conv.run(x, wt, b, y, sres)
    want = _reference_pads(x, wt, b, k, 1, head, tail) + (sres if residual else 0)
    if act:
        want = np.clip(want, 0, 6 if act == 2 else None)
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-5 * max(1.0, np.abs(want).max()))
