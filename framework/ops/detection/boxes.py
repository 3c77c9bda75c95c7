"""Box arithmetic shared by the detection ops (no ops here): Caffe2's
``generate_proposals_op_util_boxes.h`` and ``generate_proposals_op_util_nms.h`` in numpy.

Upright boxes are rows [x1, y1, x2, y2]; rotated boxes are [ctr_x, ctr_y, w, h, angle in
degrees, counter-clockwise]. ``legacy_plus_one`` is Caffe2's (and Detectron's) convention that
a box from x1 to x2 is x2 - x1 + 1 pixels wide.

Sorting by score is stable here (ties keep the lower index first); Caffe2 uses std::sort,
whose order among equal scores is unspecified, so this is the one deterministic choice.
"""

from __future__ import annotations

import math

import numpy as np

BBOX_XFORM_CLIP = math.log(1000.0 / 16.0)


def order_by_score(scores: np.ndarray) -> np.ndarray:
    """Indices sorting ``scores`` from highest to lowest, ties by lower index (stable)."""
    return np.argsort(-np.asarray(scores, dtype=np.float64), kind="stable")


# -- transforms ----------------------------------------------------------------------------------------


def bbox_transform(
    boxes: np.ndarray,
    deltas: np.ndarray,
    weights=(1.0, 1.0, 1.0, 1.0),
    clip: float = BBOX_XFORM_CLIP,
    legacy_plus_one: bool = True,
    angle_bound_on: bool = True,
    angle_bound_lo: int = -90,
    angle_bound_hi: int = 90,
) -> np.ndarray:
    """Apply regression deltas [dx, dy, dw, dh(, da in radians)] to boxes (M x 4 or M x 5)."""
    wx, wy, ww, wh = (np.float32(w) for w in weights)
    dx, dy = deltas[:, 0] / wx, deltas[:, 1] / wy
    dw = np.minimum(deltas[:, 2] / ww, np.float32(clip))
    dh = np.minimum(deltas[:, 3] / wh, np.float32(clip))
    out = np.empty(deltas.shape, np.float32)
    if boxes.shape[1] == 4:
        one = np.float32(1.0 if legacy_plus_one else 0.0)
        widths = boxes[:, 2] - boxes[:, 0] + one
        heights = boxes[:, 3] - boxes[:, 1] + one
        ctr_x = boxes[:, 0] + np.float32(0.5) * widths
        ctr_y = boxes[:, 1] + np.float32(0.5) * heights
        px, py = dx * widths + ctr_x, dy * heights + ctr_y
        pw, ph = np.exp(dw) * widths, np.exp(dh) * heights
        out[:, 0] = px - np.float32(0.5) * pw
        out[:, 1] = py - np.float32(0.5) * ph
        out[:, 2] = px + np.float32(0.5) * pw - one
        out[:, 3] = py + np.float32(0.5) * ph - one
        return out
    out[:, 0] = dx * boxes[:, 2] + boxes[:, 0]
    out[:, 1] = dy * boxes[:, 3] + boxes[:, 1]
    out[:, 2] = np.exp(dw) * boxes[:, 2]
    out[:, 3] = np.exp(dh) * boxes[:, 3]
    out[:, 4] = deltas[:, 4] * np.float32(180.0 / math.pi) + boxes[:, 4]
    if angle_bound_on:
        period = angle_bound_hi - angle_bound_lo
        a = out[:, 4]
        a[a < angle_bound_lo] += period
        a[a > angle_bound_hi] -= period
    return out


def clip_boxes(boxes: np.ndarray, height: int, width: int, angle_thresh: float = 1.0, legacy_plus_one: bool = True):
    """Clip upright boxes to [0, W - 1] x [0, H - 1] (W, H with legacy_plus_one=0). Rotated boxes
    are clipped only when almost upright (|angle| <= angle_thresh), via their x1y1x2y2 form."""
    one = 1 if legacy_plus_one else 0
    if boxes.shape[1] == 4:
        out = np.empty_like(boxes)
        out[:, 0::2] = np.maximum(np.minimum(boxes[:, 0::2], np.float32(width - one)), np.float32(0))
        out[:, 1::2] = np.maximum(np.minimum(boxes[:, 1::2], np.float32(height - one)), np.float32(0))
        return out
    out = boxes.copy()
    up = np.abs(boxes[:, 4]) <= angle_thresh
    if up.any():
        b = boxes[up]
        half_w, half_h = (b[:, 2] - one) / np.float32(2.0), (b[:, 3] - one) / np.float32(2.0)
        xyxy = np.stack([b[:, 0] - half_w, b[:, 1] - half_h, b[:, 0] + half_w, b[:, 1] + half_h], axis=1)
        c = clip_boxes(xyxy.astype(boxes.dtype), height, width, legacy_plus_one=legacy_plus_one)
        b[:, 0] = (c[:, 0] + c[:, 2]) / np.float32(2.0)
        b[:, 1] = (c[:, 1] + c[:, 3]) / np.float32(2.0)
        b[:, 2] = c[:, 2] - c[:, 0] + one
        b[:, 3] = c[:, 3] - c[:, 1] + one
        out[up] = b
    return out


