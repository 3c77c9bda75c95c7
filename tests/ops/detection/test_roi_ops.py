"""RoIAlign (+gradient), RoIAlignRotated and RoIPool (+gradient) against per-sample loop
references written from Caffe2's kernels, on hypothesis-generated maps and RoIs (at borders,
outside the map, degenerate, none)."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.errors import FrameworkError
from framework.ops import get_gradient_for_op
from framework.ops.testing import assert_gradient_checks, assert_reference_checks, run_op_on


def _bilinear(img, y, x):
    """One sample of Caffe2's bilinear_interpolate on img (C x H x W)."""
    c, h, w = img.shape
    if y < -1.0 or y > h or x < -1.0 or x > w:
        return np.zeros(c)
    y, x = max(y, 0.0), max(x, 0.0)
    yl, xl = int(y), int(x)
    if yl >= h - 1:
        yh = yl = h - 1
        y = float(yl)
    else:
        yh = yl + 1
    if xl >= w - 1:
        xh = xl = w - 1
        x = float(xl)
    else:
        xh = xl + 1
    ly, lx = y - yl, x - xl
    hy, hx = 1 - ly, 1 - lx
    return hy * hx * img[:, yl, xl] + hy * lx * img[:, yl, xh] + ly * hx * img[:, yh, xl] + ly * lx * img[:, yh, xh]


def ref_roi_align(x, rois, scale, ph, pw, ratio, aligned, rotated=False):
    x = x.astype(np.float64)
    n_out = rois.shape[0]
    out = np.zeros((n_out, x.shape[1], ph, pw))
    for r in range(n_out):
        row = rois[r].astype(np.float32)
        b = int(row[0]) if rois.shape[1] == (6 if rotated else 5) else 0
        box = row[-5:] if rotated else row[-4:]
        f32 = np.float32
        sc, off = f32(scale), f32(0.5 if aligned else 0.0)  # RoI geometry in float32, as Caffe2's kernel
        if rotated:
            cx, cy = float(box[0] * sc - off), float(box[1] * sc - off)
            rw, rh = box[2] * sc, box[3] * sc
            theta = float(box[4]) * math.pi / 180
        else:
            sx, sy = box[0] * sc - off, box[1] * sc - off
            rw, rh = box[2] * sc - off - sx, box[3] * sc - off - sy
            sx, sy = float(sx), float(sy)
        if not aligned:
            rw, rh = max(rw, f32(1.0)), max(rh, f32(1.0))
        rw, rh = float(rw), float(rh)
        if rotated:
            sx, sy = -rw / 2, -rh / 2
        gh = ratio if ratio > 0 else math.ceil(f32(rh) / f32(ph))
        gw = ratio if ratio > 0 else math.ceil(f32(rw) / f32(pw))
        bh, bw = rh / ph, rw / pw
        for i in range(ph):
            for j in range(pw):
                acc = np.zeros(x.shape[1])
                for iy in range(gh):
                    yy = sy + i * bh + (iy + 0.5) * bh / gh
                    for ix in range(gw):
                        xx = sx + j * bw + (ix + 0.5) * bw / gw
                        if rotated:
                            px = xx * math.cos(theta) + yy * math.sin(theta) + cx
                            py = yy * math.cos(theta) - xx * math.sin(theta) + cy
                        else:
                            px, py = xx, yy
                        acc += _bilinear(x[b], py, px)
                out[r, :, i, j] = acc / max(gh * gw, 1)
    return out


