"""RoIAlign (Mask R-CNN's bilinear RoI pooling, NCHW or NHWC, `aligned` half-pixel offset) with
its gradient op RoIAlignGradient(X, rois, dY), and RoIAlignRotated.

Upright RoIAlign is separable: each pooled row is a fixed combination of input rows (the
bilinear weights of its sampling points, averaged) and likewise for columns, so one RoI's
output is Ay @ X[c] @ Ax^T, and its gradient Ay^T @ dY[c] @ Ax. The weights follow Caffe2's
``bilinear_interpolate``: a sample beyond [-1, H] x [-1, W] counts as zero, others are clamped.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from framework.errors import ShapeError
from framework.memory.allocator import check_elements
from framework.ops.detection.common import batch_indices, check_order, check_positive, float_input, roi_table
from framework.ops.gradient import gradient, should_not_do_gradient
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import BOOL, FLOAT, INT, STRING, Arg, TensorSpec

ARGS = [
    Arg("order", STRING, "NCHW", "layout of X: NCHW or NHWC"),
    Arg("spatial_scale", FLOAT, 1.0, "scale of X relative to the image the RoIs are in (e.g. 1/16)"),
    Arg("pooled_h", INT, 1, "output height"),
    Arg("pooled_w", INT, 1, "output width"),
    Arg("sampling_ratio", INT, -1, "sampling points per bin side; <= 0: ceil(roi size / pooled size)"),
    Arg("aligned", BOOL, False, "shift RoI coordinates by -0.5 pixel (continuous coordinates, no 1x1 minimum)"),
]


_MAX_SAMPLES = 1 << 16  # sampling points per RoI side: a bound on memory for absurd RoIs


def _taps(y: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(low, high, weight of high) of the bilinear taps at sampling positions ``y`` (float64, already clamped
    below at 0) along an axis of ``size`` cells: a position at or past the last cell takes that cell alone."""
    low = np.floor(y).astype(np.int64)
    top = low >= size - 1
    low = np.where(top, size - 1, low)
    high = np.where(top, size - 1, low + 1)
    y = np.where(top, low.astype(np.float64), y)
    return low, high, y - low


def _interp_1d(start: float, bin_size: float, pooled: int, grid: int, size: int) -> np.ndarray:
    """(pooled x size) summed bilinear weights of the grid sampling points of each bin (1-D)."""
    m = np.zeros((pooled, size), np.float64)
    if size == 0 or grid <= 0:
        return m
    p = np.arange(pooled)[:, None]
    g = np.arange(grid)[None, :]
    y = (start + p * bin_size + (g + 0.5) * bin_size / grid).astype(np.float32).astype(np.float64)
    valid = (y >= -1.0) & (y <= size)
    low, high, ly = _taps(np.maximum(y, 0.0), size)
    rows = np.broadcast_to(p, y.shape)
    np.add.at(m, (rows[valid], low[valid]), (1.0 - ly)[valid])
    np.add.at(m, (rows[valid], high[valid]), ly[valid])
    return m


def _interp_rois(start, bin_size, pooled: int, grid, size: int) -> np.ndarray:
    """``_interp_1d(...) / max(grid, 1)`` of every RoI at once: (R, pooled, size). The same float operations
    element by element, and each RoI's weights summed in ``_interp_1d``'s order (its lows, then its highs), so
    the values are identical."""
    r = len(start)
    m = np.zeros(r * pooled * size, np.float64)
    gmax = int(grid.max()) if r else 0
    if size == 0 or gmax <= 0:
        return m.reshape(r, pooled, size)
    k = np.arange(r)[:, None, None]
    p = np.arange(pooled)[None, :, None]
    g = np.arange(gmax)[None, None, :]
    grid3 = grid[:, None, None]
    bins = bin_size[:, None, None]
    y = (start[:, None, None] + p * bins + (g + 0.5) * bins / np.maximum(grid3, 1)).astype(np.float32)
    y = y.astype(np.float64)
    valid = (y >= -1.0) & (y <= size) & (g < grid3)
    low, high, ly = _taps(np.maximum(y, 0.0), size)
    base = (k * pooled + p) * size
    idx = np.concatenate([(base + low)[valid], (base + high)[valid]])
    wts = np.concatenate([(1.0 - ly)[valid], ly[valid]])
    m += np.bincount(idx, wts, minlength=m.size)  # a bin is one RoI's: its lows, then its highs, in order
    return m.reshape(r, pooled, size) / np.maximum(grid, 1)[:, None, None]


