"""ONNXNonMaxSuppression: ONNX's NonMaxSuppression (opsets 10+).

Caffe2's NMS (BoxWithNMSLimit, boxes.py ``nms``) keeps legacy "+1" box areas, suppresses at
IoU >= threshold and works per image on [x1, y1, x2, y2]; ONNX takes [y1, x1, y2, x2] corners in
any order (or center boxes), suppresses at IoU strictly above the threshold and selects per
(batch, class). Ties in score keep the lower box index first.
"""

from __future__ import annotations

import numpy as np

from framework.errors import ShapeError
from framework.ops.gradient import no_gradient
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import INT, Arg, TensorSpec
from framework.ops.validation import expect_size


def _corners(boxes: np.ndarray, center: int) -> np.ndarray:
    """[n, 4] as (ymin, xmin, ymax, xmax), float64."""
    b = boxes.astype(np.float64)
    if center:
        x, y, w, h = b[:, 0], b[:, 1], b[:, 2] / 2, b[:, 3] / 2
        return np.stack([y - h, x - w, y + h, x + w], axis=1)
    return np.stack([np.minimum(b[:, 0], b[:, 2]), np.minimum(b[:, 1], b[:, 3]),
                     np.maximum(b[:, 0], b[:, 2]), np.maximum(b[:, 1], b[:, 3])], axis=1)  # fmt: skip


def _iou(c: np.ndarray, i: int, others: np.ndarray) -> np.ndarray:
    """IoU of box ``i`` with ``others`` (indices); 0 where an area or the intersection is empty."""
    o = c[others]
    ih = np.minimum(c[i, 2], o[:, 2]) - np.maximum(c[i, 0], o[:, 0])
    iw = np.minimum(c[i, 3], o[:, 3]) - np.maximum(c[i, 1], o[:, 1])
    inter = np.where((ih > 0) & (iw > 0), ih * iw, 0.0)
    a1 = (c[i, 2] - c[i, 0]) * (c[i, 3] - c[i, 1])
    a2 = (o[:, 2] - o[:, 0]) * (o[:, 3] - o[:, 1])
    union = a1 + a2 - inter
    ok = (inter > 0) & (a1 > 0) & (a2 > 0) & (union > 0)
    return np.where(ok, inter / np.where(ok, union, 1.0), 0.0)


@register_op(
    "ONNXNonMaxSuppression",
    inputs=(2, 5),
    input_docs=[
        ("boxes", "float [num_batches, spatial_dimension, 4]"),
        ("scores", "float [num_batches, num_classes, spatial_dimension]"),
        ("max_output_boxes_per_class", "int64 scalar (empty or absent: 0, nothing selected)"),
        ("iou_threshold", "float scalar (empty or absent: 0)"),
        ("score_threshold", "float scalar (empty or absent: no score filter)"),
    ],
    output_docs=[("selected_indices", "int64 [num_selected, 3]: (batch, class, box) in selection order")],
    args=[
        Arg(
            "center_point_box",
            INT,
            0,
            "0: boxes are [y1, x1, y2, x2] corners; 1: [x_center, y_center, w, h]",
            choices=(0, 1),
        )
    ],  # fmt: skip
    infer=lambda args, ins: [TensorSpec(None, np.dtype(np.int64))],
    input_types={0: "float", 1: "float", 2: "int", 3: "float", 4: "float"},
    ranks={0: 3, 1: 3},
    category="detection",
)
class ONNXNonMaxSuppression(Operator):
    """Greedy non-maximum suppression per batch and class: candidates (score strictly above
    score_threshold when given) in decreasing score order (ties: lower index first) are kept
    unless their IoU with an already kept box of the class is strictly above iou_threshold, up
    to max_output_boxes_per_class per class. Output rows are (batch, class, box index)."""

    def _scalar(self, i: int, what: str, default):
        if i >= len(self.inputs):
            return default
        v = self.input(i)
        if v.size == 0:
            return default
        expect_size(self, i, v, 1, what)
        return v.reshape(-1)[0]

    def run(self) -> None:
        boxes, scores = self.input(0), self.input(1)
        nb, n, four = boxes.shape
        if four != 4 or scores.shape[0] != nb or scores.shape[2] != n:
            raise ShapeError(
                f"{self.describe()}: boxes '{self.input_names[0]}' {list(boxes.shape)} and scores "
                f"'{self.input_names[1]}' {list(scores.shape)} must be [B, N, 4] and [B, C, N]"
            )
        max_out = max(int(self._scalar(2, "max_output_boxes_per_class", 0)), 0)
        iou_t = float(self._scalar(3, "iou_threshold", 0.0))
        score_t = self._scalar(4, "score_threshold", None)
        rows: list[tuple[int, int, int]] = []
        center = self.args.center_point_box
        for b in range(nb if max_out else 0):
            c = _corners(boxes[b], center)
            for k in range(scores.shape[1]):
                s = scores[b, k]
                cand = np.arange(n) if score_t is None else np.nonzero(s > score_t)[0]
                order = cand[np.argsort(-s[cand], kind="stable")]
                kept: list[int] = []
                for i in order:
                    if len(kept) >= max_out:
                        break
                    if kept and np.any(_iou(c, int(i), np.asarray(kept)) > iou_t):
                        continue
                    kept.append(int(i))
                rows.extend((b, k, i) for i in kept)
        out = self.output(0, (len(rows), 3), np.int64)
        if rows:
            out[...] = np.asarray(rows, np.int64)


no_gradient("ONNXNonMaxSuppression")