@st.composite
def roi_case(draw, rotated=False):
    n, c = draw(st.integers(1, 2)), draw(st.integers(1, 3))
    h, w = draw(st.integers(1, 6)), draw(st.integers(1, 6))
    x = draw(st.lists(st.floats(-1, 1, width=32), min_size=n * c * h * w, max_size=n * c * h * w))
    x = np.array(x, np.float32).reshape(n, c, h, w)
    scale = draw(st.sampled_from([1.0, 0.5, 0.25]))
    k = draw(st.integers(0, 4))
    coord = st.floats(-3.0, 14.0, width=32)
    rows = []
    for _ in range(k):
        b = draw(st.integers(0, n - 1))
        if rotated:
            rows.append(
                [
                    b,
                    draw(coord),
                    draw(coord),
                    draw(st.floats(0, 10, width=32)),
                    draw(st.floats(0, 10, width=32)),
                    draw(st.floats(-180, 180, width=32)),
                ]
            )
        else:
            x1, y1 = draw(coord), draw(coord)
            rows.append([b, x1, y1, x1 + draw(st.floats(0, 10, width=32)), y1 + draw(st.floats(0, 10, width=32))])
    rois = np.array(rows, np.float32).reshape(k, 6 if rotated else 5)
    return x, rois, scale


ROI_SETTINGS = settings(max_examples=25, deadline=None)


@pytest.mark.parametrize("order", ["NCHW", "NHWC"])
@given(case=roi_case(), ph=st.integers(1, 3), pw=st.integers(1, 3), ratio=st.integers(-1, 2), aligned=st.booleans())
@ROI_SETTINGS
def test_roi_align(order, case, ph, pw, ratio, aligned):
    x, rois, scale = case
    op = CreateOperator(
        "RoIAlign",
        ["X", "R"],
        ["Y"],
        order=order,
        spatial_scale=scale,
        pooled_h=ph,
        pooled_w=pw,
        sampling_ratio=ratio,
        aligned=aligned,
    )
    xin = x if order == "NCHW" else x.transpose(0, 2, 3, 1).copy()

    def ref(xin, rois):
        y = ref_roi_align(x, rois, scale, ph, pw, ratio, aligned).astype(np.float32)
        return y if order == "NCHW" else y.transpose(0, 2, 3, 1)

    assert_reference_checks(op, [xin, rois], ref, threshold=1e-4)


def test_roi_align_four_columns_means_image_zero():
    x = np.arange(2 * 1 * 4 * 4, dtype=np.float32).reshape(2, 1, 4, 4)
    rois = np.array([[0.5, 0.5, 2.5, 3.0]], np.float32)
    op = CreateOperator("RoIAlign", ["X", "R"], ["Y"], pooled_h=2, pooled_w=2, sampling_ratio=2)
    assert_reference_checks(op, [x, rois], lambda x, r: ref_roi_align(x, r, 1.0, 2, 2, 2, False).astype(np.float32))


@pytest.mark.parametrize("order", ["NCHW", "NHWC"])
@given(case=roi_case(), ratio=st.integers(1, 2), aligned=st.booleans())
@settings(max_examples=8, deadline=None)
def test_roi_align_gradient(order, case, ratio, aligned):
    x, rois, scale = case
    xin = x if order == "NCHW" else x.transpose(0, 2, 3, 1).copy()
    op = CreateOperator(
        "RoIAlign",
        ["X", "R"],
        ["Y"],
        order=order,
        spatial_scale=scale,
        pooled_h=2,
        pooled_w=2,
        sampling_ratio=ratio,
        aligned=aligned,
    )
    assert_gradient_checks(op, [xin, rois], 0, threshold=1e-3)


def test_roi_align_gradient_wiring_and_empty_rois():
    op = CreateOperator("RoIAlign", ["X", "R"], ["Y"], pooled_h=2, pooled_w=3)
    ops, g = get_gradient_for_op(op, ["Y_grad"])
    assert [(o.type, list(o.input)) for o in ops] == [("RoIAlignGradient", ["X", "R", "Y_grad"])] and g[1] is None
    x = np.ones((1, 4, 5, 5), np.float32)
    for rois in (np.zeros((0, 5), np.float32), np.zeros((0,), np.float32)):
        (y,) = run_op_on(op, [x, rois])
        assert y.shape == (0, 4, 2, 3)
    (y,) = run_op_on(
        CreateOperator("RoIAlign", ["X", "R"], ["Y"], order="NHWC", pooled_h=2), [x, np.zeros((0, 5), np.float32)]
    )
    assert y.shape == (0, 2, 1, 5)