def _roi_geometry(op: Operator, roi: np.ndarray, rotated: bool) -> tuple:
    """(start_or_centre_h, start_or_centre_w, roi_h, roi_w, grid_h, grid_w) of one RoI's box part."""
    a = op.args
    scale = np.float32(a.spatial_scale)
    off = np.float32(0.5 if a.aligned else 0.0)
    r = roi.astype(np.float32)
    if rotated:
        y0, x0 = r[1] * scale - off, r[0] * scale - off
        w, h = r[2] * scale, r[3] * scale
    else:
        x0, y0 = r[0] * scale - off, r[1] * scale - off
        w, h = r[2] * scale - off - x0, r[3] * scale - off - y0
    if a.aligned:
        if w < 0 or h < 0:
            raise ShapeError(f"{op.describe()}: an RoI has negative size ({roi.tolist()}) with aligned=1")
    else:
        w, h = max(w, np.float32(1.0)), max(h, np.float32(1.0))
    ph, pw = a.pooled_h, a.pooled_w
    gh = a.sampling_ratio if a.sampling_ratio > 0 else int(math.ceil(h / ph))
    gw = a.sampling_ratio if a.sampling_ratio > 0 else int(math.ceil(w / pw))
    if gh * ph > _MAX_SAMPLES or gw * pw > _MAX_SAMPLES:
        raise ShapeError(f"{op.describe()}: an RoI ({roi.tolist()}) needs more than {_MAX_SAMPLES} samples per side")
    return float(y0), float(x0), float(h), float(w), gh, gw


def _out_shape(args: Any, r: int, c: int) -> tuple:
    if args.order == "NCHW":
        return (r, c, args.pooled_h, args.pooled_w)
    return (r, args.pooled_h, args.pooled_w, c)


def _infer(args: Any, ins: list[TensorSpec]) -> list[TensorSpec]:
    x, rois = ins[0], ins[1]
    if x.shape is None or rois.shape is None or len(x.shape) != 4 or not rois.shape:
        return [TensorSpec(None, x.dtype)]
    c = x.shape[1] if args.order == "NCHW" else x.shape[3]
    r = rois.shape[0] if len(rois.shape) == 2 else 0
    return [TensorSpec(_out_shape(args, r, c), x.dtype)]


class _RoIAlignBase(Operator):
    rotated = False

    def setup(self) -> None:
        check_order(self)
        check_positive(self, "pooled_h", "pooled_w", "spatial_scale")

    def _prepare(self) -> tuple:
        x = float_input(self, 0, 4)
        cols = (5, 6) if self.rotated else (4, 5)
        rois = roi_table(self, 1, cols)
        nchw = self.args.order == "NCHW"
        n, c = x.shape[0], (x.shape[1] if nchw else x.shape[3])
        bidx = batch_indices(self, 1, rois, rois.shape[1] == cols[1], n)
        xc = x if nchw else x.transpose(0, 3, 1, 2)  # a view: N, C, H, W
        if rois.shape[0] and (n == 0 or xc.shape[2] == 0 or xc.shape[3] == 0):
            raise ShapeError(
                f"{self.describe()}: X ('{self.input_names[0]}') of shape {list(x.shape)} has no image or an empty "
                f"spatial size, for {rois.shape[0]} RoIs"
            )
        a = self.args  # the float64 accumulator of the output, before it is allocated
        check_elements((rois.shape[0], c, a.pooled_h, a.pooled_w), 8, f"{self.describe()}: the pooled output")
        return xc, rois, bidx, c


