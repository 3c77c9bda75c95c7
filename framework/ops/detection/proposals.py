"""Box regression and RPN proposals: BBoxTransform (apply per-class deltas to RoIs, clip to the
image) and GenerateProposals (anchors + deltas -> clipped, filtered, NMS-ed proposals per
image; GenerateProposalsCPP is the same op), upright or rotated boxes."""

from __future__ import annotations

from typing import Any

import numpy as np

from framework.errors import ShapeError
from framework.ops.detection import boxes as B
from framework.ops.detection.common import float_input, roi_table
from framework.ops.gradient import should_not_do_gradient
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import BOOL, FLOAT, FLOATS, INT, Arg, TensorSpec

_ROTATION_ARGS = [
    Arg("angle_bound_on", BOOL, True, "rotated: keep angles within [angle_bound_lo, angle_bound_hi]"),
    Arg("angle_bound_lo", INT, -90, "rotated: lower angle bound (degrees)"),
    Arg("angle_bound_hi", INT, 90, "rotated: upper angle bound (degrees)"),
    Arg("clip_angle_thresh", FLOAT, 1.0, "rotated: clip only boxes within this many degrees of upright"),
    Arg("legacy_plus_one", BOOL, True, "boxes are x2 - x1 + 1 wide (Detectron's convention)"),
]


def _check_rotation(op: Operator) -> None:
    period = op.args.angle_bound_hi - op.args.angle_bound_lo
    if op.args.angle_bound_on and (period <= 0 or period % 180):
        raise op.arg_error(f"angle_bound_hi - angle_bound_lo must be a positive multiple of 180, got {period}")


def _im_info(op: Operator, i: int) -> np.ndarray:
    info = float_input(op, i, 2)
    if info.shape[1] != 3:
        raise ShapeError(f"{op.describe()}: im_info ('{op.input_names[i]}') must be N x 3, got {list(info.shape)}")
    if info.size and (not np.all(np.isfinite(info)) or np.any(info[:, 2] <= 0)):
        raise ShapeError(f"{op.describe()}: im_info ('{op.input_names[i]}') needs finite sizes and positive scales")
    return info


# -- BBoxTransform ----------------------------------------------------------------------------------


