"""RoIPool (Fast R-CNN max pooling over quantized RoI bins, NCHW) with its argmax output and the
gradient op RoIPoolGradient(X, rois, argmaxes, dY)."""

from __future__ import annotations

from typing import Any

import numpy as np

from framework.errors import ShapeError, TypeMismatchError
from framework.memory.allocator import check_elements
from framework.ops.detection.common import batch_indices, check_positive, float_input, roi_table
from framework.ops.gradient import gradient
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import BOOL, FLOAT, INT, STRING, Arg, TensorSpec

_FLT_MAX = np.float32(np.finfo(np.float32).max)

ARGS = [
    Arg("is_test", BOOL, False, "1: one output (Y); 0: also the argmaxes the gradient needs"),
    Arg("order", STRING, "NCHW", "layout of X: only NCHW (as Caffe2's CPU kernel)"),
    Arg("pooled_h", INT, 1, "output height"),
    Arg("pooled_w", INT, 1, "output width"),
    Arg("spatial_scale", FLOAT, 1.0, "scale of X relative to the image the RoIs are in (e.g. 1/16)"),
]


def _c_round(v: np.float32) -> int:
    """C's round(): halves away from zero."""
    return int(np.sign(v) * np.floor(np.abs(v) + np.float32(0.5)))


def _bins(op: Operator, roi: np.ndarray, height: int, width: int) -> tuple[list, list]:
    """Clipped [start, end) of each pooled row and column of one RoI [b, x1, y1, x2, y2]."""
    a = op.args
    s = np.float32(a.spatial_scale)
    r = roi.astype(np.float32)
    x1, y1, x2, y2 = (_c_round(r[k] * s) for k in (1, 2, 3, 4))
    rh, rw = max(y2 - y1 + 1, 1), max(x2 - x1 + 1, 1)
    bh, bw = np.float32(rh) / np.float32(a.pooled_h), np.float32(rw) / np.float32(a.pooled_w)

    def edges(n: int, b: np.float32, off: int, size: int) -> list:
        out = []
        for p in range(n):
            lo = int(np.floor(np.float32(p) * b)) + off
            hi = int(np.ceil(np.float32(p + 1) * b)) + off
            out.append((min(max(lo, 0), size), min(max(hi, 0), size)))
        return out

    return edges(a.pooled_h, bh, y1, height), edges(a.pooled_w, bw, x1, width)


def _infer(args: Any, ins: list[TensorSpec]) -> list[TensorSpec]:
    x, r = ins[0], ins[1]
    n_out = args.num_outputs
    if x.shape is None or r.shape is None or len(x.shape) != 4 or len(r.shape) != 2:
        return [TensorSpec(None, x.dtype), TensorSpec(None, np.dtype(np.int32))][:n_out]
    y = (r.shape[0], x.shape[1], args.pooled_h, args.pooled_w)
    return [TensorSpec(y, x.dtype), TensorSpec(y, np.dtype(np.int32))][:n_out]


