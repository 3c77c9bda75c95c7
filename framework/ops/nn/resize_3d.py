"""ResizeNearest3D (+ResizeNearest3DGradient): nearest-neighbour resizing of N x C x T x H x W
volumes by temporal, height and width scales."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from framework.errors import ShapeError
from framework.ops.gradient import gradient
from framework.ops.operator import Operator
from framework.ops.pointwise import float_input
from framework.ops.registry import register_op
from framework.ops.schema import FLOAT, STRING, Arg, TensorSpec
from framework.ops.validation import expect_rank

_ARGS = [
    Arg("temporal_scale", FLOAT, 1.0, "scale of T"),
    Arg("height_scale", FLOAT, 1.0, "scale of H"),
    Arg("width_scale", FLOAT, 1.0, "scale of W"),
    Arg("order", STRING, "NCHW", "only NCHW (N x C x T x H x W), as Caffe2"),
]


def _scales(args: Any) -> tuple:
    return (args.temporal_scale, args.height_scale, args.width_scale)


def _out(args: Any, shape: tuple) -> tuple:
    return tuple(shape[:2]) + tuple(int(np.float32(s) * np.float32(k)) for s, k in zip(shape[2:], _scales(args)))


def _src(n_out: int, n_in: int, scale: float) -> np.ndarray:
    """Source index of each output position: min(int(out / scale), in - 1)."""
    return np.minimum((np.arange(n_out) / np.float32(scale)).astype(np.int64), n_in - 1)


class _Resize3D(Operator):
    def setup(self) -> None:
        if self.args.order != "NCHW":
            raise self.arg_error(f"only order NCHW is supported, got {self.args.order!r}")
        if not all(k > 0 and math.isfinite(k) for k in _scales(self.args)):  # NaN and inf too
            raise self.arg_error(f"scales must be positive and finite, got {_scales(self.args)}")


@register_op(
    "ResizeNearest3D",
    args=_ARGS,
    input_docs=[("X", "N x C x T x H x W")],
    output_docs=[("Y", "N x C x int(T * temporal_scale) x int(H * height_scale) x int(W * width_scale)")],
    infer=lambda args, ins: [
        TensorSpec(None if ins[0].shape is None or len(ins[0].shape) != 5 else _out(args, ins[0].shape), ins[0].dtype)
    ],
    category="image",
)
class ResizeNearest3D(_Resize3D):
    """Y[.., t, y, x] = X[.., min(int(t / ts), T - 1), min(int(y / hs), H - 1), min(int(x / ws), W - 1)].
    Caffe2's CPU kernel only runs height_scale = width_scale = 2 with temporal_scale 1 or 2;
    any positive scales work here (the same rule as its gradient)."""

    def run(self) -> None:
        x = float_input(self, 0)
        expect_rank(self, 0, x, 5, "5-D")
        out = _out(self.args, x.shape)
        if x.size == 0 and any(out[2:]):
            raise ShapeError(f"{self.describe()}: X ('{self.input_names[0]}') is empty")
        idx = [_src(o, i, s) for o, i, s in zip(out[2:], x.shape[2:], _scales(self.args))]
        self.output(0, out, x.dtype)[...] = x[:, :, idx[0]][:, :, :, idx[1]][:, :, :, :, idx[2]]


@register_op(
    "ResizeNearest3DGradient",
    inputs=2,
    args=_ARGS,
    input_docs=[("dY", "gradient of Y"), ("X", "forward input")],
    output_docs=[("dX", "each dY element added to its source element")],
    infer=lambda args, ins: [TensorSpec(ins[1].shape, ins[0].dtype)],
    category="image",
    private=True,
)
class ResizeNearest3DGradient(_Resize3D):
    """dX[src(t), src(y), src(x)] += dY[t, y, x]."""

    def run(self) -> None:
        dy, x = float_input(self, 0), self.input(1)
        if dy.ndim != 5 or x.ndim != 5 or dy.shape[:2] != x.shape[:2]:
            raise ShapeError(
                f"{self.describe()}: dY {list(dy.shape)} and X {list(x.shape)} must be 5-D with equal N, C"
            )
        dx = np.zeros(x.shape, np.float64)
        if x.size:
            idx = [_src(o, i, s) for o, i, s in zip(dy.shape[2:], x.shape[2:], _scales(self.args))]
            tt, yy, xx = np.meshgrid(*idx, indexing="ij")
            np.add.at(dx, (slice(None), slice(None), tt, yy, xx), dy)
        self.output(0, x.shape, dy.dtype)[...] = dx


@gradient("ResizeNearest3D")
def _resize_nearest_3d_grad(g):
    return [g.op("ResizeNearest3DGradient", [g.GO(0), g.I(0)], [g.GI(0)])]
