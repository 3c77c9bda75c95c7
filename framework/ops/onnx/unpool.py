"""ONNXMaxUnpool: ONNX's ``MaxUnpool``, the partial inverse of MaxPool with Indices.

The output, zero everywhere else, of the inferred shape ``(in - 1) * stride - pad_head - pad_tail
+ kernel`` per spatial dim gets each X value at its flat index of ``I`` (MaxPool's Indices); with
``output_shape`` the result is placed at the start of a zero tensor of that shape (as onnx's
reference does). No gradient (an inference op of the ONNX backend).
"""

from __future__ import annotations

import numpy as np

from framework.errors import ShapeError
from framework.memory.allocator import check_elements
from framework.ops.gradient import no_gradient
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import INTS, REQUIRED, Arg, TensorSpec
from framework.ops.validation import check_indices


def _inferred(args, shape: tuple) -> list:
    r = len(shape) - 2
    k, st = list(args.kernel_shape), list(args.strides) or [1] * r
    pads = list(args.pads) or [0] * (2 * r)
    if len(k) != r or len(st) != r or len(pads) != 2 * r:
        raise ValueError(f"kernel_shape/strides/pads do not fit {r} spatial dimensions")
    return list(shape[:2]) + [
        (n - 1) * s - pads[i] - pads[r + i] + kk for i, (n, s, kk) in enumerate(zip(shape[2:], st, k))
    ]


def _infer(args, ins):
    x = ins[0]
    if args.output_shape:
        return [TensorSpec(tuple(args.output_shape), x.dtype)]
    if x.shape is None or None in x.shape:
        return [TensorSpec(None, x.dtype)]
    try:
        return [TensorSpec(tuple(_inferred(args, tuple(x.shape))), x.dtype)]
    except ValueError:
        return [TensorSpec(None, x.dtype)]


@register_op(
    "ONNXMaxUnpool",
    inputs=2,
    args=[
        Arg("kernel_shape", INTS, REQUIRED, "the pooling window per spatial dim"),
        Arg("strides", INTS, [], "per spatial dim (default 1)"),
        Arg("pads", INTS, [], "head pads then tail pads (default 0)"),
        Arg("output_shape", INTS, [], "full output shape (default: inferred)"),
    ],
    input_docs=[("X", "(N, C, d1..dk) pooled values"), ("I", "int64 flat indices, X's shape")],
    output_docs=[("Y", "zeros with X's values at I")],
    infer=_infer,
    category="onnx",
    input_types={0: "float", 1: "index"},
    same_shape=[(0, 1)],
    ranks={0: (3, None)},
)
class ONNXMaxUnpool(Operator):
    """Scatters X into zeros at MaxPool's flat Indices (ONNX MaxUnpool)."""

    def run(self) -> None:
        x, idx = self.input(0), self.input(1)
        where = self.describe()
        try:
            shape = _inferred(self.args, x.shape)
        except ValueError as e:
            raise ShapeError(f"{where}: {e} (X '{self.input_names[0]}' {x.shape})") from None
        if min(shape) < 0:
            raise ShapeError(f"{where}: X '{self.input_names[0]}' {x.shape} gives the negative output shape {shape}")
        out_shape = tuple(self.args.output_shape) or tuple(shape)
        if len(out_shape) != x.ndim or any(o < s for o, s in zip(out_shape, shape)):
            raise ShapeError(f"{where}: output_shape {out_shape} is smaller than the inferred {shape}")
        total = check_elements(out_shape, x.itemsize, "MaxUnpool output")
        n = int(np.prod(shape))
        check_indices(self, 1, idx, n, "elements of the unpooled tensor")
        flat = np.zeros(n, x.dtype)
        flat[idx.reshape(-1)] = x.reshape(-1)
        y = self.output(0, out_shape, x.dtype)
        y.fill(0)
        if total:
            y[tuple(slice(0, s) for s in shape)] = flat.reshape(shape)


no_gradient("ONNXMaxUnpool")
