"""ONNX Resize (and Upsample): separable nearest / linear / cubic interpolation of any dims.

``ONNXResize(X)`` takes ONNX's attributes as arguments and its constant inputs (``roi``, ``scales``
or ``sizes``, over ``axes``) as arguments too. Each resized axis is interpolated in turn (the
kernels are separable), in float64, and the result is cast back to X's type (integers rounded and
saturated, as onnx's reference does). Per output index ``y`` of an axis of input width ``W``,
output width ``w`` and scale ``s`` (``scales[i]``, or ``sizes[i] / W``), the source coordinate
``x`` follows ``coordinate_transformation_mode``:

- ``half_pixel``: ``(y + 0.5) / s - 0.5``; ``pytorch_half_pixel``: the same, ``-0.5`` when ``s W == 1``;
- ``half_pixel_symmetric``: the same shifted by ``W / 2 * (1 - w / (s W))``;
- ``align_corners``: ``y (W - 1) / (s W - 1)`` (0 when ``s W == 1``); ``asymmetric``: ``y / s``;
- ``tf_crop_and_resize``: ``roi`` start/end (fractions) map the crop; outside the input the output
  is ``extrapolation_value``.

The neighbours of ``x`` are weighted by the mode's kernel: ``nearest`` (``nearest_mode``
round_prefer_floor / round_prefer_ceil / floor / ceil), ``linear`` (2 taps), ``cubic`` (4 taps,
``cubic_coeff_a``); ``antialias=1`` stretches the linear/cubic kernel by ``1 / s`` when
downsampling; ``exclude_outside=1`` drops taps outside the input and renormalizes; other taps
outside repeat the edge. With ``sizes``, ``keep_aspect_ratio_policy`` not_larger / not_smaller uses
one scale (the smallest / largest) for every axis in ``axes``, output sizes rounded half up. With
``scales`` the output width is ``floor(s W)``. An axis whose scale is 1 with an unchanged width
(and a full roi) is left untouched.

No gradient: this op serves the ONNX backend (inference).
"""

from __future__ import annotations

import math

import numpy as np

from framework.errors import ShapeError
from framework.memory.allocator import check_elements
from framework.ops.gradient import no_gradient
from framework.ops.onnx.resize_kernels import COORDINATE_MODES, NEAREST_MODES, interpolate_axis
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import FLOAT, FLOATS, INT, INTS, STRING, Arg, TensorSpec

_ARGS = [
    Arg("mode", STRING, "nearest", "nearest | linear | cubic", choices=("nearest", "linear", "cubic")),
    Arg(
        "coordinate_transformation_mode",
        STRING,
        "half_pixel",
        "how output indices map to input coordinates",
        choices=COORDINATE_MODES,
    ),  # fmt: skip
    Arg("nearest_mode", STRING, "round_prefer_floor", "rounding of the nearest mode", choices=NEAREST_MODES),
    Arg("cubic_coeff_a", FLOAT, -0.75, "the cubic kernel's A"),
    Arg("exclude_outside", INT, 0, "1: taps outside the input get weight 0 (then renormalized)", choices=(0, 1)),
    Arg("extrapolation_value", FLOAT, 0.0, "tf_crop_and_resize: the value outside the input"),
    Arg("antialias", INT, 0, "1: widen linear/cubic kernels when downsampling", choices=(0, 1)),
    Arg(
        "keep_aspect_ratio_policy",
        STRING,
        "stretch",
        "with sizes: stretch | not_larger | not_smaller",
        choices=("stretch", "not_larger", "not_smaller"),
    ),  # fmt: skip
    Arg("axes", INTS, [], "the dims resized (default all), in the order of scales/sizes/roi"),
    Arg("scales", FLOATS, [], "one scale per axis (or give sizes)"),
    Arg("sizes", INTS, [], "one output size per axis (or give scales)"),
    Arg("roi", FLOATS, [], "tf_crop_and_resize: starts then ends per axis, as fractions of the input"),
]


