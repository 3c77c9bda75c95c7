"""CollectAndDistributeFpnRpnProposals, CollectRpnProposals, DistributeFpnProposals,
HeatmapMaxKeypoint and BatchBoxCox against plain-Python references."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.errors import FrameworkError, GradientError
from framework.ops import get_gradient_for_op
from framework.ops.testing import arrays, assert_reference_checks, run_op_on


def ref_level(roi, lo, hi, s0, l0, one):
    area = (float(np.float32(roi[3]) - np.float32(roi[1])) + one) * (
        float(np.float32(roi[4]) - np.float32(roi[2])) + one
    )
    lv = math.floor(l0 + math.log2(math.sqrt(area) / s0 + 1e-6))
    return min(max(lv, lo), hi)


def ref_collect(levels, top):
    rois = [r for lv in levels for r in lv[0]]
    scores = [float(s) for lv in levels for s in lv[1]]
    order = sorted(range(len(rois)), key=lambda i: (-scores[i], i))
    if 0 < top < len(order):
        order = order[:top]
    return np.array([rois[i] for i in order], np.float32).reshape(-1, 5)


def ref_distribute(rois, lo, hi, one, s0=224, l0=4):
    lv = [ref_level(r, lo, hi, s0, l0, one) for r in rois]
    outs, order = [], []
    for level in range(lo, hi + 1):
        idx = [i for i in range(len(rois)) if lv[i] == level]
        outs.append(rois[idx].reshape(-1, 5))
        order += idx
    restore = np.zeros(len(order), np.int32)
    for pos, i in enumerate(order):
        restore[i] = pos
    return outs + [restore]


@st.composite
def levels_case(draw, n_levels):
    out = []
    side = st.sampled_from([4.0, 30.0, 100.0, 220.0, 500.0])
    for _ in range(n_levels):
        k = draw(st.integers(0, 4))
        rows = []
        for _ in range(k):
            x1, y1 = draw(st.floats(0, 50, width=32)), draw(st.floats(0, 50, width=32))
            rows.append([draw(st.integers(0, 1)), x1, y1, x1 + draw(side), y1 + draw(side)])
        out.append(
            (
                np.array(rows, np.float32).reshape(k, 5),
                np.array(draw(st.lists(st.sampled_from([0.2, 0.5, 0.9]), min_size=k, max_size=k)), np.float32),
            )
        )
    return out


@given(case=levels_case(3), top=st.integers(-1, 8), plus_one=st.booleans())
@settings(max_examples=30, deadline=None)
def test_collect_and_distribute(case, top, plus_one):
    rois_in = [f"r{i}" for i in range(3)] + [f"p{i}" for i in range(3)]
    outs = ["rois"] + [f"fpn{lv}" for lv in range(2, 6)] + ["restore"]
    kw = dict(
        rpn_min_level=2,
        rpn_max_level=4,
        rpn_post_nms_topN=top,
        roi_min_level=2,
        roi_max_level=5,
        legacy_plus_one=plus_one,
    )
    op = CreateOperator("CollectAndDistributeFpnRpnProposals", rois_in, outs, **kw)
    inputs = [r for r, _ in case] + [p for _, p in case]
    one = 1.0 if plus_one else 0.0

    def ref(*ins):
        rois = ref_collect(case, top)
        return [rois] + ref_distribute(rois, 2, 5, one)

    assert_reference_checks(op, inputs, ref, check_inference=False)
    collect = CreateOperator(
        "CollectRpnProposals", rois_in, ["rois"], rpn_min_level=2, rpn_max_level=4, rpn_post_nms_topN=top
    )
    assert_reference_checks(collect, inputs, lambda *ins: ref_collect(case, top), check_inference=False)
    rois = ref_collect(case, top)
    dist = CreateOperator(
        "DistributeFpnProposals", ["rois"], outs[1:], roi_min_level=2, roi_max_level=5, legacy_plus_one=plus_one
    )
    assert_reference_checks(dist, [rois], lambda r: ref_distribute(r, 2, 5, one), check_inference=False)


def test_fpn_errors_and_no_gradient():
    op = CreateOperator("CollectRpnProposals", ["a", "b", "c"], ["r"], rpn_min_level=2, rpn_max_level=3)
    with pytest.raises(FrameworkError, match="CollectRpnProposals.*4 inputs"):
        run_op_on(op, [np.zeros((0, 5), np.float32)] * 3)
    dist = CreateOperator("DistributeFpnProposals", ["r"], ["a", "b"], roi_min_level=2, roi_max_level=5)
    with pytest.raises(FrameworkError, match="DistributeFpnProposals.*outputs"):
        run_op_on(dist, [np.zeros((1, 5), np.float32)])
    with pytest.raises(GradientError):
        get_gradient_for_op(CreateOperator("DistributeFpnProposals", ["r"], ["a", "b"]), ["a_g", "b_g"])


# -- HeatmapMaxKeypoint ------------------------------------------------------------------------------


def ref_heatmap(hm, boxes, softmax):
    n, k, s, _ = hm.shape
    out = np.zeros((n, 4, k), np.float32)
    for i in range(n):
        x0, y0 = boxes[i, 0], boxes[i, 1]
        xl, yl = max(boxes[i, 2] - boxes[i, 0], 1.0), max(boxes[i, 3] - boxes[i, 1], 1.0)
        for j in range(k):
            h = hm[i, j].astype(np.float64)
            flat = list(h.reshape(-1))
            m = flat.index(max(flat))
            my, mx = divmod(m, s)

            def at(dy, dx, my=my, mx=mx, h=h):
                yy, xx = my + dy, mx + dx
                yy = my - dy if yy < 0 or yy >= s else yy  # mirror around the maximum
                xx = mx - dx if xx < 0 or xx >= s else xx
                return h[yy, xx]

            b = np.array([-(at(0, 1) - at(0, -1)) / 2, -(at(1, 0) - at(-1, 0)) / 2])
            c = (at(1, 1) - at(1, -1) - at(-1, 1) + at(-1, -1)) / 4
            a = np.array([[at(0, -1) - 2 * at(0, 0) + at(0, 1), c], [c, at(-1, 0) - 2 * at(0, 0) + at(1, 0)]])
            if abs(a[0, 0] * a[1, 1] - c * c) < 1e-4:
                d, score = np.zeros(2), h[my, mx]
            else:
                d = np.linalg.solve(a, b)
                if np.abs(d).max() > 1.5:
                    d = d / np.abs(d).max() * 1.5
                score = h[my, mx] - b @ d + 0.5 * d @ a @ d
            out[i, 0, j] = x0 + (0.5 + mx + d[0]) * xl / s
            out[i, 1, j] = y0 + (0.5 + my + d[1]) * yl / s
            out[i, 2, j] = score
            if softmax:
                e = np.exp(h)
                out[i, 3, j] = e[my, mx] / e.sum()
    return out


@given(data=st.data(), softmax=st.booleans())
@settings(max_examples=30, deadline=None)
def test_heatmap_max_keypoint(data, softmax):
    n, k, s = data.draw(st.integers(0, 2)), data.draw(st.integers(1, 3)), data.draw(st.integers(2, 5))
    hm = data.draw(arrays((n, k, s, s), np.float32, elements=st.sampled_from([0.0, 0.25, 0.5, 1.0, 2.0])))
    boxes = data.draw(arrays((n, 5), np.float32, elements=st.floats(0, 40, width=32)))
    op = CreateOperator("HeatmapMaxKeypoint", ["H", "B"], ["K"], should_output_softmax=softmax)
    assert_reference_checks(op, [hm, boxes], lambda h, b: ref_heatmap(h, b, softmax), threshold=1e-3)


def test_heatmap_max_keypoint_errors():
    op = CreateOperator("HeatmapMaxKeypoint", ["H", "B"], ["K"])
    with pytest.raises(FrameworkError, match="HeatmapMaxKeypoint.*'H'"):
        run_op_on(op, [np.zeros((1, 1, 1, 1), np.float32), np.zeros((1, 4), np.float32)])
    with pytest.raises(FrameworkError, match="HeatmapMaxKeypoint.*'B'"):
        run_op_on(op, [np.zeros((1, 1, 3, 3), np.float32), np.zeros((2, 4), np.float32)])


# -- BatchBoxCox ------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@given(data=st.data())
@settings(max_examples=25, deadline=None)
def test_batch_box_cox(dtype, data):
    n, d = data.draw(st.integers(0, 4)), data.draw(st.integers(1, 4))
    x = data.draw(arrays((n, d), dtype, elements=st.floats(-2, 5, width=32)))
    l1 = data.draw(arrays((d,), dtype, elements=st.sampled_from([0.0, 0.5, -1.0, 2.0])))
    l2 = data.draw(arrays((d,), dtype, elements=st.floats(0, 2, width=32)))

    def ref(x, l1, l2):
        out = np.zeros_like(x)
        for i in range(n):
            for j in range(d):
                t = max(float(x[i, j]) + float(l2[j]), 1e-6)
                out[i, j] = math.log(t) if l1[j] == 0 else (t ** float(l1[j]) - 1) / float(l1[j])
        return out

    assert_reference_checks(CreateOperator("BatchBoxCox", ["X", "L1", "L2"], ["Y"]), [x, l1, l2], ref, threshold=1e-4)
    assert_reference_checks(CreateOperator("BatchBoxCox", ["X", "L1", "L2"], ["X"]), [x, l1, l2], ref, threshold=1e-4)


def test_batch_box_cox_errors():
    with pytest.raises(FrameworkError, match="BatchBoxCox.*'L1'"):
        run_op_on(
            CreateOperator("BatchBoxCox", ["X", "L1", "L2"], ["Y"]),
            [np.ones((2, 3), np.float32), np.ones(2, np.float32), np.ones(3, np.float32)],
        )