def test_roi_align_errors_name_op_and_blob():
    x = np.ones((1, 2, 4, 4), np.float32)
    op = CreateOperator("RoIAlign", ["X", "R"], ["Y"])
    with pytest.raises(FrameworkError, match="RoIAlign.*'R'"):
        run_op_on(op, [x, np.ones((2, 3), np.float32)])
    with pytest.raises(FrameworkError, match="RoIAlign.*'R'.*batch"):
        run_op_on(op, [x, np.array([[3, 0, 0, 1, 1]], np.float32)])
    with pytest.raises(FrameworkError, match="RoIAlign.*'X'"):
        run_op_on(op, [np.ones((2, 4, 4), np.float32), np.zeros((1, 5), np.float32)])
    with pytest.raises(FrameworkError, match="negative size"):
        run_op_on(
            CreateOperator("RoIAlign", ["X", "R"], ["Y"], aligned=1), [x, np.array([[0, 2, 2, 1, 3]], np.float32)]
        )
    with pytest.raises(FrameworkError, match="order"):
        run_op_on(CreateOperator("RoIAlign", ["X", "R"], ["Y"], order="NCWH"), [x, np.zeros((1, 5), np.float32)])


@pytest.mark.parametrize("order", ["NCHW", "NHWC"])
@given(case=roi_case(rotated=True), ph=st.integers(1, 3), ratio=st.integers(-1, 2), aligned=st.booleans())
@ROI_SETTINGS
def test_roi_align_rotated(order, case, ph, ratio, aligned):
    x, rois, scale = case
    op = CreateOperator(
        "RoIAlignRotated",
        ["X", "R"],
        ["Y"],
        order=order,
        spatial_scale=scale,
        pooled_h=ph,
        pooled_w=2,
        sampling_ratio=ratio,
        aligned=aligned,
    )
    xin = x if order == "NCHW" else x.transpose(0, 2, 3, 1).copy()

    def ref(xin, rois):
        y = ref_roi_align(x, rois, scale, ph, 2, ratio, aligned, rotated=True).astype(np.float32)
        return y if order == "NCHW" else y.transpose(0, 2, 3, 1)

    assert_reference_checks(op, [xin, rois], ref, threshold=1e-4)


def test_roi_align_rotated_at_zero_angle_is_roi_align():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 2, 8, 8)).astype(np.float32)
    box = np.array([[0, 1.0, 2.0, 6.0, 5.0]], np.float32)
    rot = np.array([[0, 3.5, 3.5, 5.0, 3.0, 0.0]], np.float32)  # same box as centre/size
    kw = dict(pooled_h=3, pooled_w=3, sampling_ratio=2, aligned=1)
    (a,) = run_op_on(CreateOperator("RoIAlign", ["X", "R"], ["Y"], **kw), [x, box])
    (b,) = run_op_on(CreateOperator("RoIAlignRotated", ["X", "R"], ["Y"], **kw), [x, rot])
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


# -- RoIPool -----------------------------------------------------------------------------------------


def _c_round(v):
    return int(math.copysign(math.floor(abs(v) + 0.5), v))


def ref_roi_pool(x, rois, scale, ph, pw):
    n_r, c, h, w = rois.shape[0], x.shape[1], x.shape[2], x.shape[3]
    y = np.zeros((n_r, c, ph, pw), np.float32)
    am = np.full((n_r, c, ph, pw), -1, np.int32)
    for r in range(n_r):
        b = int(rois[r, 0])
        x1, y1, x2, y2 = (_c_round(float(np.float32(rois[r, k]) * np.float32(scale))) for k in (1, 2, 3, 4))
        rh, rw = max(y2 - y1 + 1, 1), max(x2 - x1 + 1, 1)
        for i in range(ph):
            hs = min(max(math.floor(i * rh / ph) + y1, 0), h)
            he = min(max(math.ceil((i + 1) * rh / ph) + y1, 0), h)
            for j in range(pw):
                ws = min(max(math.floor(j * rw / pw) + x1, 0), w)
                we = min(max(math.ceil((j + 1) * rw / pw) + x1, 0), w)
                if he <= hs or we <= ws:
                    continue
                for ch in range(c):
                    best, arg = -np.finfo(np.float32).max, -1
                    for yy in range(hs, he):
                        for xx in range(ws, we):
                            if x[b, ch, yy, xx] > best:
                                best, arg = x[b, ch, yy, xx], yy * w + xx
                    y[r, ch, i, j], am[r, ch, i, j] = best, arg
    return y, am