def filter_boxes(boxes: np.ndarray, min_size: float, im_info: np.ndarray, legacy_plus_one: bool = True) -> np.ndarray:
    """Indices of boxes with both sides >= min_size * scale and their centre inside the image."""
    min_size = float(min_size) * float(im_info[2])
    if boxes.shape[1] == 4:
        one = np.float32(1.0 if legacy_plus_one else 0.0)
        ws = boxes[:, 2] - boxes[:, 0] + one
        hs = boxes[:, 3] - boxes[:, 1] + one
        x_ctr = boxes[:, 0] + ws / np.float32(2)
        y_ctr = boxes[:, 1] + hs / np.float32(2)
    else:
        x_ctr, y_ctr, ws, hs = boxes[:, 0], boxes[:, 1], boxes[:, 2], boxes[:, 3]
    keep = (ws >= min_size) & (hs >= min_size) & (x_ctr < np.float32(im_info[1])) & (y_ctr < np.float32(im_info[0]))
    return np.flatnonzero(keep)


def boxes_area(boxes: np.ndarray, legacy_plus_one: bool = True) -> np.ndarray:
    one = np.float32(1.0 if legacy_plus_one else 0.0)
    return (boxes[:, 2] - boxes[:, 0] + one) * (boxes[:, 3] - boxes[:, 1] + one)


# -- overlaps ------------------------------------------------------------------------------------------


def _iou_upright(boxes: np.ndarray, i: int, rest: np.ndarray, areas: np.ndarray, one: np.float32) -> np.ndarray:
    xx1 = np.maximum(boxes[i, 0], boxes[rest, 0])
    yy1 = np.maximum(boxes[i, 1], boxes[rest, 1])
    xx2 = np.minimum(boxes[i, 2], boxes[rest, 2])
    yy2 = np.minimum(boxes[i, 3], boxes[rest, 3])
    w = np.maximum(np.float32(0), xx2 - xx1 + one)
    h = np.maximum(np.float32(0), yy2 - yy1 + one)
    inter = w * h
    return inter / (areas[i] + areas[rest] - inter)


def _corners(box: np.ndarray) -> np.ndarray:
    """Vertices (4 x 2, counter-clockwise) of a rotated box [cx, cy, w, h, angle degrees]."""
    cx, cy, w, h, a = (float(v) for v in box[:5])
    t = math.radians(a)
    c, s = math.cos(t), math.sin(t)
    pts = [(-w / 2, -h / 2), (w / 2, -h / 2), (w / 2, h / 2), (-w / 2, h / 2)]
    # counter-clockwise rotation in image coordinates (y down): x' = x c + y s, y' = -x s + y c
    return np.array([(cx + x * c + y * s, cy - x * s + y * c) for x, y in pts])


def _poly_area(p: np.ndarray) -> float:
    if len(p) < 3:
        return 0.0
    x, y = p[:, 0], p[:, 1]
    return 0.5 * abs(float(np.dot(x, np.roll(y, -1)) - np.dot(y, np.roll(x, -1))))


