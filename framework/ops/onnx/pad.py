"""ONNX Pad: pads (or, with negative pads, crops) every dim of a tensor of any rank.

``ONNXPad(x[, value])`` with ``pads`` = [begin_0, ..., begin_{r-1}, end_0, ..., end_{r-1}] (the
backend expands ONNX's ``axes`` input into this full list) and ``mode``:

- ``constant``: new cells hold ``value`` (the optional scalar input, x's type; 0 when absent);
- ``reflect``: mirror without repeating the edge cell (numpy's ``reflect``);
- ``edge``: repeat the edge cell;
- ``wrap``: continue from the other end (periodic).

Negative pads remove cells from that side first (as ONNX specifies); the padding then applies to
what is left. Caffe2's ``PadImage`` covers only the H and W dims of 4-D NCHW images.

No gradient: this op serves the ONNX backend (inference).
"""

from __future__ import annotations

import numpy as np

from framework.errors import ShapeError
from framework.memory.allocator import check_elements
from framework.ops.gradient import no_gradient
from framework.ops.onnx.common import MOVABLE
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import INTS, STRING, Arg, TensorSpec
from framework.ops.validation import expect_size

MODES = ("constant", "reflect", "edge", "wrap")


def _out_shape(shape: tuple, pads: list) -> tuple:
    r = len(shape)
    return tuple(d + pads[i] + pads[r + i] for i, d in enumerate(shape))


def _infer(args, ins):
    x = ins[0]
    if x.shape is None or len(args.pads) != 2 * len(x.shape):
        return [TensorSpec(None, x.dtype)]
    out = tuple(None if d is None else d + args.pads[i] + args.pads[len(x.shape) + i] for i, d in enumerate(x.shape))
    return [TensorSpec(out, x.dtype)]


@register_op(
    "ONNXPad",
    inputs=(1, 2),
    args=[
        Arg("pads", INTS, [], "begin pads of every dim, then end pads (negative: crop)"),
        Arg("mode", STRING, "constant", "constant | reflect | edge | wrap", choices=MODES),
    ],
    input_docs=[("x", "tensor of any rank"), ("value", "optional scalar of x's type: the constant-mode fill")],
    output_docs=[("y", "x padded: each dim grows by its begin + end pads")],
    input_types=MOVABLE,
    same_type=[(0, 1)],
    infer=_infer,
    category="onnx",
)
class ONNXPad(Operator):
    """ONNX Pad (opsets 2-25, modes of opset 19 included): pads every dim by its begin/end counts."""

    def run(self) -> None:
        x = self.input(0)
        pads = [int(p) for p in self.args.pads]
        r = x.ndim
        if len(pads) != 2 * r:
            raise ShapeError(
                f"{self.describe()}: pads has {len(pads)} values, x '{self.input_names[0]}' of rank {r} needs {2 * r}"
            )
        shape = _out_shape(x.shape, pads)
        if any(d < 0 for d in shape):
            raise ShapeError(f"{self.describe()}: pads {pads} crop x of shape {list(x.shape)} below zero")
        mode = self.args.mode
        value = np.zeros((), x.dtype)
        if len(self.inputs) > 1 and self.input_names[1]:
            v = self.input(1)
            expect_size(self, 1, v, 1, "the fill value")
            value = v.reshape(())
        crop = tuple(slice(max(-pads[i], 0), x.shape[i] - max(-pads[r + i], 0)) for i in range(r))
        core = x[crop]
        width = [(max(pads[i], 0), max(pads[r + i], 0)) for i in range(r)]
        if mode != "constant" and any(core.shape[i] == 0 and (a or b) for i, (a, b) in enumerate(width)):
            raise ShapeError(f"{self.describe()}: mode '{mode}' cannot pad an empty dim of x {list(x.shape)}")
        check_elements(shape, x.dtype.itemsize, f"{self.describe()} output")
        if r == 0:  # nothing to pad
            self.output(0, (), x.dtype)[...] = x
            return
        if mode == "constant":
            out = np.pad(core, width, mode="constant", constant_values=value)
        else:
            out = np.pad(core, width, mode=mode)
        self.output(0, shape, x.dtype)[...] = out


no_gradient("ONNXPad")