@register_op(
    "RoIPool",
    inputs=2,
    outputs=(1, 2),
    args=ARGS,
    input_docs=[("X", "N x C x H x W feature map"), ("rois", "R x 5 [batch index, x1, y1, x2, y2]")],
    output_docs=[
        ("Y", "R x C x pooled_h x pooled_w maxima"),
        ("argmaxes", "int32, same shape: index h * W + w of each maximum in its channel plane, -1 for empty bins"),
    ],
    infer=_infer,
    category="detection",
)
class RoIPool(Operator):
    """RoI max pooling (Fast R-CNN): RoI corners are scaled and rounded (halves away from zero),
    the RoI (at least 1 x 1) is split into pooled_h x pooled_w bins of floor/ceil edges clipped
    to X, and each bin takes its maximum (the first one in row-major order on ties). An empty
    bin gives 0 and argmax -1. With is_test=0 the argmaxes output is required."""

    def setup(self) -> None:
        check_positive(self, "pooled_h", "pooled_w", "spatial_scale")
        if self.args.order != "NCHW":
            raise self.arg_error(f"argument 'order' must be NCHW (Caffe2's CPU RoIPool), got {self.args.order!r}")
        if not self.args.is_test and len(self.outputs) < 2:
            raise self.arg_error("is_test=0 needs the second output (argmaxes)")

    def run(self) -> None:
        x = float_input(self, 0, 4)
        rois = roi_table(self, 1, (5,))
        bidx = batch_indices(self, 1, rois, True, x.shape[0])
        n_r, c, hgt, wid = rois.shape[0], x.shape[1], x.shape[2], x.shape[3]
        a = self.args
        check_elements((n_r, c, a.pooled_h, a.pooled_w), max(x.dtype.itemsize, 4), f"{self.describe()}: the output")
        y = np.zeros((n_r, c, a.pooled_h, a.pooled_w), x.dtype)
        am = np.full(y.shape, -1, np.int32)
        for k in range(n_r):
            rows, cols = _bins(self, rois[k], hgt, wid)
            img = x[bidx[k]]
            for ph, (h0, h1) in enumerate(rows):
                for pw, (w0, w1) in enumerate(cols):
                    if h1 <= h0 or w1 <= w0:
                        continue
                    region = img[:, h0:h1, w0:w1].reshape(c, -1)
                    cand = np.where(np.isnan(region), -np.inf, region)
                    j = np.argmax(cand, axis=1)
                    best = cand[np.arange(c), j]
                    beats = best > -_FLT_MAX
                    y[k, :, ph, pw] = np.where(beats, best, -_FLT_MAX)
                    bw = w1 - w0
                    am[k, :, ph, pw] = np.where(beats, (h0 + j // bw) * wid + (w0 + j % bw), -1)
        self.output(0, y.shape, x.dtype)[...] = y
        if len(self.outputs) > 1:
            self.output(1, y.shape, np.dtype(np.int32))[...] = am


@register_op(
    "RoIPoolGradient",
    inputs=4,
    args=ARGS,
    input_docs=[
        ("X", "forward input"),
        ("rois", "forward RoIs"),
        ("argmaxes", "forward argmaxes"),
        ("dY", "gradient of Y"),
    ],
    output_docs=[("dX", "gradient of X")],
    infer=lambda args, ins: [ins[0]],
    category="detection",
    private=True,
)
class RoIPoolGradient(Operator):
    """dX: each bin's gradient added at its argmax (nothing for empty bins). Caffe2 has this op
    only on CUDA; this is the same computation on the CPU."""

    def run(self) -> None:
        x = float_input(self, 0, 4)
        rois = roi_table(self, 1, (5,))
        am, dy = self.input(2), float_input(self, 3)
        want = (rois.shape[0], x.shape[1], self.args.pooled_h, self.args.pooled_w)
        if am.dtype.kind not in "iu":
            raise TypeMismatchError(
                f"{self.describe()}: argmaxes ('{self.input_names[2]}') must be integers, got {am.dtype}"
            )
        for i, arr in ((2, am), (3, dy)):
            if arr.shape != want:
                raise ShapeError(
                    f"{self.describe()}: input {i} ('{self.input_names[i]}') has shape {list(arr.shape)}, "
                    f"expected {list(want)}"
                )
        plane = x.shape[2] * x.shape[3]
        if am.size and (am.min() < -1 or am.max() >= plane):
            raise ShapeError(f"{self.describe()}: argmaxes ('{self.input_names[2]}') outside [-1, {plane})")
        bidx = batch_indices(self, 1, rois, True, x.shape[0])
        dx = np.zeros((x.shape[0], x.shape[1], plane), np.float64)
        r, ch, _, _ = np.nonzero(am >= 0)
        np.add.at(dx, (bidx[r], ch, am[am >= 0]), dy[am >= 0])
        self.output(0, x.shape, x.dtype)[...] = dx.reshape(x.shape)


@gradient("RoIPool")
def _roi_pool_grad(g):
    return [g.op("RoIPoolGradient", [g.I(0), g.I(1), g.O(1), g.GO(0)], [g.GI(0)])]