def _clip_polygon(subject: np.ndarray, clip: np.ndarray) -> np.ndarray:
    """Sutherland-Hodgman: ``subject`` clipped by the convex polygon ``clip``."""
    # orient clip counter-clockwise in the usual (x right, y up) sense of the cross product
    if np.cross(clip[1] - clip[0], clip[2] - clip[1]) < 0:
        clip = clip[::-1]
    out = list(subject)
    for k in range(len(clip)):
        a, b = clip[k], clip[(k + 1) % len(clip)]
        inp, out = out, []
        if not inp:
            break
        e = b - a
        for j in range(len(inp)):
            p, q = inp[j], inp[(j + 1) % len(inp)]
            pin = e[0] * (p[1] - a[1]) - e[1] * (p[0] - a[0]) >= 0
            qin = e[0] * (q[1] - a[1]) - e[1] * (q[0] - a[0]) >= 0
            if pin:
                out.append(p)
            if pin != qin:
                d = q - p
                den = e[0] * d[1] - e[1] * d[0]
                if den != 0:
                    t = (e[1] * (p[0] - a[0]) - e[0] * (p[1] - a[1])) / den
                    out.append(p + t * d)
    return np.array(out) if out else np.zeros((0, 2))


def rotated_iou(a: np.ndarray, b: np.ndarray) -> float:
    """Intersection over union of two rotated boxes (areas w * h, no plus-one)."""
    area_a, area_b = float(a[2]) * float(a[3]), float(b[2]) * float(b[3])
    if area_a <= 0 or area_b <= 0:
        return 0.0
    inter = _poly_area(_clip_polygon(_corners(a), _corners(b)))
    return inter / (area_a + area_b - inter)


def _iou_rotated(boxes: np.ndarray, i: int, rest: np.ndarray) -> np.ndarray:
    return np.array([rotated_iou(boxes[i], boxes[j]) for j in rest], dtype=np.float64)


# -- NMS -------------------------------------------------------------------------------------------------


def nms(boxes: np.ndarray, order: np.ndarray, thresh: float, top_n: int = -1, legacy_plus_one: bool = True) -> list:
    """Greedy NMS over ``order`` (indices, best first): keep the first, drop those overlapping it
    by IoU > thresh, repeat; stop after ``top_n`` kept (top_n < 0: no limit)."""
    order = np.asarray(order, dtype=np.int64)
    keep: list = []
    if order.size == 0:
        return keep
    rotated = boxes.shape[1] == 5
    one = np.float32(1.0 if legacy_plus_one else 0.0)
    areas = None if rotated else boxes_area(boxes, legacy_plus_one)
    while order.size:
        if 0 <= top_n <= len(keep):
            break
        i = int(order[0])
        keep.append(i)
        rest = order[1:]
        ovr = _iou_rotated(boxes, i, rest) if rotated else _iou_upright(boxes, i, rest, areas, one)
        order = rest[ovr <= thresh]
    return keep


def soft_nms(
    scores: np.ndarray,
    boxes: np.ndarray,
    indices: np.ndarray,
    sigma: float = 0.5,
    overlap_thresh: float = 0.3,
    score_thresh: float = 0.001,
    method: int = 1,
    top_n: int = -1,
    legacy_plus_one: bool = True,
) -> tuple[list, np.ndarray]:
    """Caffe2's soft-NMS: (kept indices, updated scores). Repeatedly keep the pending box of
    highest (updated) score (first one on ties, in pending order), swap it to the front, decay
    the others' scores by IoU (method 1 linear: 1 - IoU above overlap_thresh; 2 gaussian:
    exp(-IoU^2 / sigma); else hard NMS), and drop those whose score fell to <= score_thresh."""
    out = np.array(scores, dtype=np.float32, copy=True)
    rotated = boxes.shape[1] == 5
    one = np.float32(1.0 if legacy_plus_one else 0.0)
    areas = None if rotated else boxes_area(boxes, legacy_plus_one)
    pending = np.array(indices, dtype=np.int64)
    keep: list = []
    while pending.size:
        if 0 <= top_n <= len(keep):
            break
        pos = int(np.argmax(out[pending]))
        i = int(pending[pos])
        keep.append(i)
        pending[0], pending[pos] = pending[pos], pending[0]
        rest = pending[1:]
        ovr = _iou_rotated(boxes, i, rest) if rotated else _iou_upright(boxes, i, rest, areas, one)
        ovr = ovr.astype(np.float64)  # float IoU, double weights (as the C++: -1.0 * ovr * ovr / sigma)
        if method == 1:
            weight = np.where(ovr > overlap_thresh, 1.0 - ovr, 1.0)
        elif method == 2:
            weight = np.exp(-1.0 * ovr * ovr / sigma)
        else:
            weight = np.where(ovr > overlap_thresh, 0.0, 1.0)
        out[rest] = (out[rest] * weight).astype(np.float32)
        pending = rest[out[rest] > score_thresh]
    return keep, out
