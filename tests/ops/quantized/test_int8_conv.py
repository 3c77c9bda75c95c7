"""Int8FC / Int8Conv / Int8ConvRelu / Int8ConvTranspose against loop references: int32 accumulation of
(x - x_zp)(w - w_zp) + bias, then QNNPACK's scalar Q31 requantization written out in Python integers; each also
checked against the float result of the dequantized inputs (within one output step)."""

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
XS, XZ, WS, WZ = 0.02, 120, 0.01, 130


def requant(acc, x_scale, w_scale, y_scale, y_zp, lo):
    s = f32(f32(f32(x_scale) * f32(w_scale)) / f32(y_scale))
    bits = struct.unpack("<I", struct.pack("<f", s))[0]
    mult = ((bits & 0x7FFFFF) | 0x800000) << 7
    shift = 126 - (bits >> 23)
    q = (acc * mult + (1 << 30)) >> 31  # Python's >> is an arithmetic (floor) shift
    mask = (1 << shift) - 1
    rem = (q & mask) - (1 if acc < 0 else 0)
    v = (q >> shift) + (1 if rem > (mask >> 1) else 0)
    return min(max(v, lo - y_zp), 255 - y_zp) + y_zp


def rand(shape, seed):
    return np.random.default_rng(seed).integers(0, 256, shape).astype(np.uint8)


def bias(n, seed):
    return np.random.default_rng(seed).integers(-3000, 3000, n).astype(np.int32)


@settings(max_examples=20, deadline=None)
@given(m=st.integers(0, 4), k=st.integers(1, 6), n=st.integers(1, 5), y_zp=st.integers(0, 255),
       y_scale=st.sampled_from([0.05, 0.2, 1.0]), seed=st.integers(0, 2**16))  # fmt: skip
def test_fc(m, k, n, y_zp, y_scale, seed):
    x, w, b = rand((m, k), seed), rand((n, k), seed + 1), bias(n, seed + 2)
    expected = np.zeros((m, n), np.uint8)
    real = np.zeros((m, n))
    for i in range(m):
        for j in range(n):
            acc = sum((int(x[i, t]) - XZ) * (int(w[j, t]) - WZ) for t in range(k)) + int(b[j])
            expected[i, j] = requant(acc, XS, WS, y_scale, y_zp, 0)
            real[i, j] = acc * XS * WS / y_scale + y_zp
    op = CreateOperator("Int8FC", ["X", "W", "b"], ["Y"], Y_scale=y_scale, Y_zero_point=y_zp)
    (y,) = check_int8(op, [q8(x, XS, XZ), q8(w, WS, WZ), q8(b, XS * WS, 0)], [(expected, y_scale, y_zp)])
    inside = (real > 0.5) & (real < 254.5)
    assert np.all(np.abs(y.numpy() - real)[inside] <= 0.5 + 1e-3)


def test_fc_flattens_at_dim_1_and_checks_shapes():
    x, w, b = rand((2, 3, 2), 0), rand((4, 6), 1), bias(4, 2)
    op = CreateOperator("Int8FC", ["X", "W", "b"], ["Y"], Y_scale=0.5, Y_zero_point=7)
    ref = [[requant(int(((x.reshape(2, 6)[i].astype(int) - XZ) * (w[j].astype(int) - WZ)).sum()) + int(b[j]),
                    XS, WS, 0.5, 7, 0) for j in range(4)] for i in range(2)]  # fmt: skip
    check_int8(op, [q8(x, XS, XZ), q8(w, WS, WZ), q8(b, 1, 0)], [(np.array(ref, np.uint8), 0.5, 7)])
    ws = Workspace()
    ws.feed_blob("X", q8(x, XS, XZ))
    ws.feed_blob("W", q8(rand((4, 5), 1), WS, WZ))
    ws.feed_blob("b", q8(b, 1, 0))
    with pytest.raises(FrameworkError, match="gives K = 6"):
        ws.run_operator_once(CreateOperator("Int8FC", ["X", "W", "b"], ["Y"], Y_scale=0.5))
    ws.feed_blob("W", q8(w, WS, WZ))
    ws.feed_blob("b", q8(rand(4, 3), 1, 0))  # uint8 where the bias must be int32
    with pytest.raises(FrameworkError, match="int32"):
        ws.run_operator_once(CreateOperator("Int8FC", ["X", "W", "b"], ["Y"], Y_scale=0.5))
    ws.feed_blob("b", q8(b, 1, 0))
    with pytest.raises(FrameworkError, match=r"must lie in \[2\*\*-32, 1\)"):
        ws.run_operator_once(CreateOperator("Int8FC", ["X", "W", "b"], ["Y"], Y_scale=1e-5))
    assert not ws.has_blob("Y") or ws.get_blob("Y").is_empty