def _plan(op_args, shape: tuple) -> tuple[list[int], list[float], list[int], list | None]:
    """(axes, per-axis scales, per-axis output sizes, per-axis roi pairs or None), or ValueError."""
    r = len(shape)
    axes = [int(a) for a in op_args.axes] or list(range(r))
    axes = [a + r if a < 0 else a for a in axes]
    if any(not 0 <= a < r for a in axes) or len(set(axes)) != len(axes):
        raise ValueError(f"axes {list(op_args.axes)} are not distinct dims of a rank-{r} input")
    scales, sizes = [float(s) for s in op_args.scales], [int(s) for s in op_args.sizes]
    if bool(scales) == bool(sizes) or len(scales or sizes) != len(axes):
        raise ValueError(f"exactly one of scales/sizes must be given, one value per axis ({len(axes)})")
    if sizes:
        if any(s < 0 for s in sizes) or any(shape[a] == 0 for a in axes):
            raise ValueError(f"sizes {sizes} must be >= 0 and the resized dims non-empty")
        scales = [sizes[i] / shape[a] for i, a in enumerate(axes)]
        policy = op_args.keep_aspect_ratio_policy
        if policy != "stretch":
            s = min(scales) if policy == "not_larger" else max(scales)
            scales = [s] * len(axes)
            sizes = [int(s * shape[a] + 0.5) for a in axes]
    else:
        if any(not s > 0 or not math.isfinite(s) for s in scales):
            raise ValueError(f"scales {scales} must be finite and > 0")
        sizes = [int(np.float64(s) * shape[a]) for s, a in zip(scales, axes)]
    roi = None
    if op_args.coordinate_transformation_mode == "tf_crop_and_resize":
        vals = [float(v) for v in op_args.roi]
        if len(vals) != 2 * len(axes):
            raise ValueError(f"tf_crop_and_resize needs roi with {2 * len(axes)} values, got {len(vals)}")
        roi = [(vals[i], vals[len(axes) + i]) for i in range(len(axes))]
    return axes, scales, sizes, roi


def _out_shape(op_args, shape: tuple) -> tuple:
    axes, _, sizes, _ = _plan(op_args, shape)
    out = list(shape)
    for a, s in zip(axes, sizes):
        out[a] = s
    return tuple(out)


def _infer(args, ins):
    x = ins[0]
    if not x.known:
        return [TensorSpec(None, x.dtype)]
    try:
        return [TensorSpec(_out_shape(args, tuple(x.shape)), x.dtype)]
    except ValueError:
        return [TensorSpec(None, x.dtype)]


@register_op(
    "ONNXResize",
    inputs=1,
    args=_ARGS,
    input_docs=[("X", "tensor of any rank (float or integer)")],
    output_docs=[("Y", "X resized, X's type")],
    input_types="numeric",
    infer=_infer,
    category="onnx",
)
class ONNXResize(Operator):
    """ONNX Resize (opsets 10-19, all modes) and Upsample: separable interpolation of the dims in
    ``axes`` to the given scales or sizes."""

    def run(self) -> None:
        x = self.input(0)
        try:
            axes, scales, sizes, roi = _plan(self.args, x.shape)
        except ValueError as e:
            raise ShapeError(f"{self.describe()}: X '{self.input_names[0]}' of shape {list(x.shape)}: {e}") from e
        shape = list(x.shape)
        for a, s in zip(axes, sizes):
            shape[a] = s
        check_elements(shape, 8, f"{self.describe()} output")
        res = x.astype(np.float64)
        for i, a in enumerate(axes):
            r = None if roi is None else roi[i]
            full_roi = r is None or (math.isclose(r[0], 0.0) and math.isclose(r[1], 1.0))
            if math.isclose(scales[i], 1.0) and sizes[i] == res.shape[a] and full_roi:
                continue
            res = interpolate_axis(res, a, scales[i], sizes[i], r, self.args)
        y = self.output(0, tuple(shape), x.dtype)
        if x.dtype.kind in "iu":  # saturating casts, as onnx's reference
            info = np.iinfo(x.dtype)
            res = np.clip(np.round(res), info.min, info.max)
        else:
            info = np.finfo(x.dtype)
            res = np.clip(res, info.min, info.max)
        y[...] = res


no_gradient("ONNXResize")
