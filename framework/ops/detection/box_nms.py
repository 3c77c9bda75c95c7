"""BoxWithNMSLimit: per-class score threshold, NMS (or soft-NMS) and a per-image detection limit
over the box head's outputs, as Detectron's test-time post-processing."""

from __future__ import annotations

import numpy as np

from framework.errors import ShapeError, TypeMismatchError
from framework.ops.detection import boxes as B
from framework.ops.detection.common import float_input
from framework.ops.gradient import should_not_do_gradient
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import BOOL, FLOAT, INT, STRING, Arg, TensorSpec

_F32 = np.dtype(np.float32)
_I32 = np.dtype(np.int32)


@register_op(
    "BoxWithNMSLimit",
    inputs=(2, 3),
    outputs=(3, 6),
    args=[
        Arg("score_thresh", FLOAT, 0.05, "keep boxes whose class score is > score_thresh"),
        Arg("nms", FLOAT, 0.3, "NMS IoU threshold"),
        Arg("detections_per_im", INT, 100, "at most this many detections per image over all classes; <= 0: all"),
        Arg("soft_nms_enabled", BOOL, False, "use soft-NMS instead of NMS"),
        Arg("soft_nms_method", STRING, "linear", "soft-NMS decay: linear or gaussian"),
        Arg("soft_nms_sigma", FLOAT, 0.5, "gaussian soft-NMS sigma"),
        Arg("soft_nms_min_score_thres", FLOAT, 0.001, "soft-NMS drops boxes whose decayed score is <= this"),
        Arg("rotated", BOOL, False, "boxes are [ctr_x, ctr_y, w, h, angle] (5 columns per class)"),
        Arg("cls_agnostic_bbox_reg", BOOL, False, "one box per RoI shared by all classes"),
        Arg("input_boxes_include_bg_cls", BOOL, True, "boxes (and scores) start with the background class"),
        Arg("output_classes_include_bg_cls", BOOL, True, "output class ids count the background (first fg is 1)"),
        Arg("legacy_plus_one", BOOL, True, "boxes are x2 - x1 + 1 wide"),
    ],
    input_docs=[
        ("scores", "count x num_classes class scores"),
        ("boxes", "count x (num_classes * 4) per-class boxes (4 columns with cls_agnostic_bbox_reg; 5 rotated)"),
        ("batch_splits", "optional: RoIs per image (floats or ints), summing to count"),
    ],
    output_docs=[
        ("scores", "n kept scores"),
        ("boxes", "n x 4 (5 rotated) kept boxes"),
        ("classes", "n class ids (floats)"),
        ("batch_splits", "detections per image (floats)"),
        ("keeps", "int32 indices of the kept RoIs, class by class"),
        ("keeps_size", "int32 batch_size x num_classes: kept per class"),
    ],
    infer=lambda args, ins: (
        [TensorSpec(None, _F32)] * min(args.num_outputs, 4) + [TensorSpec(None, _I32)] * max(0, args.num_outputs - 4)
    ),
    category="detection",
)
class BoxWithNMSLimit(Operator):
    """For each image and each foreground class j (1 .. num_classes - 1): boxes with score >
    score_thresh go through NMS (by descending score, ties by lower RoI index) or soft-NMS;
    then, if more than detections_per_im survive over all classes, the best
    detections_per_im by (soft-NMS-updated) score are kept. Output is grouped by image, then
    class, in kept order. Without background boxes (input_boxes_include_bg_cls=0) scores'
    column j - 1 belongs to class j."""

    def setup(self) -> None:
        if self.args.soft_nms_method not in ("linear", "gaussian"):
            raise self.arg_error(f"'soft_nms_method' must be linear or gaussian, got {self.args.soft_nms_method!r}")
        self._method = 1 if self.args.soft_nms_method == "linear" else 2

    def _box_col(self, j: int) -> int:
        if self.args.cls_agnostic_bbox_reg:
            return 0
        return j if self.args.input_boxes_include_bg_cls else j - 1

    def _score_col(self, j: int) -> int:
        return j - 1 + int(self.args.input_boxes_include_bg_cls)

    def _inputs(self) -> tuple:
        scores = float_input(self, 0, (2, 4))
        boxes = float_input(self, 1, (2, 4))
        for i, t in ((0, scores), (1, boxes)):
            if t.ndim == 4 and t.shape[2:] != (1, 1):
                raise ShapeError(
                    f"{self.describe()}: input {i} ('{self.input_names[i]}') 4-D must be count x K x 1 x 1"
                )
        scores, boxes = scores.reshape(scores.shape[:2]), boxes.reshape(boxes.shape[:2])
        dim = 5 if self.args.rotated else 4
        count, ncls = scores.shape
        want = (self._box_col(ncls - 1) + 1) * dim if ncls > 1 else None
        if boxes.shape[0] != count or (want is not None and boxes.shape[1] != want):
            raise ShapeError(
                f"{self.describe()}: boxes ('{self.input_names[1]}') must be {count} x {want}, got {list(boxes.shape)}"
            )
        if len(self.inputs) > 2:
            s = self.input(2)
            if s.dtype.kind not in "iuf" or s.ndim != 1:
                raise TypeMismatchError(
                    f"{self.describe()}: batch_splits ('{self.input_names[2]}') must be a 1-D number tensor"
                )
            splits = s.astype(np.int64)
            if np.any(splits < 0) or np.any(splits != s) or int(splits.sum()) != count:
                raise ShapeError(
                    f"{self.describe()}: batch_splits ('{self.input_names[2]}') must be counts summing to {count}"
                )
        else:
            splits = np.array([count], np.int64)
        return scores.astype(np.float32), boxes.astype(np.float32), splits, dim

    def run(self) -> None:
        scores, boxes, splits, dim = self._inputs()
        a = self.args
        ncls = scores.shape[1]
        out_s, out_b, out_c, out_k, sizes, per_image = [], [], [], [], [], []
        off = 0
        for nb in splits:
            sc, bx = scores[off : off + nb], boxes[off : off + nb]
            keeps, sc_used = self._one_image(sc, bx, ncls, dim)
            per_image.append(sum(len(k) for k in keeps))
            for j in range(1, ncls):
                kj = np.asarray(keeps[j], np.int64)
                out_s.append(sc_used[kj, self._score_col(j)])
                c = self._box_col(j)
                out_b.append(bx[kj, c * dim : (c + 1) * dim])
                out_c.append(np.full(len(kj), j - (0 if a.output_classes_include_bg_cls else 1), np.float32))
            out_k.extend(np.asarray(k, np.int64) for k in keeps)
            sizes.append([len(k) for k in keeps])
            off += nb
        total = int(sum(per_image))
        self.output(0, (total,), _F32)[...] = np.concatenate(out_s) if out_s else np.zeros(0)
        self.output(1, (total, dim), _F32)[...] = np.concatenate(out_b).reshape(-1, dim) if out_b else 0
        self.output(2, (total,), _F32)[...] = np.concatenate(out_c) if out_c else np.zeros(0)
        if len(self.outputs) > 3:
            self.output(3, (len(splits),), _F32)[...] = per_image
        if len(self.outputs) > 4:
            self.output(4, (total,), _I32)[...] = np.concatenate(out_k) if out_k else np.zeros(0)
            self.output(5, (len(splits), ncls), _I32)[...] = np.array(sizes, np.int64).reshape(len(splits), ncls)

    def _one_image(self, sc: np.ndarray, bx: np.ndarray, ncls: int, dim: int) -> tuple:
        a = self.args
        keeps: list = [[] for _ in range(ncls)]
        used = sc.copy()
        for j in range(1, ncls):
            col = self._score_col(j)
            cur = sc[:, col]
            inds = np.flatnonzero(cur > np.float32(a.score_thresh))
            c = self._box_col(j)
            cb = bx[:, c * dim : (c + 1) * dim]
            if a.soft_nms_enabled:
                keeps[j], upd = B.soft_nms(
                    cur,
                    cb,
                    inds,
                    a.soft_nms_sigma,
                    a.nms,
                    a.soft_nms_min_score_thres,
                    self._method,
                    -1,
                    a.legacy_plus_one,
                )
                used[:, col] = upd
            else:
                order = inds[B.order_by_score(cur[inds])]
                top = a.detections_per_im if a.detections_per_im > 0 else -1
                keeps[j] = B.nms(cb, order, a.nms, top, a.legacy_plus_one)
        total = sum(len(k) for k in keeps)
        if 0 < a.detections_per_im < total:
            pairs = [(j, i) for j in range(1, ncls) for i in keeps[j]]
            vals = np.array([used[i, self._score_col(j)] for j, i in pairs], np.float32)
            best = B.order_by_score(vals)[: a.detections_per_im]
            keeps = [[] for _ in range(ncls)]
            for p in best:
                j, i = pairs[p]
                keeps[j].append(i)
        return keeps, used


should_not_do_gradient("BoxWithNMSLimit")
