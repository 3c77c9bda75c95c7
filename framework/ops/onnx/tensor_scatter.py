"""ONNX TensorScatter: writes a block of updates into a (key/value) cache along one axis.

``ONNXTensorScatter(past_cache, update[, write_indices])``: a copy of past_cache whose positions
``write_indices[b] + j`` along ``axis`` (for batch entry b = index along dim 0, j < the update's
length along ``axis``) take the update's entries; ``mode="circular"`` wraps positions modulo the
cache length, ``linear`` requires them inside. write_indices default to 0. All other dims of
update equal the cache's.

No gradient: this op serves the ONNX backend (inference).
"""

from __future__ import annotations

import numpy as np

from framework.errors import ShapeError
from framework.ops.gradient import no_gradient
from framework.ops.onnx.common import MOVABLE
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import INT, STRING, Arg, same_as_input
from framework.ops.validation import expect_shape


@register_op(
    "ONNXTensorScatter",
    inputs=(2, 3),
    args=[
        Arg("axis", INT, -2, "the sequence axis (not the batch dim 0)"),
        Arg("mode", STRING, "linear", "linear | circular", choices=("linear", "circular")),
    ],
    input_docs=[
        ("past_cache", "tensor [batch, ..., max_len, ...]"),
        ("update", "past_cache's shape with a length <= max_len along axis"),
        ("write_indices", "optional int [batch]: where each batch entry's update starts"),
    ],
    output_docs=[("present_cache", "past_cache with the updates written")],
    input_types={0: MOVABLE, 1: MOVABLE, 2: "index"},
    same_type=[(0, 1)],
    ranks={0: (2, None)},
    infer=same_as_input(0),
    category="onnx",
)
class ONNXTensorScatter(Operator):
    """ONNX TensorScatter (opset 24): the cache with each batch entry's update written at its index."""

    def run(self) -> None:
        cache, upd = self.input(0), self.input(1)
        r = cache.ndim
        if not -r <= self.args.axis < r or self.args.axis % r == 0:
            raise ShapeError(f"{self.describe()}: axis {self.args.axis} must be a non-batch dim of rank {r}")
        axis = self.args.axis % r
        max_len = cache.shape[axis]
        want = cache.shape[:axis] + (upd.shape[axis] if upd.ndim == r else -1,) + cache.shape[axis + 1 :]
        if upd.ndim != r or upd.shape[axis] > max_len:
            raise ShapeError(
                f"{self.describe()}: update '{self.input_names[1]}' {list(upd.shape)} does not fit {list(cache.shape)}"
            )
        expect_shape(self, 1, upd, want, "the cache's shape off the axis")
        b = cache.shape[0]
        start = np.zeros(b, np.int64)
        if len(self.inputs) > 2:
            w = self.input(2)
            expect_shape(self, 2, w, (b,), "one start per batch entry")
            start = w.astype(np.int64)
        pos = start[:, None] + np.arange(upd.shape[axis])[None, :]  # [batch, len]
        if self.args.mode == "circular":
            pos = pos % max_len if max_len else pos
        elif pos.size and (pos.min() < 0 or pos.max() >= max_len):
            raise ShapeError(f"{self.describe()}: write_indices put the update outside the cache length {max_len}")
        out = self.output(0, cache.shape, cache.dtype)
        out[...] = cache
        if pos.size:
            om, um = np.moveaxis(out, axis, 1), np.moveaxis(upd, axis, 1)  # [batch, len, ...] views
            om[np.arange(b)[:, None], pos] = um


no_gradient("ONNXTensorScatter")