@register_op(
    "RoIAlign",
    inputs=2,
    args=ARGS,
    input_docs=[
        ("X", "4-D feature map, NCHW or NHWC"),
        ("RoIs", "R x 5 [batch index, x1, y1, x2, y2] or R x 4 (image 0), in image coordinates"),
    ],
    output_docs=[("Y", "R x C x pooled_h x pooled_w (NCHW) or R x pooled_h x pooled_w x C (NHWC)")],
    infer=_infer,
    category="detection",
)
class RoIAlign(_RoIAlignBase):
    """Region of Interest align (Mask R-CNN): each output bin averages bilinear samples of X on
    a regular grid inside the bin (sampling_ratio x sampling_ratio, or adaptive). Without
    `aligned`, RoIs are at least 1 x 1; with it, coordinates shift by half a pixel and a
    negative-size RoI is an error; a zero-size one (aligned) has no samples and gives 0 (Caffe2:
    0 / 0; torchvision: 0). No RoIs give an empty output."""

    def run(self) -> None:
        xc, rois, bidx, c = self._prepare()
        a = self.args
        out = np.zeros((rois.shape[0], c, a.pooled_h, a.pooled_w), np.float64)
        box = rois[:, -4:]
        geo = [_roi_geometry(self, box[k], False) for k in range(rois.shape[0])]
        y0, x0, h, w, gh, gw = (np.array([g[i] for g in geo]).reshape(-1) for i in range(6))
        ays = _interp_rois(y0, h / a.pooled_h, a.pooled_h, gh.astype(np.int64), xc.shape[2])
        axs = _interp_rois(x0, w / a.pooled_w, a.pooled_w, gw.astype(np.int64), xc.shape[3])
        for k in range(rois.shape[0]):
            ay, ax = ays[k], axs[k]
            rows, cols = np.flatnonzero(ay.any(axis=0)), np.flatnonzero(ax.any(axis=0))
            if rows.size and cols.size:  # only the window the samples touch (Caffe2 reads no other pixel)
                hs, ws = slice(rows[0], rows[-1] + 1), slice(cols[0], cols[-1] + 1)
                out[k] = ay[:, hs] @ (xc[bidx[k], :, hs, ws] @ ax[:, ws].T)
        y = self.output(0, _out_shape(a, rois.shape[0], c), xc.dtype)
        y[...] = out if a.order == "NCHW" else out.transpose(0, 2, 3, 1)


@register_op(
    "RoIAlignGradient",
    inputs=3,
    args=ARGS,
    input_docs=[("X", "forward feature map"), ("RoIs", "forward RoIs"), ("dY", "gradient of Y")],
    output_docs=[("dX", "gradient of X")],
    infer=lambda args, ins: [ins[0]],
    category="detection",
    private=True,
)
class RoIAlignGradient(_RoIAlignBase):
    """dX: each bin's gradient spread back onto X with the forward bilinear weights."""

    def run(self) -> None:
        xc, rois, bidx, c = self._prepare()
        a = self.args
        dy = float_input(self, 2)
        want = _out_shape(a, rois.shape[0], c)
        if dy.shape != want:
            raise ShapeError(
                f"{self.describe()}: dY ('{self.input_names[2]}') has shape {list(dy.shape)}, expected {list(want)}"
            )
        dyc = dy if a.order == "NCHW" else dy.transpose(0, 3, 1, 2)
        dx = np.zeros(xc.shape, np.float64)
        box = rois[:, -4:]
        for k in range(rois.shape[0]):
            y0, x0, h, w, gh, gw = _roi_geometry(self, box[k], False)
            ay = _interp_1d(y0, h / a.pooled_h, a.pooled_h, gh, xc.shape[2]) / max(gh, 1)
            ax = _interp_1d(x0, w / a.pooled_w, a.pooled_w, gw, xc.shape[3]) / max(gw, 1)
            dx[bidx[k]] += np.einsum("ph,cpq,qw->chw", ay, dyc[k], ax, optimize=True)
        out = self.output(0, self.input(0).shape, self.input(0).dtype)
        out[...] = dx if a.order == "NCHW" else dx.transpose(0, 2, 3, 1)


