"""Int8RoIAlign: an element-by-element port of Caffe2's int8_roi_align_op.h arithmetic (float32 sampling,
uint8 weights, gemmlowp requantization in Python integers), and Caffe2's own test: within 4 input steps of the
float RoIAlign on the dequantized feature map."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.errors import FrameworkError
from framework.memory.workspace import Workspace
from tests.ops.quantized.int8_helpers import check_int8, q8, run

f32 = np.float32


def gemmlowp_mul(x, m):
    q, e = math.frexp(m)
    fixed, shift = round(q * 2**31), -e
    if fixed == 2**31:
        fixed, shift = fixed // 2, shift - 1
    ab = x * fixed
    v = ab + (2**30 if ab >= 0 else 1 - 2**30)
    high = int(v / 2**31) if abs(v) < 2**52 else (v // 2**31 if v >= 0 else -((-v) // 2**31))  # toward zero
    mask = (1 << shift) - 1
    thr = (mask >> 1) + (1 if high < 0 else 0)
    return (high >> shift) + (1 if (high & mask) > thr else 0)


def ref(x, x_scale, x_zp, rois, ss, ph, pw, sr, y_scale, y_zp):
    n, h, w, c = x.shape
    out = np.zeros((len(rois), ph, pw, c), np.uint8)
    for k, roi in enumerate(rois):
        b = int(roi[0]) if len(roi) == 5 else 0
        x1, y1, x2, y2 = (f32(v) * f32(ss) for v in roi[-4:])
        rw, rh = max(f32(x2 - x1), f32(1)), max(f32(y2 - y1), f32(1))
        bh, bw = f32(rh / f32(ph)), f32(rw / f32(pw))
        gh = sr if sr > 0 else math.ceil(f32(rh / f32(ph)))
        gw = sr if sr > 0 else math.ceil(f32(rw / f32(pw)))
        mult = x_scale / (float(f32(y_scale)) * 255.0 * float(f32(gh * gw)))
        for py, px, ch in np.ndindex(ph, pw, c):
            acc = 0
            for iy in range(gh):
                yy = f32(f32(y1 + f32(py) * bh) + f32(f32(f32(iy + 0.5) * bh) / f32(gh)))
                for ix in range(gw):
                    xx = f32(f32(x1 + f32(px) * bw) + f32(f32(f32(ix + 0.5) * bw) / f32(gw)))
                    acc -= 255 * x_zp
                    if yy < -1.0 or yy > h or xx < -1.0 or xx > w:
                        continue
                    yv, xv = max(yy, f32(0)), max(xx, f32(0))
                    yl, xl = int(yv), int(xv)
                    yh, xh = yl + 1, xl + 1
                    if yl >= h - 1:
                        yl = yh = h - 1
                        yv = f32(yl)
                    if xl >= w - 1:
                        xl = xh = w - 1
                        xv = f32(xl)
                    ly, lx = f32(yv - f32(yl)), f32(xv - f32(xl))
                    hy, hx = f32(1.0 - float(ly)), f32(1.0 - float(lx))
                    for (a, bb), yi, xi in (
                        ((hy, hx), yl, xl),
                        ((hy, lx), yl, xh),
                        ((ly, hx), yh, xl),
                        ((ly, lx), yh, xh),
                    ):
                        wt = int(np.rint(f32(f32(a * bb) * f32(255))))
                        acc += wt * int(x[b, yi, xi, ch])
            out[k, py, px, ch] = min(max(gemmlowp_mul(acc, mult) + y_zp, 0), 255)
    return out


def random_rois(rng, r, n, h, w, ss, five=True):
    rows = []
    for _ in range(r):
        xa, xb = sorted(rng.uniform(-2, w / ss + 2, 2))
        ya, yb = sorted(rng.uniform(-2, h / ss + 2, 2))
        rows.append(([float(rng.integers(0, n))] if five else []) + [xa, ya, xb, yb])
    return np.array(rows, np.float32)


@settings(max_examples=15, deadline=None)
@given(
    n=st.integers(1, 2), h=st.integers(1, 6), w=st.integers(1, 6), c=st.integers(1, 3), r=st.integers(1, 3),
    ph=st.integers(1, 3), pw=st.integers(1, 3), sr=st.sampled_from([-1, 0, 1, 2]), five=st.booleans(),
    seed=st.integers(0, 2**16),
)  # fmt: skip
def test_int8_roi_align_matches_caffe2s_arithmetic(n, h, w, c, r, ph, pw, sr, five, seed):
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 256, (n, h, w, c)).astype(np.uint8)
    rois = random_rois(rng, r, n, h, w, 0.5, five)
    expected = ref(x, 0.01, 127, rois, 0.5, ph, pw, sr, 0.02, 120)
    op = CreateOperator(
        "Int8RoIAlign", ["X", "R"], ["Y"], spatial_scale=0.5, pooled_h=ph, pooled_w=pw, sampling_ratio=sr,
        Y_scale=0.02, Y_zero_point=120,
    )  # fmt: skip
    check_int8(op, [q8(x, 0.01, 127), rois], [(expected, 0.02, 120)])


def test_caffe2s_test_close_to_the_float_roi_align():
    rng = np.random.default_rng(0)
    n, c, h, w = 2, 3, 20, 22
    xq = rng.integers(0, 256, (n, h, w, c)).astype(np.uint8)
    x = ((xq.astype(np.int32) - 127) * f32(0.01)).astype(f32)
    rois = random_rois(rng, 10, n, h, w, 0.25)
    args = dict(spatial_scale=0.25, pooled_h=2, pooled_w=2, sampling_ratio=2)
    _, _, (yq,) = run(CreateOperator("Int8RoIAlign", ["XQ", "R"], ["Y"], Y_scale=0.01, Y_zero_point=127, **args),
                      [q8(xq, 0.01, 127), rois])  # fmt: skip
    _, _, (y,) = run(CreateOperator("RoIAlign", ["X", "R"], ["Y"], order="NHWC", **args), [x, rois])
    np.testing.assert_allclose((yq.numpy().astype(np.int32) - 127) * 0.01, y, atol=4 * 0.01)


def test_empty_rois_and_errors():
    x = q8(np.zeros((1, 3, 3, 2)), 0.01, 127)
    op = CreateOperator("Int8RoIAlign", ["X", "R"], ["Y"], pooled_h=2, pooled_w=3, Y_scale=0.01, Y_zero_point=5)
    check_int8(op, [x, np.zeros((0, 5), f32)], [(np.zeros((0, 2, 3, 2), np.uint8), 0.01, 5)])
    ws = Workspace()
    ws.feed_blob("X", x)
    ws.feed_blob("R", np.array([[3, 0, 0, 1, 1]], f32))
    with pytest.raises(FrameworkError, match=r"batch indices must lie in \[0, 1\)"):
        ws.run_operator_once(CreateOperator("Int8RoIAlign", ["X", "R"], ["Y"], Y_scale=0.01))
    ws.feed_blob("R", np.array([[0, 0, 1, 1]], np.float64))
    with pytest.raises(FrameworkError, match="float32"):
        ws.run_operator_once(CreateOperator("Int8RoIAlign", ["X", "R"], ["Y"], Y_scale=0.01))
    with pytest.raises(FrameworkError, match="only NHWC"):
        ws.run_operator_once(CreateOperator("Int8RoIAlign", ["X", "R"], ["Y"], order="NCHW", Y_scale=0.01))
    assert not ws.has_blob("Y") or ws.get_blob("Y").is_empty