def conv_ref(x, w, b, stride, pad, dil, group, y_scale, y_zp, lo):
    n, h, wd, c = x.shape
    m, kh, kw, cg = w.shape
    oh = (h + 2 * pad - dil * (kh - 1) - 1) // stride + 1
    ow = (wd + 2 * pad - dil * (kw - 1) - 1) // stride + 1
    mg = m // group
    y = np.zeros((n, oh, ow, m), np.uint8)
    real = np.zeros(y.shape)
    for bi, oy, ox, mm in np.ndindex(y.shape):
        gi = mm // mg
        acc = int(b[mm])
        for ky in range(kh):
            for kx in range(kw):
                iy, ix = oy * stride + ky * dil - pad, ox * stride + kx * dil - pad
                if 0 <= iy < h and 0 <= ix < wd:
                    for cc in range(cg):
                        acc += (int(x[bi, iy, ix, gi * cg + cc]) - XZ) * (int(w[mm, ky, kx, cc]) - WZ)
        y[bi, oy, ox, mm] = requant(acc, XS, WS, y_scale, y_zp, lo)
        real[bi, oy, ox, mm] = acc * XS * WS / y_scale + y_zp
    return y, real


@pytest.mark.parametrize("relu", [False, True])
@settings(max_examples=25, deadline=None)
@given(data=st.data(), seed=st.integers(0, 2**16), y_zp=st.integers(0, 255))
def test_conv(relu, data, seed, y_zp):
    group = data.draw(st.sampled_from([1, 2]))
    k = data.draw(st.integers(1, 3))
    dil = data.draw(st.integers(1, 2)) if group == 1 else 1  # Caffe2: no dilation with groups
    pad = data.draw(st.integers(0, 1))
    stride = data.draw(st.integers(1, 2))
    ext = dil * (k - 1) + 1
    h = data.draw(st.integers(max(1, ext - 2 * pad), 5))
    n, cg, mg = data.draw(st.integers(0, 2)), data.draw(st.integers(1, 2)), data.draw(st.integers(1, 2))
    x = rand((n, h, h, cg * group), seed)
    w = rand((mg * group, k, k, cg), seed + 1)
    b = bias(mg * group, seed + 2)
    lo = y_zp if relu else 0
    expected, real = conv_ref(x, w, b, stride, pad, dil, group, 0.5, y_zp, lo)
    op = CreateOperator(
        "Int8ConvRelu" if relu else "Int8Conv", ["X", "W", "b"], ["Y"], kernel=k, stride=stride, pad=pad,
        dilation=dil, group=group, order="NHWC", Y_scale=0.5, Y_zero_point=y_zp,
    )  # fmt: skip
    (y,) = check_int8(op, [q8(x, XS, XZ), q8(w, WS, WZ), q8(b, XS * WS, 0)], [(expected, 0.5, y_zp)])
    inside = (real > lo + 0.5) & (real < 254.5)
    assert np.all(np.abs(y.numpy() - real)[inside] <= 0.5 + 1e-3)


def test_conv_needs_nhwc_and_matching_channels():
    ws = Workspace()
    ws.feed_blob("X", q8(rand((1, 3, 3, 4), 0), XS, XZ))
    ws.feed_blob("W", q8(rand((2, 3, 3, 3), 1), WS, WZ))
    ws.feed_blob("b", q8(bias(2, 2), 1, 0))
    with pytest.raises(FrameworkError, match="only supports NHWC"):
        ws.run_operator_once(CreateOperator("Int8Conv", ["X", "W", "b"], ["Y"], Y_scale=0.5))
    with pytest.raises(FrameworkError, match="must be C / group"):
        ws.run_operator_once(CreateOperator("Int8Conv", ["X", "W", "b"], ["Y"], order="NHWC", Y_scale=0.5))
    assert not ws.has_blob("Y") or ws.get_blob("Y").is_empty


@settings(max_examples=25, deadline=None)
@given(data=st.data(), seed=st.integers(0, 2**16), y_zp=st.integers(0, 255))
def test_conv_transpose(data, seed, y_zp):
    k = data.draw(st.integers(1, 3))
    stride = data.draw(st.integers(1, 2))
    adj = data.draw(st.integers(0, stride - 1))
    pad = data.draw(st.integers(0, max(0, (k - 1) // 2)))
    n, h, c, m = data.draw(st.integers(0, 2)), data.draw(st.integers(1, 3)), data.draw(st.integers(1, 3)), 2
    x, w, b = rand((n, h, h, c), seed), rand((c, k, k, m), seed + 1), bias(m, seed + 2)
    full = (h - 1) * stride + k + adj
    out = full - 2 * pad
    acc = np.zeros((n, full, full, m), np.int64)
    for bi, iy, ix, ky, kx, cc, mm in np.ndindex(n, h, h, k, k, c, m):
        acc[bi, iy * stride + ky, ix * stride + kx, mm] += (int(x[bi, iy, ix, cc]) - XZ) * (int(w[cc, ky, kx, mm]) - WZ)
    acc = acc[:, pad : pad + out, pad : pad + out] + b
    expected = np.zeros(acc.shape, np.uint8)
    for idx in np.ndindex(acc.shape):
        expected[idx] = requant(int(acc[idx]), XS, WS, 0.5, y_zp, 0)
    op = CreateOperator(
        "Int8ConvTranspose", ["X", "W", "b"], ["Y"], kernel=k, stride=stride, pad=pad, adj=adj, order="NHWC",
        Y_scale=0.5, Y_zero_point=y_zp,
    )  # fmt: skip
    check_int8(op, [q8(x, XS, XZ), q8(w, WS, WZ), q8(b, XS * WS, 0)], [(expected, 0.5, y_zp)])
