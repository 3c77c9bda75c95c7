"""ONNXRoiAlign: ONNX's RoiAlign with mode="max" (the avg mode is Caffe2's RoIAlign, which the
backend uses for it).

ONNX's max mode (as onnxruntime and the reference implement it) is not a max of the bilinear
samples: each sample point contributes max(w1 v1, w2 v2, w3 v3, w4 v4), the largest of its four
weighted corner values, and the bin takes the largest contribution. Sample points outside
[-1, H] x [-1, W] contribute 0. Sampling grid, half_pixel offsets and the 1 x 1 minimum RoI size
of output_half_pixel are those of the avg mode.
"""

from __future__ import annotations

import numpy as np

from framework.errors import ShapeError
from framework.memory.allocator import check_elements
from framework.ops.gradient import no_gradient
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import FLOAT, INT, STRING, Arg, TensorSpec
from framework.ops.validation import check_indices


def _axis_samples(start: float, bin_size: float, pooled: int, grid: int, size: int) -> tuple:
    """Per sample along one axis (pooled * grid of them): low/high indices, low/high weights, validity."""
    k = np.arange(pooled * grid)
    pos = start + (k // grid) * bin_size + ((k % grid) + 0.5) * bin_size / grid
    valid = (pos >= -1.0) & (pos <= size)
    pos = np.maximum(pos, 0.0)
    low = np.minimum(pos.astype(np.int64), size - 1)
    clamp = low >= size - 1
    high = np.where(clamp, low, low + 1)
    pos = np.where(clamp, low, pos)
    frac = pos - low
    return low, high, 1.0 - frac, frac, valid


def _infer(args, ins):
    x, rois = ins[0], ins[1] if len(ins) > 1 else None
    if x.shape is None or rois is None or rois.shape is None or len(x.shape) != 4:
        return [TensorSpec(None, x.dtype)]
    return [TensorSpec((rois.shape[0], x.shape[1], args.output_height, args.output_width), x.dtype)]


@register_op(
    "ONNXRoiAlign",
    inputs=3,
    input_docs=[
        ("X", "float [N, C, H, W]"),
        ("rois", "float [num_rois, 4]: x1, y1, x2, y2 in image coordinates"),
        ("batch_indices", "int [num_rois]: the image of each RoI"),
    ],
    output_docs=[("Y", "[num_rois, C, output_height, output_width]")],
    args=[
        Arg("mode", STRING, "max", "max (avg: use Caffe2's RoIAlign)", choices=("max", "avg")),
        Arg(
            "coordinate_transformation_mode",
            STRING,
            "half_pixel",
            "half_pixel (shift -0.5) or output_half_pixel",
            choices=("half_pixel", "output_half_pixel"),
        ),  # fmt: skip
        Arg("output_height", INT, 1, "pooled height", low=1),
        Arg("output_width", INT, 1, "pooled width", low=1),
        Arg("sampling_ratio", INT, 0, "samples per bin side (0: ceil(roi size / pooled size))", low=0),
        Arg("spatial_scale", FLOAT, 1.0, "scale from image to feature-map coordinates"),
    ],
    infer=_infer,
    input_types={0: "float", 1: "float", 2: "index"},
    ranks={0: 4, 1: 2, 2: 1},
    same_type=[(0, 1)],
    category="detection",
)
class ONNXRoiAlign(Operator):
    """RoI align with ONNX's semantics, both pooling modes: avg is the mean of the bilinear
    samples of each bin, max the largest weighted corner value over the bin's samples (see the
    module doc). half_pixel shifts RoI coordinates by -0.5; output_half_pixel does not and makes
    every RoI at least 1 x 1."""

    def run(self) -> None:
        x, rois, bidx = self.input(0), self.input(1), self.input(2)
        a = self.args
        n, c, h, w = x.shape
        if rois.shape[1] != 4 or bidx.shape[0] != rois.shape[0]:
            raise ShapeError(
                f"{self.describe()}: rois '{self.input_names[1]}' {list(rois.shape)} and batch_indices "
                f"'{self.input_names[2]}' {list(bidx.shape)} must be [R, 4] and [R]"
            )
        check_indices(self, 2, bidx, n, "batch index")
        ph, pw = a.output_height, a.output_width
        check_elements((rois.shape[0], c, ph, pw), x.dtype.itemsize, f"{self.describe()} output")
        half = a.coordinate_transformation_mode == "half_pixel"
        off = 0.5 if half else 0.0
        out = np.zeros((rois.shape[0], c, ph, pw), np.float64)
        for r in range(rois.shape[0]):
            x1, y1, x2, y2 = (float(v) * a.spatial_scale - off for v in rois[r])
            rw, rh = x2 - x1, y2 - y1
            if not half:
                rw, rh = max(rw, 1.0), max(rh, 1.0)
            gh = a.sampling_ratio or int(np.ceil(rh / ph))
            gw = a.sampling_ratio or int(np.ceil(rw / pw))
            if gh <= 0 or gw <= 0:  # an empty RoI: no samples
                continue
            check_elements((c, ph * gh, pw * gw), 8, f"{self.describe()} samples")
            yl, yh, wyl, wyh, vy = _axis_samples(y1, rh / ph, ph, gh, h)
            xl, xh, wxl, wxh, vx = _axis_samples(x1, rw / pw, pw, gw, w)
            img = x[int(bidx[r])].astype(np.float64)
            valid = (vy[:, None] & vx[None, :]).astype(np.float64)
            corners = [
                (img[:, yl][:, :, xl], wyl[:, None] * wxl[None, :]),
                (img[:, yl][:, :, xh], wyl[:, None] * wxh[None, :]),
                (img[:, yh][:, :, xl], wyh[:, None] * wxl[None, :]),
                (img[:, yh][:, :, xh], wyh[:, None] * wxh[None, :]),
            ]
            if a.mode == "max":
                s = np.max(np.stack([v * (wt * valid) for v, wt in corners]), axis=0)
                out[r] = s.reshape(c, ph, gh, pw, gw).max(axis=(2, 4))
            else:
                s = sum(v * (wt * valid) for v, wt in corners)
                out[r] = s.reshape(c, ph, gh, pw, gw).sum(axis=(2, 4)) / max(gh * gw, 1)
        self.output(0, out.shape, x.dtype)[...] = out


no_gradient("ONNXRoiAlign")
