"""ONNX Col2Im: sliding-window columns summed back into an N-D image (the inverse layout of
im2col; overlapping windows add up).

``ONNXCol2Im(input)``: input ``[N, C * prod(block_shape), L]`` where L counts the windows of
``block_shape`` sliding over the padded image with ``strides`` and ``dilations``
(``L = prod((image + pad_begin + pad_end - dilation (k - 1) - 1) // stride + 1)``); output
``[N, C, *image_shape]``. Window entries that fall on padding are dropped. Caffe2's ``Col2Im``
handles 2-D images of one sample with its own argument names; this op follows ONNX (any rank,
batched).

No gradient: this op serves the ONNX backend (inference).
"""

from __future__ import annotations

import itertools

import numpy as np

from framework.errors import ShapeError
from framework.memory.allocator import check_elements
from framework.ops.gradient import no_gradient
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import INTS, REQUIRED, Arg, TensorSpec


def _geometry(args, c_k: int, length: int) -> tuple:
    image, block = [int(v) for v in args.image_shape], [int(v) for v in args.block_shape]
    d = len(image)
    if d == 0 or len(block) != d:
        raise ValueError(f"image_shape {image} and block_shape {block} must have one entry per spatial dim")
    dil = [int(v) for v in args.dilations] or [1] * d
    strides = [int(v) for v in args.strides] or [1] * d
    pads = [int(v) for v in args.pads] or [0] * (2 * d)
    if len(dil) != d or len(strides) != d or len(pads) != 2 * d:
        raise ValueError("dilations/strides need one value per spatial dim, pads two")
    if min(block + dil + strides) < 1 or min(image) < 0 or min(pads) < 0:
        raise ValueError("block sizes, dilations and strides must be >= 1, pads and the image >= 0")
    k = int(np.prod(block))
    if c_k % k:
        raise ValueError(f"dim 1 ({c_k}) is not a multiple of prod(block_shape) = {k}")
    blocks = [(image[i] + pads[i] + pads[d + i] - dil[i] * (block[i] - 1) - 1) // strides[i] + 1 for i in range(d)]
    if min(blocks) < 1 or int(np.prod(blocks)) != length:
        raise ValueError(f"dim 2 ({length}) must equal the number of sliding windows {blocks}")
    return image, block, dil, strides, pads, blocks, c_k // k


def _infer(args, ins):
    x = ins[0]
    if not x.known or len(x.shape) != 3:
        return [TensorSpec(None, x.dtype)]
    try:
        image, *_, c = _geometry(args, x.shape[1], x.shape[2])
    except ValueError:
        return [TensorSpec(None, x.dtype)]
    return [TensorSpec((x.shape[0], c, *image), x.dtype)]


@register_op(
    "ONNXCol2Im",
    inputs=1,
    args=[
        Arg("image_shape", INTS, REQUIRED, "the spatial output shape"),
        Arg("block_shape", INTS, REQUIRED, "the sliding window's shape"),
        Arg("dilations", INTS, [], "per spatial dim (default 1)"),
        Arg("pads", INTS, [], "begin pads then end pads (default 0)"),
        Arg("strides", INTS, [], "per spatial dim (default 1)"),
    ],
    input_docs=[("input", "[N, C * prod(block_shape), L] columns")],
    output_docs=[("output", "[N, C, *image_shape]")],
    input_types="numeric",
    ranks={0: 3},
    infer=_infer,
    category="onnx",
)
class ONNXCol2Im(Operator):
    """ONNX Col2Im (opset 18): sums each window's column back onto the image."""

    def run(self) -> None:
        x = self.input(0)
        try:
            image, block, dil, strides, pads, blocks, c = _geometry(self.args, x.shape[1], x.shape[2])
        except ValueError as e:
            raise ShapeError(f"{self.describe()}: input '{self.input_names[0]}' {list(x.shape)}: {e}") from e
        n, d = x.shape[0], len(image)
        check_elements((n, c, *image), x.dtype.itemsize, f"{self.describe()} output")
        padded = np.zeros((n, c) + tuple(image[i] + pads[i] + pads[d + i] for i in range(d)), x.dtype)
        cols = x.reshape((n, c) + tuple(block) + tuple(blocks))
        for off in itertools.product(*[range(b) for b in block]):
            dst = tuple(
                slice(off[i] * dil[i], off[i] * dil[i] + strides[i] * (blocks[i] - 1) + 1, strides[i]) for i in range(d)
            )
            padded[(slice(None), slice(None)) + dst] += cols[(slice(None), slice(None)) + off]
        crop = tuple(slice(pads[i], pads[i] + image[i]) for i in range(d))
        self.output(0, (n, c, *image), x.dtype)[...] = padded[(slice(None), slice(None)) + crop]


no_gradient("ONNXCol2Im")
