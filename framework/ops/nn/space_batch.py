"""Spatial rearrangements: SpaceToBatch / BatchToSpace (block_size x block_size spatial blocks
moved to and from the batch, with Caffe2's padding) and IntegralImage (+IntegralImageGradient)."""

from __future__ import annotations

from typing import Any

import numpy as np

from framework.errors import ShapeError
from framework.memory.allocator import check_elements
from framework.ops.gradient import gradient
from framework.ops.operator import Operator
from framework.ops.pointwise import float_input
from framework.ops.registry import register_op
from framework.ops.schema import INT, STRING, Arg, TensorSpec
from framework.ops.validation import expect_rank

_ARGS = [
    Arg("pad", INT, 0, "padding of the left, right and bottom sides (and the top, unless pad_t)"),
    Arg("pad_t", INT, None, "padding of the top (default: pad)"),
    Arg("block_size", INT, 2, "the block side"),
    Arg("order", STRING, "NCHW", "only NCHW (as Caffe2)"),
]


def _pads(args: Any) -> tuple[int, int, int, int]:
    """(top, left, bottom, right): Caffe2 reads `pad` for all but the top (`pad_t`)."""
    p = args.pad
    return (p if args.pad_t is None else args.pad_t), p, p, p


def _s2b_shape(args: Any, shape: tuple) -> tuple:
    t, left, b, r = _pads(args)
    bs = args.block_size
    return (shape[0] * bs * bs, shape[1], (shape[2] + t + b) // bs, (shape[3] + left + r) // bs)


def _b2s_shape(args: Any, shape: tuple) -> tuple:
    t, left, b, r = _pads(args)
    bs = args.block_size
    return (shape[0] // (bs * bs), shape[1], shape[2] * bs - t - b, shape[3] * bs - left - r)


def _infer(fn):
    def infer(args: Any, ins: list) -> list:
        x = ins[0]
        if x.shape is None or len(x.shape) != 4:
            return [TensorSpec(None, x.dtype)]
        return [TensorSpec(fn(args, tuple(x.shape)), x.dtype)]

    return infer


class _SpaceBatch(Operator):
    def setup(self) -> None:
        if self.args.order != "NCHW":
            raise self.arg_error(f"only order NCHW is supported (as Caffe2), got {self.args.order!r}")
        if self.args.block_size < 1 or self.args.pad < 0 or (self.args.pad_t or 0) < 0:
            raise self.arg_error("block_size must be >= 1 and pads >= 0")

    def _x(self) -> np.ndarray:
        x = float_input(self, 0)
        expect_rank(self, 0, x, 4, "N x C x H x W")
        return x


@register_op(
    "SpaceToBatch",
    args=_ARGS,
    input_docs=[("X", "N x C x H x W")],
    output_docs=[("Y", "(N * b * b) x C x (H + pads) / b x (W + pads) / b")],
    infer=_infer(_s2b_shape),
    category="image",
)
class SpaceToBatch(_SpaceBatch):
    """Zero-pads X, then moves each of the b x b offsets inside the spatial blocks to its own
    batch slice: Y[(oh * b + ow) * N + n, c, i, j] = padded[n, c, i * b + oh, j * b + ow]."""

    def run(self) -> None:
        x = self._x()
        t, left, b, r = _pads(self.args)
        bs = self.args.block_size
        n, c, h, w = x.shape
        if (h + t + b) % bs or (w + left + r) % bs:
            raise ShapeError(
                f"{self.describe()}: padded size {h + t + b} x {w + left + r} is not a multiple of block_size {bs}"
            )
        check_elements((n, c, h + t + b, w + left + r), x.dtype.itemsize, f"{self.describe()}: the padded input")
        p = np.zeros((n, c, h + t + b, w + left + r), x.dtype)
        p[:, :, t : t + h, left : left + w] = x
        hh, ww = p.shape[2] // bs, p.shape[3] // bs
        y = p.reshape(n, c, hh, bs, ww, bs).transpose(3, 5, 0, 1, 2, 4).reshape(bs * bs * n, c, hh, ww)
        self.output(0, y.shape, x.dtype)[...] = y


@register_op(
    "BatchToSpace",
    args=_ARGS,
    input_docs=[("X", "(N * b * b) x C x H x W")],
    output_docs=[("Y", "N x C x (H * b - pads) x (W * b - pads)")],
    infer=_infer(_b2s_shape),
    category="image",
)
class BatchToSpace(_SpaceBatch):
    """The inverse of SpaceToBatch: batch slices back to spatial offsets, padding cropped."""

    def run(self) -> None:
        x = self._x()
        t, left, b, r = _pads(self.args)
        bs = self.args.block_size
        nb, c, h, w = x.shape
        if nb % (bs * bs) or h * bs - t - b < 0 or w * bs - left - r < 0:
            raise ShapeError(f"{self.describe()}: X {list(x.shape)} does not fit block_size {bs} and the pads")
        n = nb // (bs * bs)
        p = x.reshape(bs, bs, n, c, h, w).transpose(2, 3, 4, 0, 5, 1).reshape(n, c, h * bs, w * bs)
        y = p[:, :, t : t + h * bs - t - b, left : left + w * bs - left - r]
        self.output(0, y.shape, x.dtype)[...] = y


@gradient("SpaceToBatch")
def _space_to_batch_grad(g):
    return [g.op("BatchToSpace", [g.GO(0)], [g.GI(0)])]


@gradient("BatchToSpace")
def _batch_to_space_grad(g):
    return [g.op("SpaceToBatch", [g.GO(0)], [g.GI(0)])]


# -- IntegralImage ------------------------------------------------------------------------------------


def _ii_shape(args: Any, shape: tuple) -> tuple:
    return (shape[0], shape[1], shape[2] + 1, shape[3] + 1)


@register_op(
    "IntegralImage",
    input_docs=[("X", "N x C x H x W")],
    output_docs=[("Y", "N x C x (H + 1) x (W + 1): Y[.., i, j] = sum of X[.., :i, :j]")],
    infer=_infer(_ii_shape),
    category="image",
)
class IntegralImage(Operator):
    """Summed-area table with a leading zero row and column."""

    def run(self) -> None:
        x = float_input(self, 0)
        expect_rank(self, 0, x, 4, "N x C x H x W")
        y = self.output(0, _ii_shape(None, x.shape), x.dtype)
        y[...] = 0
        y[:, :, 1:, 1:] = np.cumsum(np.cumsum(x.astype(np.float64), axis=2), axis=3)


@register_op(
    "IntegralImageGradient",
    inputs=2,
    input_docs=[("X", "forward input"), ("dY", "gradient of Y")],
    output_docs=[("dX", "dX[.., i, j] = sum of dY[.., :i + 1, :j + 1]")],
    infer=lambda args, ins: [ins[0]],
    category="image",
    private=True,
)
class IntegralImageGradient(Operator):
    """Caffe2's IntegralImage "gradient": dX[i, j] = sum over a <= i, b <= j of dY[a, b], the forward
    prefix sums of dY's first H rows and W columns (dY is N x C x (H + 1) x (W + 1)).

    This is what Caffe2's kernel computes and its recorded golden output holds; it is not the adjoint of
    IntegralImage (that would sum dY[a, b] over a > i, b > j). Nets trained with Caffe2 got these numbers,
    so they are kept.
    """

    def run(self) -> None:
        x, dy = float_input(self, 0), float_input(self, 1)
        if x.ndim != 4 or dy.shape != _ii_shape(None, x.shape):
            raise ShapeError(
                f"{self.describe()}: dY ('{self.input_names[1]}') must be X's shape plus one row and column, "
                f"got X {list(x.shape)} and dY {list(dy.shape)}"
            )
        h, w = x.shape[2], x.shape[3]
        d = dy[:, :, :h, :w].astype(np.float64)
        self.output(0, x.shape, x.dtype)[...] = np.cumsum(np.cumsum(d, axis=3), axis=2)


@gradient("IntegralImage")
def _integral_image_grad(g):
    return [g.op("IntegralImageGradient", [g.I(0), g.GO(0)], [g.GI(0)])]