@register_op(
    "BBoxTransform",
    inputs=3,
    outputs=(1, 2),
    args=[
        Arg("weights", FLOATS, [1.0, 1.0, 1.0, 1.0], "weights [wx, wy, ww, wh] dividing the deltas"),
        Arg("apply_scale", BOOL, True, "return boxes in the scaled image (else in the original image)"),
        Arg("rotated", BOOL, False, "boxes are [ctr_x, ctr_y, w, h, angle] and deltas have 5 columns per class"),
        *_ROTATION_ARGS,
    ],
    input_docs=[
        ("rois", "M x 4 [x1, y1, x2, y2] or M x 5 [batch index, ...] (5 / 6 rotated), grouped by image"),
        ("deltas", "M x 4K (5K rotated) regression deltas [dx, dy, dw, dh(, da)] per class"),
        ("im_info", "N x 3 [height, width, scale] of each (scaled) image"),
    ],
    output_docs=[
        ("box_out", "M x 4K (5K) transformed boxes, clipped to the image"),
        ("roi_batch_splits", "N floats: the number of RoIs of each image"),
    ],
    infer=lambda args, ins: [
        TensorSpec(ins[1].shape, ins[1].dtype),
        TensorSpec((ins[2].shape[0],) if ins[2].shape is not None else None, np.dtype(np.float32)),
    ][: args.num_outputs],
    category="detection",
)
class BBoxTransform(Operator):
    """Applies box-regression deltas to proposals: the RoIs (divided by the image scale) get
    each class's deltas (dw, dh capped at log(1000/16)), are clipped to the original image
    (height / scale rounded), and scaled back with apply_scale."""

    def setup(self) -> None:
        if len(self.args.weights) != 4:
            raise self.arg_error(f"'weights' must have 4 values, got {self.args.weights}")
        _check_rotation(self)

    def run(self) -> None:
        a = self.args
        dim = 5 if a.rotated else 4
        rois = roi_table(self, 0, (dim, dim + 1))
        deltas = float_input(self, 1, 2)
        info = _im_info(self, 2)
        n, m = info.shape[0], rois.shape[0]
        if deltas.shape[0] != m or deltas.shape[1] % dim:
            raise ShapeError(
                f"{self.describe()}: deltas ('{self.input_names[1]}') must be {m} x {dim}K, got {list(deltas.shape)}"
            )
        if rois.shape[1] == dim:
            if n != 1:
                raise ShapeError(f"{self.describe()}: RoIs without a batch index need exactly one image, got {n}")
            counts = np.array([m])
        else:
            b = rois[:, 0]
            if m and (b.min() < 0 or b.max() >= n):
                raise ShapeError(f"{self.describe()}: RoI batch indices must lie in [0, {n})")
            counts = np.bincount(b.astype(np.int64), minlength=n)
        k = deltas.shape[1] // dim
        out = np.zeros(deltas.shape, np.float32)
        off = 0
        for i in range(n):
            cnt = int(counts[i])
            scale_before = np.float32(info[i, 2])
            scale_after = scale_before if a.apply_scale else np.float32(1.0)
            img_h = int(float(np.float32(info[i, 0]) / scale_before) + 0.5)  # float division, double add (C++)
            img_w = int(float(np.float32(info[i, 1]) / scale_before) + 0.5)
            cur = rois[off : off + cnt, -dim:].astype(np.float32)
            cur[:, :4] /= scale_before
            for j in range(k):
                d = deltas[off : off + cnt, j * dim : (j + 1) * dim].astype(np.float32)
                t = B.bbox_transform(
                    cur,
                    d,
                    a.weights,
                    B.BBOX_XFORM_CLIP,
                    a.legacy_plus_one,
                    a.angle_bound_on,
                    a.angle_bound_lo,
                    a.angle_bound_hi,
                )
                c = B.clip_boxes(t, img_h, img_w, a.clip_angle_thresh, a.legacy_plus_one)
                c[:, :4] *= scale_after
                out[off : off + cnt, j * dim : (j + 1) * dim] = c
            off += cnt
        self.output(0, deltas.shape, deltas.dtype)[...] = out
        if len(self.outputs) > 1:
            self.output(1, (n,), np.dtype(np.float32))[...] = counts


# -- GenerateProposals --------------------------------------------------------------------------------


def all_anchors(anchors: np.ndarray, height: int, width: int, stride: float) -> np.ndarray:
    """(H * W * A) x D anchors shifted to every feature-map cell, ordered (h, w, a)."""
    a, d = anchors.shape
    sy, sx = np.meshgrid(np.arange(height) * np.float32(stride), np.arange(width) * np.float32(stride), indexing="ij")
    shift = np.zeros((height, width, 1, d), np.float32)
    shift[..., 0, 0], shift[..., 0, 1] = sx, sy
    if d == 4:
        shift[..., 0, 2], shift[..., 0, 3] = sx, sy
    return (anchors.astype(np.float32)[None, None] + shift).reshape(-1, d)


