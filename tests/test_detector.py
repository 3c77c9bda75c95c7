"""The tiny two-stage detector in models/tiny_mask_rcnn: files current, `framework run` gives
boxes, classes and masks, and its outputs equal an independent numpy re-implementation of the
whole inference (convs, RPN, proposals, FPN routing, RoIAlign, heads, box decoding, NMS, masks)
with the same weights; with no detections the mask head is skipped (If)."""

import os
import subprocess
import sys

import numpy as np
import pytest

from framework.errors import FrameworkError
from framework.memory.workspace import Workspace
from framework.proto.io import read_net
from framework.runtime.blas_kernel import same_kernels_env
from tests.ops.detection.test_fpn_keypoints import ref_collect, ref_distribute
from tests.ops.detection.test_proposals_nms import ref_box_nms, ref_clip, ref_generate, ref_transform
from tests.ops.detection.test_roi_ops import ref_roi_align

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FOLDER = os.path.join(ROOT, "models", "tiny_mask_rcnn")
sys.path.insert(0, os.path.join(ROOT, "models"))
import detector as D  # noqa: E402


def conv(x, w, b, stride=1, pad=0):
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh, ow = (h + 2 * pad - kh) // stride + 1, (wd + 2 * pad - kw) // stride + 1
    out = np.zeros((n, o, oh, ow))
    for i in range(kh):
        for j in range(kw):
            patch = xp[:, :, i : i + stride * oh : stride, j : j + stride * ow : stride]
            out += np.einsum("nchw,oc->nohw", patch, w[:, :, i, j])
    return out + b[None, :, None, None]


def conv_transpose(x, w, b, stride):
    n, c, h, wd = x.shape
    _, o, kh, kw = w.shape
    out = np.zeros((n, o, (h - 1) * stride + kh, (wd - 1) * stride + kw))
    for i in range(kh):
        for j in range(kw):
            out[:, :, i : i + stride * h : stride, j : j + stride * wd : stride] += np.einsum(
                "nchw,co->nohw", x, w[:, :, i, j]
            )
    return out + b[None, :, None, None]


def relu(x):
    return np.maximum(x, 0)


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


def reference(p, image, info):
    """The detector's inference in numpy, from the parameters ``p`` (name -> array)."""
    c1 = relu(conv(image, p["c1_w"], p["c1_b"], 2, 1))
    c2 = relu(conv(c1, p["c2_w"], p["c2_b"], 2, 1))
    feats = {2: c2, 3: relu(conv(c2, p["c3_w"], p["c3_b"], 2, 1))}
    levels = []
    for lv in D.LEVELS:
        hid = relu(conv(feats[lv], p["rpn_conv_w"], p["rpn_conv_b"], 1, 1))
        prob = sigmoid(conv(hid, p["rpn_cls_w"], p["rpn_cls_b"])).astype(np.float32)
        deltas = conv(hid, p["rpn_bbox_w"], p["rpn_bbox_b"]).astype(np.float32)
        a = D.GP_ARGS
        r, s = ref_generate(
            prob,
            deltas,
            info,
            p[f"anchors_fpn{lv}"],
            2.0**lv,
            a["pre_nms_topN"],
            a["post_nms_topN"],
            a["nms_thresh"],
            a["min_size"],
            1.0,
        )
        levels.append((r, s))
    f = D.FPN_ARGS
    rois = ref_collect(levels, f["rpn_post_nms_topN"])
    *per_level, restore = ref_distribute(rois, 2, 3, 1.0, f["roi_canonical_scale"], f["roi_canonical_level"])
    pooled = np.concatenate(
        [ref_roi_align(feats[lv], r, 1.0 / 2**lv, D.POOL, D.POOL, 2, False) for lv, r in zip(D.LEVELS, per_level)]
    )[restore]
    h = relu(pooled.reshape(len(rois), -1) @ p["fc6_w"].T + p["fc6_b"])
    logits = h @ p["cls_score_w"].T + p["cls_score_b"]
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    cls = (e / e.sum(axis=1, keepdims=True)).astype(np.float32)
    bbox = h @ p["bbox_pred_w"].T + p["bbox_pred_b"]
    boxes = np.zeros_like(bbox)
    for r in range(len(rois)):
        for k in range(D.CLASSES):
            t = ref_transform(list(rois[r, 1:].astype(np.float64)), bbox[r, 4 * k : 4 * k + 4], D.BBOX_WEIGHTS, 1.0)
            boxes[r, 4 * k : 4 * k + 4] = ref_clip(t, int(info[0, 0] + 0.5), int(info[0, 1] + 0.5), 1.0)
    n = D.NMS_ARGS
    sc, bx, cl, _ = ref_box_nms(
        cls,
        boxes.astype(np.float32),
        [len(rois)],
        n["score_thresh"],
        n["nms"],
        n["detections_per_im"],
        True,
        True,
        False,
        1.0,
    )
    if len(sc) == 0:
        return bx, sc, cl, np.zeros((0, D.CLASSES, 2 * D.MASK_POOL, 2 * D.MASK_POOL))
    m = ref_roi_align(feats[2], bx, 0.25, D.MASK_POOL, D.MASK_POOL, 2, False)
    m = relu(conv(m, p["mask_conv_w"], p["mask_conv_b"], 1, 1))
    m = relu(conv_transpose(m, p["mask_up_w"], p["mask_up_b"], 2))
    return bx, sc, cl, sigmoid(conv(m, p["mask_logits_w"], p["mask_logits_b"]))


