"""BBoxTransform, GenerateProposals and BoxWithNMSLimit against plain-Python references
(Detectron's formulas), with score ties, boxes at image borders, empty inputs, rotated boxes."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.errors import FrameworkError
from framework.ops.testing import assert_reference_checks, run_op_on

CLIP = math.log(1000.0 / 16.0)


def ref_iou(a, b, one):
    iw = max(0.0, min(a[2], b[2]) - max(a[0], b[0]) + one)
    ih = max(0.0, min(a[3], b[3]) - max(a[1], b[1]) + one)
    inter = iw * ih
    area = lambda r: (r[2] - r[0] + one) * (r[3] - r[1] + one)  # noqa: E731
    union = area(a) + area(b) - inter
    return inter / union if union else float("nan")  # 0 / 0 as in C++: such pairs never count as "<= thresh"


def ref_nms(boxes, order, thresh, top=-1, one=1.0):
    """Greedy NMS by suppression flags over ``order``."""
    keep, dead = [], set()
    for pos, i in enumerate(order):
        if i in dead:
            continue
        if 0 <= top <= len(keep):
            break
        keep.append(i)
        for j in order[pos + 1 :]:
            if j not in dead and not ref_iou(boxes[i], boxes[j], one) <= thresh:
                dead.add(j)
    return keep


def by_score(scores, idx):
    return sorted(idx, key=lambda i: (-float(scores[i]), i))


def ref_transform(box, d, w, one):
    """Detectron's bbox_transform in float32 arithmetic (as Caffe2's Eigen float code)."""
    f = np.float32
    box, d, w, one = [f(v) for v in box], [f(v) for v in d], [f(v) for v in w], f(one)
    bw, bh = box[2] - box[0] + one, box[3] - box[1] + one
    cx, cy = box[0] + f(0.5) * bw, box[1] + f(0.5) * bh
    dx, dy = d[0] / w[0], d[1] / w[1]
    dw, dh = min(d[2] / w[2], f(CLIP)), min(d[3] / w[3], f(CLIP))
    px, py, pw, ph = dx * bw + cx, dy * bh + cy, np.exp(dw) * bw, np.exp(dh) * bh
    return [px - f(0.5) * pw, py - f(0.5) * ph, px + f(0.5) * pw - one, py + f(0.5) * ph - one]


def ref_clip(b, h, w, one):
    return [
        min(max(b[0], 0), w - one),
        min(max(b[1], 0), h - one),
        min(max(b[2], 0), w - one),
        min(max(b[3], 0), h - one),
    ]


# -- BBoxTransform -------------------------------------------------------------------------------------


@given(
    data=st.data(),
    k=st.integers(1, 3),
    plus_one=st.booleans(),
    apply_scale=st.booleans(),
    weights=st.sampled_from([[1.0, 1.0, 1.0, 1.0], [10.0, 10.0, 5.0, 5.0]]),
)
@settings(max_examples=30, deadline=None)
def test_bbox_transform(data, k, plus_one, apply_scale, weights):
    n_img = data.draw(st.integers(1, 2))
    counts = [data.draw(st.integers(0, 3)) for _ in range(n_img)]
    m = sum(counts)
    info = np.array(
        [
            [data.draw(st.sampled_from([20.0, 31.0])), 25.0, data.draw(st.sampled_from([1.0, 1.5]))]
            for _ in range(n_img)
        ],
        np.float32,
    )
    rows = []
    for i, c in enumerate(counts):
        for _ in range(c):
            x1, y1 = data.draw(st.floats(-5, 30, width=32)), data.draw(st.floats(-5, 30, width=32))
            rows.append(
                [i, x1, y1, x1 + data.draw(st.floats(0, 20, width=32)), y1 + data.draw(st.floats(0, 20, width=32))]
            )
    rois = np.array(rows, np.float32).reshape(m, 5)
    deltas = np.array(
        data.draw(st.lists(st.floats(-3, 6, width=32), min_size=4 * k * m, max_size=4 * k * m)), np.float32
    ).reshape(m, 4 * k)
    op = CreateOperator(
        "BBoxTransform", ["R", "D", "I"], ["B", "S"], weights=weights, apply_scale=apply_scale, legacy_plus_one=plus_one
    )
    one = 1.0 if plus_one else 0.0

    def ref(rois, deltas, info):
        out = np.zeros((m, 4 * k))
        for r in range(m):
            i = int(rois[r, 0])
            s = float(info[i, 2])
            h, w = int(float(info[i, 0] / np.float32(s)) + 0.5), int(float(info[i, 1] / np.float32(s)) + 0.5)
            box = [np.float32(v) / np.float32(s) for v in rois[r, 1:]]
            for j in range(k):
                b = ref_clip(
                    ref_transform(box, deltas[r, 4 * j : 4 * j + 4].astype(np.float64), weights, one), h, w, one
                )
                out[r, 4 * j : 4 * j + 4] = np.array(b) * (s if apply_scale else 1.0)
        return [out.astype(np.float32), np.array(counts, np.float32)]

    assert_reference_checks(op, [rois, deltas, info], ref, threshold=1e-3)


def test_bbox_transform_rotated_bounds_angles_and_clips_upright_boxes():
    rois = np.array([[0, 10.0, 10.0, 8.0, 6.0, 0.0], [0, 10.0, 10.0, 8.0, 6.0, 80.0]], np.float32)
    deltas = np.array([[0, 0, 0, 0, math.radians(20)], [0, 0, 0, 0, math.radians(20)]], np.float32)
    info = np.array([[100.0, 100.0, 1.0]], np.float32)
    (b,) = run_op_on(CreateOperator("BBoxTransform", ["R", "D", "I"], ["B"], rotated=1), [rois, deltas, info])
    np.testing.assert_allclose(b[:, 4], [20.0, 100.0 - 180.0], atol=1e-4)
    np.testing.assert_allclose(b[:, :4], rois[:, 1:5], atol=1e-4)


def test_bbox_transform_errors():
    op = CreateOperator("BBoxTransform", ["R", "D", "I"], ["B"])
    info = np.array([[10.0, 10.0, 1.0]], np.float32)
    with pytest.raises(FrameworkError, match="BBoxTransform.*'D'"):
        run_op_on(op, [np.zeros((2, 5), np.float32), np.zeros((2, 6), np.float32), info])
    with pytest.raises(FrameworkError, match="batch indices"):
        run_op_on(op, [np.array([[3, 0, 0, 1, 1]], np.float32), np.zeros((1, 4), np.float32), info])


# -- GenerateProposals --------------------------------------------------------------------------------


def ref_generate(scores, deltas, info, anchors, stride, pre, post, thresh, min_size, one):
    rois, probs = [], []
    n, a, h, w = scores.shape
    for i in range(n):
        cand = []  # (score, flat index, box)
        for y in range(h):
            for x in range(w):
                for k in range(a):
                    anc = anchors[k] + np.array([x * stride, y * stride, x * stride, y * stride])
                    d = deltas[i, 4 * k : 4 * k + 4, y, x].astype(np.float64)
                    cand.append((float(scores[i, k, y, x]), (y * w + x) * a + k, anc, d))
        cand.sort(key=lambda t: (-t[0], t[1]))
        if 0 < pre < len(cand):
            cand = cand[:pre]
        boxes, sc = [], []
        for s, _, anc, d in cand:
            b = ref_clip(ref_transform(list(anc), d, [1, 1, 1, 1], one), int(info[i, 0]), int(info[i, 1]), one)
            bw, bh = b[2] - b[0] + one, b[3] - b[1] + one
            ms = float(min_size) * float(info[i, 2])
            if bw >= ms and bh >= ms and b[0] + bw / 2 < info[i, 1] and b[1] + bh / 2 < info[i, 0]:
                boxes.append(b)
                sc.append(s)
        top = post if 0 < post < len(boxes) else -1
        keep = ref_nms(boxes, list(range(len(boxes))), thresh, top, one)
        rois += [[i] + boxes[j] for j in keep]
        probs += [sc[j] for j in keep]
    return [np.array(rois, np.float32).reshape(-1, 5), np.array(probs, np.float32)]


@given(data=st.data(), plus_one=st.booleans())
@settings(max_examples=25, deadline=None)
def test_generate_proposals(data, plus_one):
    n, a, h, w = (
        data.draw(st.integers(1, 2)),
        data.draw(st.integers(1, 3)),
        data.draw(st.integers(1, 4)),
        data.draw(st.integers(1, 4)),
    )
    # few distinct score values: plenty of ties
    scores = np.array(
        data.draw(st.lists(st.sampled_from([0.1, 0.5, 0.9]), min_size=n * a * h * w, max_size=n * a * h * w)),
        np.float32,
    ).reshape(n, a, h, w)
    deltas = np.array(
        data.draw(st.lists(st.floats(-0.5, 0.5, width=32), min_size=n * 4 * a * h * w, max_size=n * 4 * a * h * w)),
        np.float32,
    ).reshape(n, 4 * a, h, w)
    anchors = np.array([[-8, -8, 8, 8], [-16, -8, 16, 8], [-4, -12, 4, 12]][:a], np.float32)
    info = np.array([[40.0, 48.0, data.draw(st.sampled_from([1.0, 2.0]))]] * n, np.float32)
    pre, post = data.draw(st.integers(-1, 20)), data.draw(st.integers(-1, 10))
    thresh, min_size = data.draw(st.sampled_from([0.3, 0.7])), data.draw(st.sampled_from([0.0, 4.0]))
    op = CreateOperator(
        "GenerateProposals",
        ["S", "D", "I", "A"],
        ["R", "P"],
        spatial_scale=0.125,
        pre_nms_topN=pre,
        post_nms_topN=post,
        nms_thresh=thresh,
        min_size=min_size,
        legacy_plus_one=plus_one,
    )
    ref = lambda s, d, i, an: ref_generate(s, d, i, an, 8.0, pre, post, thresh, min_size, 1.0 if plus_one else 0.0)  # noqa: E731
    assert_reference_checks(op, [scores, deltas, info, anchors], ref, threshold=1e-3, check_inference=False)
    cpp = CreateOperator(
        "GenerateProposalsCPP",
        ["S", "D", "I", "A"],
        ["R", "P"],
        spatial_scale=0.125,
        pre_nms_topN=pre,
        post_nms_topN=post,
        nms_thresh=thresh,
        min_size=min_size,
        legacy_plus_one=plus_one,
    )
    assert_reference_checks(cpp, [scores, deltas, info, anchors], ref, threshold=1e-3, check_inference=False)


def test_generate_proposals_rotated_and_empty():
    scores = np.array([[[[0.9]], [[0.8]]]], np.float32)  # 1 x 2 x 1 x 1
    deltas = np.zeros((1, 10, 1, 1), np.float32)
    anchors = np.array([[0, 0, 8, 8, 0], [0, 0, 8, 8, 45]], np.float32)
    info = np.array([[32.0, 32.0, 1.0]], np.float32)
    op = CreateOperator(
        "GenerateProposals", ["S", "D", "I", "A"], ["R", "P"], spatial_scale=1.0, min_size=1.0, nms_thresh=0.9
    )
    r, p = run_op_on(op, [scores, deltas, info, anchors])
    assert r.shape == (2, 6) and list(p) == pytest.approx([0.9, 0.8])
    # the upright one is clipped: x1 = -3.5 -> 0, x2 = 3.5 (plus one) -> centre 1.75, width 4.5
    np.testing.assert_allclose(r[0], [0, 1.75, 1.75, 4.5, 4.5, 0.0], atol=1e-5)
    np.testing.assert_allclose(r[1], [0, 0.0, 0.0, 8.0, 8.0, 45.0], atol=1e-5)
    e = run_op_on(op, [np.zeros((1, 2, 0, 0), np.float32), np.zeros((1, 10, 0, 0), np.float32), info, anchors])
    assert e[0].shape == (0, 6) and e[1].shape == (0,)


# -- BoxWithNMSLimit ---------------------------------------------------------------------------------


def ref_box_nms(scores, boxes, splits, thr, nms, per_im, bg_in, bg_out, agnostic, one):
    out_s, out_b, out_c, per = [], [], [], []
    off = 0
    ncls = scores.shape[1]
    for nb in splits:
        sc, bx = scores[off : off + nb], boxes[off : off + nb]
        dets = []  # (class, idx)
        for j in range(1, ncls):
            col = j - 1 + int(bg_in)
            bcol = 0 if agnostic else (j if bg_in else j - 1)
            cb = [list(bx[i, 4 * bcol : 4 * bcol + 4].astype(np.float64)) for i in range(nb)]
            inds = [i for i in range(nb) if sc[i, col] > np.float32(thr)]
            keep = ref_nms(cb, by_score(sc[:, col], inds), nms, per_im if per_im > 0 else -1, one)
            dets += [(j, i) for i in keep]
        if 0 < per_im < len(dets):
            ranked = sorted(range(len(dets)), key=lambda t: (-float(sc[dets[t][1], dets[t][0] - 1 + int(bg_in)]), t))
            chosen = sorted(ranked[:per_im], key=lambda t: (dets[t][0], ranked.index(t)))
            dets = [dets[t] for t in chosen]
        for j, i in dets:
            bcol = 0 if agnostic else (j if bg_in else j - 1)
            out_s.append(sc[i, j - 1 + int(bg_in)])
            out_b.append(bx[i, 4 * bcol : 4 * bcol + 4])
            out_c.append(j - (0 if bg_out else 1))
        per.append(len(dets))
        off += nb
    return [
        np.array(out_s, np.float32),
        np.array(out_b, np.float32).reshape(-1, 4),
        np.array(out_c, np.float32),
        np.array(per, np.float32),
    ]


@given(data=st.data(), bg_in=st.booleans(), bg_out=st.booleans(), agnostic=st.booleans(), plus_one=st.booleans())
@settings(max_examples=40, deadline=None)
def test_box_with_nms_limit(data, bg_in, bg_out, agnostic, plus_one):
    ncls = data.draw(st.integers(1, 4))
    splits = data.draw(st.lists(st.integers(0, 5), min_size=1, max_size=2))
    count = sum(splits)
    scores = np.array(
        data.draw(st.lists(st.sampled_from([0.01, 0.2, 0.6, 0.6, 0.9]), min_size=count * ncls, max_size=count * ncls)),
        np.float32,
    ).reshape(count, ncls)
    nb = 1 if agnostic else (ncls if bg_in else max(ncls - 1, 0))
    corner = st.sampled_from([0.0, 1.0, 2.0, 5.0])  # coarse coordinates: identical and touching boxes
    bx = np.zeros((count, 4 * nb), np.float32)
    for r in range(count):
        for c in range(nb):
            x1, y1 = data.draw(corner), data.draw(corner)
            bx[r, 4 * c : 4 * c + 4] = [x1, y1, x1 + data.draw(corner), y1 + data.draw(corner)]
    thr, nms, per_im = (
        data.draw(st.sampled_from([0.05, 0.5])),
        data.draw(st.sampled_from([0.3, 0.5])),
        data.draw(st.integers(0, 4)),
    )
    op = CreateOperator(
        "BoxWithNMSLimit",
        ["S", "B", "N"],
        ["s", "b", "c", "n"],
        score_thresh=thr,
        nms=nms,
        detections_per_im=per_im,
        input_boxes_include_bg_cls=bg_in,
        output_classes_include_bg_cls=bg_out,
        cls_agnostic_bbox_reg=agnostic,
        legacy_plus_one=plus_one,
    )
    if ncls == 1 and not bg_in and not agnostic:
        return  # no box columns at all
    ref = lambda s, b, n: ref_box_nms(s, b, splits, thr, nms, per_im, bg_in, bg_out, agnostic, 1.0 if plus_one else 0.0)  # noqa: E731
    assert_reference_checks(op, [scores, bx, np.array(splits, np.float32)], ref, check_inference=False)


def test_box_with_nms_limit_keeps_outputs_and_ties():
    # three identical boxes with equal scores: the lowest index survives
    scores = np.array([[0.0, 0.7], [0.0, 0.7], [0.0, 0.7]], np.float32)
    boxes = np.tile(np.array([[0, 0, 0, 0, 1, 1, 4, 4]], np.float32), (3, 1))
    s, b, c, n, k, ks = run_op_on(
        CreateOperator("BoxWithNMSLimit", ["S", "B"], ["s", "b", "c", "n", "k", "ks"]), [scores, boxes]
    )
    assert list(k) == [0] and ks.tolist() == [[0, 1]] and list(c) == [1.0] and list(n) == [1.0]


def ref_soft_nms(scores, boxes, idx, sigma, ov, thr, method, one):
    sc = [float(v) for v in scores]
    pending, keep = list(idx), []
    while pending:
        vals = [sc[i] for i in pending]
        pos = vals.index(max(vals))
        i = pending[pos]
        keep.append(i)
        pending[0], pending[pos] = pending[pos], pending[0]
        rest = pending[1:]
        for j in rest:
            o = float(ref_iou(boxes[i], boxes[j], np.float32(one)))  # float32 boxes: a float32 IoU, as the C++
            wgt = (1 - o if o > ov else 1.0) if method == "linear" else math.exp(-o * o / sigma)
            sc[j] = float(np.float32(sc[j] * wgt))
        pending = [j for j in rest if sc[j] > thr]  # NaN scores (0 / 0 IoU) drop out, as in C++
    return keep, sc


@pytest.mark.parametrize("method", ["linear", "gaussian"])
@given(data=st.data())
@settings(max_examples=20, deadline=None)
def test_box_with_nms_limit_soft_nms(method, data):
    count = data.draw(st.integers(0, 6))
    scores = np.zeros((count, 2), np.float32)
    scores[:, 1] = data.draw(st.lists(st.sampled_from([0.3, 0.6, 0.9]), min_size=count, max_size=count))
    boxes = np.zeros((count, 8), np.float32)
    for r in range(count):
        x1, y1 = data.draw(st.sampled_from([0.0, 1.0, 3.0])), data.draw(st.sampled_from([0.0, 2.0]))
        boxes[r, 4:] = [x1, y1, x1 + 4, y1 + 4]
    op = CreateOperator(
        "BoxWithNMSLimit",
        ["S", "B"],
        ["s", "b", "c"],
        soft_nms_enabled=1,
        soft_nms_method=method,
        nms=0.3,
        score_thresh=0.05,
        detections_per_im=-1,
    )

    def ref(s, b):
        keep, sc = ref_soft_nms(
            s[:, 1],
            [list(r[4:]) for r in b],
            [i for i in range(count) if s[i, 1] > np.float32(0.05)],
            0.5,
            0.3,
            0.001,
            method,
            1.0,
        )
        return [np.array([sc[i] for i in keep], np.float32), b[keep, 4:].reshape(-1, 4), np.ones(len(keep), np.float32)]

    assert_reference_checks(op, [scores, boxes], ref, check_inference=False)


def test_rotated_nms_suppresses_overlapping_rotated_boxes():
    scores = np.array([[0, 0.9], [0, 0.8], [0, 0.7]], np.float32)
    boxes = np.array(
        [[0] * 5 + [10, 10, 8, 4, 30], [0] * 5 + [10, 10, 8, 4, 35], [0] * 5 + [10, 10, 8, 4, 120]], np.float32
    )
    s, b, c = run_op_on(
        CreateOperator("BoxWithNMSLimit", ["S", "B"], ["s", "b", "c"], rotated=1, nms=0.5), [scores, boxes]
    )
    assert list(s) == pytest.approx([0.9, 0.7])


def test_rotated_iou_matches_a_rasterised_estimate():
    from framework.ops.detection.boxes import rotated_iou

    a, b = np.array([5.0, 5.0, 6.0, 3.0, 30.0]), np.array([6.0, 5.0, 4.0, 4.0, -20.0])
    ys, xs = np.mgrid[0:12:0.01, 0:12:0.01]

    def inside(box):
        t = math.radians(box[4])
        dx, dy = xs - box[0], ys - box[1]
        u = dx * math.cos(t) - dy * math.sin(t)
        v = dx * math.sin(t) + dy * math.cos(t)
        return (np.abs(u) <= box[2] / 2) & (np.abs(v) <= box[3] / 2)

    ia, ib = inside(a), inside(b)
    est = (ia & ib).sum() / (ia | ib).sum()
    assert rotated_iou(a, b) == pytest.approx(est, abs=5e-3)


def test_box_with_nms_limit_errors():
    op = CreateOperator("BoxWithNMSLimit", ["S", "B", "N"], ["s", "b", "c"])
    with pytest.raises(FrameworkError, match="BoxWithNMSLimit.*'B'"):
        run_op_on(op, [np.zeros((2, 3), np.float32), np.zeros((2, 8), np.float32), np.array([2.0])])
    with pytest.raises(FrameworkError, match="batch_splits"):
        run_op_on(op, [np.zeros((2, 2), np.float32), np.zeros((2, 8), np.float32), np.array([3.0])])
    with pytest.raises(FrameworkError, match="soft_nms_method"):
        run_op_on(
            CreateOperator("BoxWithNMSLimit", ["S", "B"], ["s", "b", "c"], soft_nms_method="hard"),
            [np.zeros((1, 2), np.float32), np.zeros((1, 8), np.float32)],
        )


def _torchvision_ops():
    try:
        import torch
        import torchvision.ops as tv

        tv.nms(torch.zeros((1, 4)), torch.zeros(1), 0.5)
        return torch, tv
    except Exception as e:  # an absent or ABI-mismatched torchvision
        pytest.skip(f"torchvision.ops unusable here: {type(e).__name__}")


@pytest.mark.torch
def test_nms_and_roi_align_against_torchvision():
    torch, tv = _torchvision_ops()
    rng = np.random.default_rng(3)
    xy = rng.uniform(0, 20, (30, 2)).astype(np.float32)
    boxes = np.concatenate([xy, xy + rng.uniform(1, 10, (30, 2)).astype(np.float32)], axis=1)
    scores = rng.uniform(0, 1, 30).astype(np.float32)
    want = tv.nms(torch.from_numpy(boxes), torch.from_numpy(scores), 0.4).numpy().tolist()
    sc = np.stack([np.zeros(30, np.float32), scores], axis=1)
    bx = np.concatenate([np.zeros((30, 4), np.float32), boxes], axis=1)
    *_, k, _ = run_op_on(
        CreateOperator(
            "BoxWithNMSLimit",
            ["S", "B"],
            ["s", "b", "c", "n", "k", "ks"],
            nms=0.4,
            score_thresh=-1.0,
            detections_per_im=-1,
            legacy_plus_one=0,
        ),
        [sc, bx],
    )
    assert sorted(k.tolist()) == sorted(want)
    x = rng.standard_normal((1, 3, 12, 12)).astype(np.float32)
    rois = np.array([[0, 1.3, 2.2, 9.1, 7.7], [0, -2, -2, 14, 13]], np.float32)
    (y,) = run_op_on(
        CreateOperator(
            "RoIAlign", ["X", "R"], ["Y"], pooled_h=3, pooled_w=4, sampling_ratio=2, aligned=1, spatial_scale=0.5
        ),
        [x, rois],
    )
    t = tv.roi_align(torch.from_numpy(x), torch.from_numpy(rois), (3, 4), 0.5, 2, True).numpy()
    np.testing.assert_allclose(y, t, rtol=1e-4, atol=1e-5)
