"""HeatmapMaxKeypoint (keypoint R-CNN's heatmap decoding, with a quadratic sub-pixel refinement)
and BatchBoxCox (the per-column Box-Cox transform of dense features)."""

from __future__ import annotations

import numpy as np

from framework.errors import ShapeError
from framework.ops.detection.common import float_input
from framework.ops.gradient import should_not_do_gradient
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import BOOL, INT, Arg, TensorSpec, same_as_input

_MAX_DELTA = 1.5


@register_op(
    "HeatmapMaxKeypoint",
    inputs=2,
    args=[Arg("should_output_softmax", BOOL, False, "fill row 3 with the softmax probability of the maximum")],
    input_docs=[
        ("heatmaps", "N x K x S x S keypoint heatmaps (S >= 2)"),
        ("bboxes_in", "N x (>= 4) boxes [x1, y1, x2, y2, ...]"),
    ],
    output_docs=[("keypoints", "N x 4 x K: x, y, refined score, softmax probability (0 unless asked)")],
    infer=lambda args, ins: [
        TensorSpec(
            (ins[0].shape[0], 4, ins[0].shape[1]) if ins[0].shape is not None and len(ins[0].shape) == 4 else None,
            np.dtype(np.float32),
        )
    ],
    category="detection",
)
class HeatmapMaxKeypoint(Operator):
    """Each heatmap's maximum (first in row-major order) is refined by the maximum of the
    quadratic Taylor fit over its 3 x 3 neighbourhood (mirrored at the borders): offset
    delta = A^-1 b, clipped to 1.5 cells (keeping its direction), none when |det A| < 1e-4.
    The keypoint is box origin + (0.5 + max + delta) * box side (>= 1) / S."""

    def run(self) -> None:
        hm = float_input(self, 0, 4)
        boxes = float_input(self, 1, 2)
        n, k, s, s2 = hm.shape
        if s < 2 or s != s2:
            raise ShapeError(
                f"{self.describe()}: heatmaps ('{self.input_names[0]}') must be N x K x S x S with S >= 2, "
                f"got {list(hm.shape)}"
            )
        if boxes.shape[0] != n or boxes.shape[1] < 4:
            raise ShapeError(
                f"{self.describe()}: bboxes_in ('{self.input_names[1]}') must be {n} x (>= 4), got {list(boxes.shape)}"
            )
        flat = hm.reshape(n * k, s * s).astype(np.float32)
        idx = np.argmax(flat, axis=1) if flat.size else np.zeros(0, np.int64)
        best = flat[np.arange(n * k), idx]
        my, mx = idx // s, idx % s
        f = np.zeros((n * k, 3, 3), np.float32)
        for dy in (-1, 0, 1):
            for dx in (-1, 0, 1):
                xx = dx - 2 * (dx + mx >= s) + 2 * (dx + mx < 0)
                yy = dy - 2 * (dy + my >= s) + 2 * (dy + my < 0)
                f[:, dy + 1, dx + 1] = flat[np.arange(n * k), (yy + my) * s + xx + mx]
        b = np.stack([-(f[:, 1, 2] - f[:, 1, 0]) / 2, -(f[:, 2, 1] - f[:, 0, 1]) / 2], axis=1).astype(np.float64)
        cross = (f[:, 2, 2] - f[:, 2, 0] - f[:, 0, 2] + f[:, 0, 0]) / 4
        a = np.empty((n * k, 2, 2), np.float64)
        a[:, 0, 0] = f[:, 1, 0] - 2 * f[:, 1, 1] + f[:, 1, 2]
        a[:, 0, 1] = a[:, 1, 0] = cross
        a[:, 1, 1] = f[:, 0, 1] - 2 * f[:, 1, 1] + f[:, 2, 1]
        det = a[:, 0, 0] * a[:, 1, 1] - a[:, 0, 1] * a[:, 1, 0]
        ok = np.abs(det) >= 1e-4
        delta = np.zeros((n * k, 2))
        score = best.astype(np.float64)
        if ok.any():
            d = np.linalg.solve(a[ok], b[ok][..., None])[..., 0]
            big = np.max(np.abs(d), axis=1)
            clip = big > _MAX_DELTA
            d[clip] = d[clip] / big[clip, None] * _MAX_DELTA
            delta[ok] = d
            quad = np.einsum("ni,nij,nj->n", d, a[ok], d)
            score[ok] = f[ok, 1, 1] - np.einsum("ni,ni->n", b[ok], d) + 0.5 * quad
        bx = np.repeat(boxes[:, :4].astype(np.float32), k, axis=0)
        xlen = np.maximum(bx[:, 2] - bx[:, 0], 1.0)
        ylen = np.maximum(bx[:, 3] - bx[:, 1], 1.0)
        out = np.zeros((n, 4, k), np.float32)
        out[:, 0, :] = (bx[:, 0] + (0.5 + mx + delta[:, 0]) * xlen / s).reshape(n, k)
        out[:, 1, :] = (bx[:, 1] + (0.5 + my + delta[:, 1]) * ylen / s).reshape(n, k)
        out[:, 2, :] = score.reshape(n, k)
        if self.args.should_output_softmax and flat.size:
            e = np.exp(flat.astype(np.float64))
            out[:, 3, :] = (e[np.arange(n * k), idx] / e.sum(axis=1)).reshape(n, k)
        self.output(0, out.shape, np.dtype(np.float32))[...] = out


@register_op(
    "BatchBoxCox",
    inputs=3,
    args=[Arg("min_block_size", INT, 256, "Caffe2's MKL batching knob (no effect here)")],
    input_docs=[("data", "N x D float matrix"), ("lambda1", "D exponents"), ("lambda2", "D shifts")],
    output_docs=[("output", "the Box-Cox transform of each column, shaped as data")],
    allow_inplace={(0, 0)},
    infer=same_as_input(0),
    category="detection",
)
class BatchBoxCox(Operator):
    """Per column j: t = max(x + lambda2[j], 1e-6); y = log(t) if lambda1[j] == 0 else
    (t^lambda1[j] - 1) / lambda1[j]. No gradient (Caffe2: not implemented)."""

    def run(self) -> None:
        x = float_input(self, 0)
        l1, l2 = float_input(self, 1), float_input(self, 2)
        if x.ndim < 1:
            raise ShapeError(f"{self.describe()}: data ('{self.input_names[0]}') must have at least 1 dim")
        n = x.shape[0]
        d = x.size // n if n else int(np.prod(x.shape[1:], dtype=np.int64))
        if x.size and (l1.size != d or l2.size != d):
            raise ShapeError(
                f"{self.describe()}: lambda1 ('{self.input_names[1]}') and lambda2 ('{self.input_names[2]}') need {d} "
                f"values, got {l1.size} and {l2.size}"
            )
        if x.size == 0:
            self.output(0, x.shape, x.dtype)
            return
        x2 = x.reshape(n, d)
        lam1, lam2 = l1.reshape(1, d).astype(x.dtype), l2.reshape(1, d).astype(x.dtype)
        t = np.maximum(x2 + lam2, x.dtype.type(1e-6))
        zero = lam1 == 0
        safe = np.where(zero, x.dtype.type(1), lam1)
        y = np.where(zero, np.log(t), (np.power(t, safe) - 1) / safe).astype(x.dtype)
        self.output(0, x.shape, x.dtype)[...] = y.reshape(x.shape)


should_not_do_gradient("HeatmapMaxKeypoint", "BatchBoxCox")
