"""Layout and image ops against loop-based numpy references."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.errors import ArgumentError, ShapeError
from framework.memory.workspace import Workspace
from framework.ops import create_operator
from framework.ops.testing import assert_gradient_checks, assert_reference_checks, feed_inputs

shapes4 = st.tuples(st.integers(1, 2), st.integers(1, 4), st.integers(1, 4), st.integers(1, 4))


@given(shape=st.lists(st.integers(0, 3), min_size=3, max_size=5))
def test_layout_transposes(shape):
    x = np.random.default_rng(0).standard_normal(shape)
    op = CreateOperator("NCHW2NHWC", ["X"], ["Y"])
    ref = np.empty((shape[0], *shape[2:], shape[1]))
    for c in range(shape[1]):
        ref[..., c] = x[:, c]
    assert_reference_checks(op, [x], lambda x: ref)
    back = CreateOperator("NHWC2NCHW", ["Y"], ["Z"])
    assert_reference_checks(back, [ref], lambda y: x)
    if x.size and x.size < 60:
        assert_gradient_checks(op, [x], 0)
        assert_gradient_checks(back, [ref], 0)
    xi = np.arange(np.prod(shape), dtype=np.int32).reshape(shape)
    assert_reference_checks(op, [xi], lambda x: np.moveaxis(x, 1, -1))


@given(shape=shapes4, group=st.integers(1, 3), order=st.sampled_from(["NCHW", "NHWC"]))
def test_channel_shuffle(shape, group, order):
    n, k, h, w = shape
    c = k * group
    x = np.random.default_rng(1).standard_normal((n, c, h, w))
    ref = np.empty_like(x)
    for j in range(c):  # output channel j = k_idx * group + g reads input g * K + k_idx
        g, kk = j % group, j // group
        ref[:, j] = x[:, g * k + kk]
    if order == "NHWC":
        x, ref = np.moveaxis(x, 1, -1).copy(), np.moveaxis(ref, 1, -1).copy()
    op = CreateOperator("ChannelShuffle", ["X"], ["Y"], group=group, order=order)
    assert_reference_checks(op, [x], lambda x: ref)
    if x.size < 80:
        assert_gradient_checks(op, [x], 0)


def test_channel_shuffle_error():
    ws = Workspace()
    op = CreateOperator("ChannelShuffle", ["X"], ["Y"], group=3, name="cs")
    feed_inputs(ws, op, [np.zeros((1, 4, 2, 2), np.float32)])
    with pytest.raises(ShapeError, match="cs.*not divisible by group 3"):
        create_operator(op, ws).run()


@given(
    shape=shapes4,
    pads=st.tuples(*[st.integers(0, 2)] * 4),
    mode=st.sampled_from(["constant", "reflect", "edge"]),
    order=st.sampled_from(["NCHW", "NHWC"]),
)
@settings(max_examples=40)
def test_pad_image(shape, pads, mode, order):
    n, c, h, w = shape
    t, l, b, r = pads
    if mode == "reflect" and (max(t, b) >= h or max(l, r) >= w):
        return
    x = np.random.default_rng(2).standard_normal(shape)

    def src(i, size):
        if mode == "edge":
            return min(max(i, 0), size - 1)
        if i < 0:
            return -i
        if i >= size:
            return 2 * (size - 1) - i
        return i

    ref = np.full((n, c, h + t + b, w + l + r), 0.5)
    for i in range(h + t + b):
        for j in range(w + l + r):
            ii, jj = i - t, j - l
            if mode == "constant":
                if 0 <= ii < h and 0 <= jj < w:
                    ref[:, :, i, j] = x[:, :, ii, jj]
            else:
                ref[:, :, i, j] = x[:, :, src(ii, h), src(jj, w)]
    if order == "NHWC":
        x, ref = np.moveaxis(x, 1, -1).copy(), np.moveaxis(ref, 1, -1).copy()
    op = CreateOperator("PadImage", ["X"], ["Y"], pad_t=t, pad_l=l, pad_b=b, pad_r=r, mode=mode, value=0.5, order=order)
    assert_reference_checks(op, [x], lambda x: ref)
    if x.size < 40:
        assert_gradient_checks(op, [x], 0)


def test_pad_image_errors():
    with pytest.raises(ArgumentError, match="mode"):
        create_operator(CreateOperator("PadImage", ["X"], ["Y"], pad=1, mode="wrap"), Workspace())


@given(
    shape=shapes4,
    k=st.integers(1, 2),
    stride=st.integers(1, 2),
    pad=st.integers(0, 1),
    order=st.sampled_from(["NCHW", "NHWC"]),
)
def test_im2col(shape, k, stride, pad, order):
    n, c, h, w = shape
    if h + 2 * pad < k or w + 2 * pad < k:
        return
    x = np.random.default_rng(3).standard_normal(shape)
    oh, ow = (h + 2 * pad - k) // stride + 1, (w + 2 * pad - k) // stride + 1
    ref = np.zeros((n, c, k, k, oh, ow))
    for i in range(oh):
        for j in range(ow):
            for a in range(k):
                for b in range(k):
                    y, xx = i * stride - pad + a, j * stride - pad + b
                    if 0 <= y < h and 0 <= xx < w:
                        ref[:, :, a, b, i, j] = x[:, :, y, xx]
    if order == "NCHW":
        expect = ref.reshape(n, c * k * k, oh, ow)
    else:
        x = np.moveaxis(x, 1, -1).copy()
        expect = ref.transpose(0, 4, 5, 2, 3, 1).reshape(n, oh, ow, k * k * c)
    op = CreateOperator("Im2Col", ["X"], ["Y"], kernel=k, stride=stride, pad=pad, order=order)
    assert_reference_checks(op, [x], lambda x: expect)
    if x.size < 40:
        assert_gradient_checks(op, [x], 0)


@given(
    shape=shapes4,
    hs=st.sampled_from([0.5, 1.0, 1.5, 2.0]),
    ws=st.sampled_from([0.5, 1.0, 2.0, 3.0]),
    order=st.sampled_from(["NCHW", "NHWC"]),
)
def test_resize_nearest(shape, hs, ws, order):
    n, c, h, w = shape
    x = np.random.default_rng(4).standard_normal(shape)
    oh, ow = int(h * hs), int(w * ws)
    ref = np.zeros((n, c, oh, ow))
    for i in range(oh):
        for j in range(ow):
            ref[:, :, i, j] = x[:, :, min(int(i / hs), h - 1), min(int(j / ws), w - 1)]
    if order == "NHWC":
        x, ref = np.moveaxis(x, 1, -1).copy(), np.moveaxis(ref, 1, -1).copy()
    op = CreateOperator("ResizeNearest", ["X"], ["Y"], width_scale=ws, height_scale=hs, order=order)
    assert_reference_checks(op, [x], lambda x: ref)
    if x.size < 40 and ref.size:
        assert_gradient_checks(op, [x], 0)