@gradient("RoIAlign")
def _roi_align_grad(g):
    return [g.op("RoIAlignGradient", [g.I(0), g.I(1), g.GO(0)], [g.GI(0)])]


@register_op(
    "RoIAlignRotated",
    inputs=2,
    args=ARGS,
    input_docs=[
        ("X", "4-D feature map, NCHW or NHWC"),
        ("RoIs", "R x 6 [batch index, ctr_x, ctr_y, w, h, angle in degrees (counter-clockwise)] or R x 5"),
    ],
    output_docs=[("Y", "R x C x pooled_h x pooled_w (NCHW) or R x pooled_h x pooled_w x C (NHWC)")],
    infer=_infer,
    category="detection",
)
class RoIAlignRotated(_RoIAlignBase):
    """RoIAlign over rotated RoIs: the sampling grid is built around the RoI centre and rotated
    by its angle before bilinear sampling. No gradient on the CPU (as Caffe2)."""

    rotated = True

    def run(self) -> None:
        xc, rois, bidx, c = self._prepare()
        a = self.args
        ph, pw = a.pooled_h, a.pooled_w
        hgt, wid = xc.shape[2], xc.shape[3]
        out = np.zeros((rois.shape[0], c, ph, pw), np.float64)
        for k in range(rois.shape[0]):
            roi = rois[k, -5:]
            cy, cx, h, w, gh, gw = _roi_geometry(self, roi, True)
            theta = float(np.float32(roi[4])) * math.pi / 180.0
            bh, bw = h / ph, w / pw
            yy = (
                -h / 2.0
                + np.arange(ph)[:, None, None, None] * bh
                + (np.arange(gh)[None, None, :, None] + 0.5) * bh / gh
            )
            xx = (
                -w / 2.0
                + np.arange(pw)[None, :, None, None] * bw
                + (np.arange(gw)[None, None, None, :] + 0.5) * bw / gw
            )
            x = xx * math.cos(theta) + yy * math.sin(theta) + cx
            y = yy * math.cos(theta) - xx * math.sin(theta) + cy
            vals = _bilinear(xc[bidx[k]], y, x, hgt, wid)  # C, ph, pw, gh, gw
            out[k] = vals.sum(axis=(3, 4)) / max(gh * gw, 1)
        yv = self.output(0, _out_shape(a, rois.shape[0], c), xc.dtype)
        yv[...] = out if a.order == "NCHW" else out.transpose(0, 2, 3, 1)


def _bilinear(img: np.ndarray, y: np.ndarray, x: np.ndarray, hgt: int, wid: int) -> np.ndarray:
    """Caffe2's bilinear_interpolate of img (C x H x W) at points (y, x), any point shape."""
    y, x = np.broadcast_arrays(y, x)
    valid = (y >= -1.0) & (y <= hgt) & (x >= -1.0) & (x <= wid)
    y, x = np.maximum(y, 0.0), np.maximum(x, 0.0)
    yl, xl = np.floor(y).astype(np.int64), np.floor(x).astype(np.int64)
    ytop, xtop = yl >= hgt - 1, xl >= wid - 1
    yl, xl = np.where(ytop, hgt - 1, yl), np.where(xtop, wid - 1, xl)
    yh, xh = np.where(ytop, hgt - 1, yl + 1), np.where(xtop, wid - 1, xl + 1)
    y, x = np.where(ytop, yl, y), np.where(xtop, xl, x)
    ly, lx = y - yl, x - xl
    hy, hx = 1.0 - ly, 1.0 - lx
    v = (
        img[:, yl, xl] * (hy * hx)
        + img[:, yl, xh] * (hy * lx)
        + img[:, yh, xl] * (ly * hx)
        + img[:, yh, xh] * (ly * lx)
    )
    return v * valid


should_not_do_gradient("RoIAlignRotated")