def _run(image, overrides=None):
    ws = Workspace()
    init = read_net(os.path.join(FOLDER, "init_net.pbtxt"))
    ws.run_net_once(init)
    for k, v in (overrides or {}).items():
        ws.feed_blob(k, v)
    params = {o: ws.fetch_blob(o) for op in init.op for o in op.output}
    ws.feed_blob("data", image)
    predict = read_net(os.path.join(FOLDER, "predict_net.pbtxt"))
    ws.run_net_once(predict)
    return ws, params, [ws.fetch_blob(b) for b in predict.external_output]


def test_detector_files_are_current():
    for fname, text in D.render().items():
        with open(os.path.join(FOLDER, fname)) as f:
            assert f.read() == text, f"{fname} is stale: run `python models/detector.py`"
    np.testing.assert_array_equal(np.load(os.path.join(FOLDER, "sample_image.npy")), D.sample_image())


@pytest.mark.parametrize("seed", [None, 1, 2])
def test_detector_matches_numpy_reimplementation(seed):
    image = (
        D.sample_image()
        if seed is None
        else np.random.default_rng(seed).uniform(-1, 2, (1, 3, 64, 64)).astype(np.float32)
    )
    ws, params, (bx, sc, cl, masks) = _run(image)
    assert len(sc) > 0, "the sample must produce detections (the mask head runs)"
    rb, rs, rc, rm = reference(params, image.astype(np.float64), params["im_info"])
    np.testing.assert_array_equal(cl, rc)
    np.testing.assert_allclose(sc, rs, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(bx, rb, rtol=1e-4, atol=1e-3)
    assert masks.shape == (len(sc), D.CLASSES, 14, 14)
    np.testing.assert_allclose(masks, rm, rtol=1e-4, atol=1e-5)
    assert ws.fetch_blob("mask_roi_feat").shape == (len(sc), D.CH, D.MASK_POOL, D.MASK_POOL)


def test_no_detections_skips_the_mask_head():
    # a background-only classifier: every foreground score is ~0, below score_thresh
    zero_w = np.zeros((D.CLASSES, 32), np.float32)
    ws, params, (bx, sc, cl, masks) = _run(
        D.sample_image(), {"cls_score_w": zero_w, "cls_score_b": np.array([50.0, 0.0, 0.0], np.float32)}
    )
    assert bx.shape == (0, 4) and sc.shape == (0,) and cl.shape == (0,)
    assert masks.shape == (0, D.CLASSES, 14, 14)
    with pytest.raises(FrameworkError):  # the then-branch never ran: its blobs hold nothing
        ws.fetch_blob("mask_roi_feat")
    rb, rs, _, rm = reference(params, D.sample_image().astype(np.float64), params["im_info"])
    assert rs.shape == (0,) and rm.shape[0] == 0


def test_framework_run_prints_boxes_classes_and_masks(tmp_path):
    out = tmp_path / "dets.npz"
    cmd = [
        sys.executable,
        "-m",
        "framework",
        "run",
        os.path.join(FOLDER, "predict_net.pbtxt"),
        "--init",
        os.path.join(FOLDER, "init_net.pbtxt"),
        "--input",
        f"data={os.path.join(FOLDER, 'sample_image.npy')}",
        "--save",
        str(out),
    ]
    res = subprocess.run(
        cmd,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env={**same_kernels_env(), "OPENBLAS_NUM_THREADS": "1"},  # bit-identical sums: the same BLAS kernels
    )
    assert res.returncode == 0, res.stderr
    for name in ("bbox_nms", "score_nms", "class_nms", "mask_probs"):
        assert name in res.stdout
    saved = np.load(out)
    _, _, (bx, sc, cl, masks) = _run(D.sample_image())
    np.testing.assert_array_equal(saved["bbox_nms"], bx)
    np.testing.assert_array_equal(saved["mask_probs"], masks)
