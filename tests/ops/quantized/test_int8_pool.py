"""Int8MaxPool(+Relu) / Int8AveragePool(+Relu) / Int8ResizeNearest against loop references of QNNPACK's
arithmetic (border-clamped max pooling; zero-point padding and the fixed-point avgpool requantization),
the average also checked against the float average (QNNPACK's own tests allow 0.8 of a step)."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.errors import FrameworkError
from framework.memory.workspace import Workspace
from tests.ops.quantized.int8_helpers import check_int8, q8

f32 = np.float32


def geometry(draw):
    k = draw(st.integers(1, 3))
    s = draw(st.integers(1, 2))
    p = draw(st.integers(0, k - 1))
    h = draw(st.integers(max(1, k - 2 * p), 5))
    w = draw(st.integers(max(1, k - 2 * p), 5))
    n = draw(st.integers(0, 2))
    c = draw(st.integers(1, 3))
    return n, h, w, c, k, s, p


def ref_max(x, k, s, p, lo):
    n, h, w, c = x.shape
    oh, ow = (h + 2 * p - k) // s + 1, (w + 2 * p - k) // s + 1
    y = np.zeros((n, oh, ow, c), np.uint8)
    for b, oy, ox, ch in np.ndindex(y.shape):
        best = 0
        for ky in range(k):
            for kx in range(k):
                iy = min(max(oy * s + ky - p, 0), h - 1)
                ix = min(max(ox * s + kx - p, 0), w - 1)
                best = max(best, int(x[b, iy, ix, ch]))
        y[b, oy, ox, ch] = max(best, lo)
    return y


def bits(v):
    return struct.unpack("<I", struct.pack("<f", v))[0]


def ref_avg(x, x_scale, x_zp, y_scale, y_zp, k, s, p, relu):
    n, h, w, c = x.shape
    oh, ow = (h + 2 * p - k) // s + 1, (w + 2 * p - k) // s + 1
    scale = f32(f32(x_scale) / f32(f32(y_scale) * f32(k * k)))
    mult = (bits(scale) & 0x7FFFFF) | 0x800000
    shift = 150 - (bits(scale) >> 23)
    y = np.zeros((n, oh, ow, c), np.uint8)
    floats = np.zeros((n, oh, ow, c))
    lo = y_zp if relu else 0
    for b, oy, ox, ch in np.ndindex(y.shape):
        acc = 0
        for ky in range(k):
            for kx in range(k):
                iy, ix = oy * s + ky - p, ox * s + kx - p
                if 0 <= iy < h and 0 <= ix < w:
                    acc += int(x[b, iy, ix, ch]) - x_zp
        prod = acc * mult - (1 if acc < 0 else 0)
        v = (prod + (1 << (shift - 1))) >> shift  # Python's >> floors, as an arithmetic shift
        y[b, oy, ox, ch] = min(max(v + y_zp, lo), 255)
        floats[b, oy, ox, ch] = acc * x_scale / (y_scale * k * k) + y_zp
    return y, floats


@pytest.mark.parametrize("relu", [False, True])
@settings(max_examples=20, deadline=None)
@given(data=st.data(), zp=st.integers(0, 255), seed=st.integers(0, 2**16))
def test_max_pool(relu, data, zp, seed):
    n, h, w, c, k, s, p = geometry(data.draw)
    x = np.random.default_rng(seed).integers(0, 256, (n, h, w, c)).astype(np.uint8)
    op = CreateOperator(
        "Int8MaxPoolRelu" if relu else "Int8MaxPool", ["X"], ["Y"], kernel=k, stride=s, pad=p, order="NHWC",
        Y_scale=0.1, Y_zero_point=zp,
    )  # fmt: skip
    check_int8(op, [q8(x, 0.1, zp)], [(ref_max(x, k, s, p, zp if relu else 0), 0.1, zp)])


@pytest.mark.parametrize("relu", [False, True])
@settings(max_examples=20, deadline=None)
@given(
    data=st.data(),
    x_zp=st.integers(0, 255),
    y_zp=st.integers(0, 255),
    x_scale=st.sampled_from([0.01, 0.05, 0.3]),
    y_scale=st.sampled_from([0.01, 0.02, 0.1]),
    seed=st.integers(0, 2**16),
)
def test_average_pool(relu, data, x_zp, y_zp, x_scale, y_scale, seed):
    n, h, w, c, k, s, p = geometry(data.draw)
    x = np.random.default_rng(seed).integers(0, 256, (n, h, w, c)).astype(np.uint8)
    op = CreateOperator(
        "Int8AveragePoolRelu" if relu else "Int8AveragePool", ["X"], ["Y"], kernel=k, stride=s, pad=p,
        order="NHWC", Y_scale=y_scale, Y_zero_point=y_zp,
    )  # fmt: skip
    expected, floats = ref_avg(x, x_scale, x_zp, y_scale, y_zp, k, s, p, relu)
    (y,) = check_int8(op, [q8(x, x_scale, x_zp)], [(expected, y_scale, y_zp)])
    inside = (floats > (y_zp if relu else 0)) & (floats < 255)
    assert np.all(np.abs(y.numpy() - floats)[inside] <= 0.5 + 1e-3)


def test_global_average_pool_and_legacy_padding():
    x = np.random.default_rng(3).integers(0, 256, (2, 3, 4, 5)).astype(np.uint8)
    op = CreateOperator("Int8AveragePool", ["X"], ["Y"], global_pooling=1, order="NHWC", Y_scale=0.5, Y_zero_point=9)
    acc = x.astype(np.int64).sum(axis=(1, 2)) - 3 * 12  # x_zp 3, 12 cells
    scale = f32(f32(0.25) / f32(f32(0.5) * f32(12)))
    mult, shift = (bits(scale) & 0x7FFFFF) | 0x800000, 150 - (bits(scale) >> 23)
    expected = np.clip(((acc * mult - (acc < 0) + (1 << (shift - 1))) >> shift) + 9, 0, 255).astype(np.uint8)
    check_int8(op, [q8(x, 0.25, 3)], [(expected.reshape(2, 1, 1, 5), 0.5, 9)])
    # CAFFE_LEGACY_POOLING (ceil mode): 5 -> 3 outputs with kernel 2, stride 2; the last window reads the border
    x = np.arange(25, dtype=np.uint8).reshape(1, 5, 5, 1)
    op = CreateOperator(
        "Int8MaxPool", ["X"], ["Y"], kernel=2, stride=2, legacy_pad=3, order="NHWC", Y_scale=1.0, Y_zero_point=0
    )
    expected = np.array([[6, 8, 9], [16, 18, 19], [21, 23, 24]], np.uint8).reshape(1, 3, 3, 1)
    check_int8(op, [q8(x, 1.0, 0)], [(expected, 1.0, 0)])


def test_pool_errors():
    ws = Workspace()
    ws.feed_blob("X", q8(np.zeros((1, 4, 4, 2)), 0.1, 5))
    with pytest.raises(FrameworkError, match="only supports NHWC"):
        ws.run_operator_once(CreateOperator("Int8MaxPool", ["X"], ["Y"], kernel=2, Y_scale=0.1, Y_zero_point=5))
    with pytest.raises(FrameworkError, match="must equal the input's quantization"):
        ws.run_operator_once(CreateOperator("Int8MaxPool", ["X"], ["Y"], kernel=2, order="NHWC"))
    with pytest.raises(FrameworkError, match=r"2\*\*-8"):
        ws.run_operator_once(
            CreateOperator("Int8AveragePool", ["X"], ["Y"], kernel=2, order="NHWC", Y_scale=100.0, Y_zero_point=5)
        )
    ws.feed_blob("Z", q8(np.zeros((4, 4, 2)), 0.1, 5))
    with pytest.raises(FrameworkError, match="must be 4-D NHWC"):
        ws.run_operator_once(
            CreateOperator("Int8AveragePool", ["Z"], ["Y"], kernel=2, order="NHWC", Y_scale=0.1, Y_zero_point=5)
        )
    assert not ws.has_blob("Y") or ws.get_blob("Y").is_empty


@settings(max_examples=25, deadline=None)
@given(
    n=st.integers(0, 2), h=st.integers(0, 4), w=st.integers(1, 4), c=st.integers(1, 3),
    hs=st.sampled_from([0.5, 1.0, 1.5, 2.0, 3.0]), ws_=st.sampled_from([0.3, 1.0, 2.0, 2.5]),
    seed=st.integers(0, 2**16),
)  # fmt: skip
def test_resize_nearest(n, h, w, c, hs, ws_, seed):
    x = np.random.default_rng(seed).integers(0, 256, (n, h, w, c)).astype(np.uint8)
    oh, ow = int(f32(h) * f32(hs)), int(f32(w) * f32(ws_))
    expected = np.zeros((n, oh, ow, c), np.uint8)
    for b, y, xx in np.ndindex(n, oh, ow):
        iy = min(int(f32(y) / f32(hs)), h - 1)
        ix = min(int(f32(xx) / f32(ws_)), w - 1)
        expected[b, y, xx] = x[b, iy, ix]
    op = CreateOperator(
        "Int8ResizeNearest", ["X"], ["Y"], height_scale=hs, width_scale=ws_, Y_scale=0.2, Y_zero_point=1
    )
    check_int8(op, [q8(x, 0.2, 1)], [(expected, 0.2, 1)])