@register_op(
    "GenerateProposals",
    inputs=4,
    outputs=2,
    aliases=("GenerateProposalsCPP",),
    args=[
        Arg("spatial_scale", FLOAT, 1.0 / 16.0, "feature-map scale: anchors move by 1 / spatial_scale per cell"),
        Arg("pre_nms_topN", INT, 6000, "proposals kept (by score) before NMS; <= 0: all"),
        Arg("post_nms_topN", INT, 300, "proposals kept after NMS; <= 0: all"),
        Arg("nms_thresh", FLOAT, 0.7, "NMS IoU threshold"),
        Arg("min_size", FLOAT, 16.0, "minimum box side (in the original image; times im_info scale)"),
        *_ROTATION_ARGS,
    ],
    input_docs=[
        ("scores", "N x A x H x W objectness scores"),
        ("bbox_deltas", "N x 4A x H x W (5A rotated) deltas"),
        ("im_info", "N x 3 [height, width, scale]"),
        ("anchors", "A x 4 [x1, y1, x2, y2] (A x 5 rotated) cell anchors"),
    ],
    output_docs=[
        ("rois", "R x 5 [batch index, x1, y1, x2, y2] (R x 6 rotated) proposals, image by image"),
        ("rois_probs", "R scores of the proposals"),
    ],
    infer=lambda args, ins: [TensorSpec(None, np.dtype(np.float32))] * 2,
    category="detection",
)
class GenerateProposals(Operator):
    """Faster R-CNN's RPN proposals, per image: shift the anchors over the H x W grid, take the
    pre_nms_topN best scores (ties by lower (h, w, a) index), apply the deltas, clip to the
    image (int(height) x int(width)), drop boxes smaller than min_size or centred outside,
    then greedy NMS keeping at most post_nms_topN. Output rows follow score order per image.
    Rotated when the anchors have 5 columns."""

    def setup(self) -> None:
        _check_rotation(self)
        if self.args.spatial_scale <= 0:
            raise self.arg_error(f"'spatial_scale' must be positive, got {self.args.spatial_scale}")

    def run(self) -> None:
        a = self.args
        scores = float_input(self, 0, 4)
        deltas = float_input(self, 1, 4)
        info = _im_info(self, 2)
        anchors = float_input(self, 3, 2)
        n, na, h, w = scores.shape
        dim = anchors.shape[1]
        if dim not in (4, 5) or anchors.shape[0] != na:
            raise ShapeError(
                f"{self.describe()}: anchors ('{self.input_names[3]}') must be {na} x 4 or {na} x 5, "
                f"got {list(anchors.shape)}"
            )
        if deltas.shape != (n, na * dim, h, w):
            raise ShapeError(
                f"{self.describe()}: bbox_deltas ('{self.input_names[1]}') must be {[n, na * dim, h, w]}, "
                f"got {list(deltas.shape)}"
            )
        if info.shape[0] != n:
            raise ShapeError(
                f"{self.describe()}: im_info ('{self.input_names[2]}') must have {n} rows, got {info.shape[0]}"
            )
        if not (np.all(np.isfinite(anchors)) and np.all(np.isfinite(deltas))):
            raise ShapeError(f"{self.describe()}: anchors and deltas must be finite")
        grid = all_anchors(anchors, h, w, 1.0 / a.spatial_scale)
        rois, probs = [], []
        for i in range(n):
            boxes, sc = self._one_image(grid, scores[i], deltas[i], info[i], dim)
            rois.append(np.concatenate([np.full((len(sc), 1), i, np.float32), boxes], axis=1))
            probs.append(sc)
        r = np.concatenate(rois) if rois else np.zeros((0, dim + 1), np.float32)
        p = np.concatenate(probs) if probs else np.zeros((0,), np.float32)
        self.output(0, r.shape, np.dtype(np.float32))[...] = r
        self.output(1, p.shape, np.dtype(np.float32))[...] = p

    def _one_image(self, grid: np.ndarray, scores: np.ndarray, deltas: np.ndarray, info: np.ndarray, dim: int) -> Any:
        a = self.args
        na, h, w = scores.shape
        sc = scores.transpose(1, 2, 0).reshape(-1).astype(np.float32)
        dl = deltas.reshape(na, dim, h, w).transpose(2, 3, 0, 1).reshape(-1, dim).astype(np.float32)
        order = B.order_by_score(sc)
        if 0 < a.pre_nms_topN < sc.size:
            order = order[: a.pre_nms_topN]
        sc, dl, anc = sc[order], dl[order], grid[order]
        props = B.bbox_transform(
            anc,
            dl,
            (1.0, 1.0, 1.0, 1.0),
            B.BBOX_XFORM_CLIP,
            a.legacy_plus_one,
            a.angle_bound_on,
            a.angle_bound_lo,
            a.angle_bound_hi,
        )
        props = B.clip_boxes(props, int(info[0]), int(info[1]), a.clip_angle_thresh, a.legacy_plus_one)
        keep = B.filter_boxes(props, a.min_size, info, a.legacy_plus_one)
        top = a.post_nms_topN if 0 < a.post_nms_topN < keep.size else -1
        keep = B.nms(props, keep, a.nms_thresh, top, a.legacy_plus_one)
        keep = np.asarray(keep, dtype=np.int64)
        return props[keep], sc[keep]


should_not_do_gradient("BBoxTransform", "GenerateProposals")