@given(case=roi_case(), ph=st.integers(1, 3), pw=st.integers(1, 3))
@ROI_SETTINGS
def test_roi_pool(case, ph, pw):
    x, rois, scale = case
    op = CreateOperator("RoIPool", ["X", "R"], ["Y", "A"], spatial_scale=scale, pooled_h=ph, pooled_w=pw)
    assert_reference_checks(op, [x, rois], lambda x, r: list(ref_roi_pool(x, r, scale, ph, pw)))
    op_test = CreateOperator("RoIPool", ["X", "R"], ["Y"], spatial_scale=scale, pooled_h=ph, pooled_w=pw, is_test=1)
    assert_reference_checks(op_test, [x, rois], lambda x, r: ref_roi_pool(x, r, scale, ph, pw)[0])


def test_roi_pool_ties_take_the_first_maximum():
    x = np.zeros((1, 1, 3, 3), np.float32)
    x[0, 0, 1, 2] = x[0, 0, 2, 0] = 5.0
    (y, a) = run_op_on(CreateOperator("RoIPool", ["X", "R"], ["Y", "A"]), [x, np.array([[0, 0, 0, 2, 2]], np.float32)])
    assert y.item() == 5.0 and a.item() == 1 * 3 + 2


@given(case=roi_case())
@settings(max_examples=10, deadline=None)
def test_roi_pool_gradient(case):
    x, rois, scale = case
    # distinct values so the argmax is stable under the central-difference probes
    x = (np.arange(x.size).reshape(x.shape) * 0.37 % 1.0).astype(np.float32)
    op = CreateOperator("RoIPool", ["X", "R"], ["Y", "A"], spatial_scale=scale, pooled_h=2, pooled_w=2)
    assert_gradient_checks(op, [x, rois], 0, stepsize=1e-3, threshold=1e-3)


def test_roi_pool_gradient_wiring_and_errors():
    op = CreateOperator("RoIPool", ["X", "R"], ["Y", "A"])
    ops, _ = get_gradient_for_op(op, ["Y_grad", None])
    assert [(o.type, list(o.input)) for o in ops] == [("RoIPoolGradient", ["X", "R", "A", "Y_grad"])]
    x = np.ones((1, 1, 3, 3), np.float32)
    with pytest.raises(FrameworkError, match="RoIPool.*'R'"):
        run_op_on(op, [x, np.ones((1, 4), np.float32)])
    with pytest.raises(FrameworkError, match="argmaxes"):
        run_op_on(CreateOperator("RoIPool", ["X", "R"], ["Y"]), [x, np.ones((1, 5), np.float32)])


@pytest.mark.parametrize("op_type", ["RoIPool", "RoIAlign"])
def test_fractional_batch_index_truncates(op_type):
    # Caffe2 reads the batch index as `int roi_batch_ind = rois[0]`: 1.7 is image 1, 0.3 image 0
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 1, 4, 4)).astype(np.float32)
    boxes = np.array([[0, 0, 3, 3], [1, 1, 2, 3]], np.float32)
    outs = ["Y", "A"] if op_type == "RoIPool" else ["Y"]
    op = CreateOperator(op_type, ["X", "R"], outs, pooled_h=2, pooled_w=2, spatial_scale=1.0)
    frac = run_op_on(op, [x, np.hstack([np.array([[1.7], [0.3]], np.float32), boxes])])[0]
    whole = run_op_on(op, [x, np.hstack([np.array([[1.0], [0.0]], np.float32), boxes])])[0]
    np.testing.assert_array_equal(frac, whole)
    with pytest.raises(FrameworkError, match="batch indices outside"):
        run_op_on(op, [x, np.hstack([np.array([[2.0], [0.0]], np.float32), boxes])])
