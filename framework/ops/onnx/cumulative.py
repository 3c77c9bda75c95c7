"""ONNX CumSum and CumProd: running sums/products along one axis.

``ONNXCumSum(x)`` / ``ONNXCumProd(x)`` with ``axis`` (ONNX passes it as a tensor input; the backend
folds it into the argument), ``exclusive`` (each output leaves its own element out: the first is 0
for sums, 1 for products) and ``reverse`` (run from the end of the axis). Output: x's shape and type
(integer sums wrap around as the type does).

No gradients: these ops serve the ONNX backend (inference).
"""

from __future__ import annotations

import numpy as np

from framework.ops.gradient import no_gradient
from framework.ops.onnx.common import axis_of
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import INT, Arg, same_as_input

_ARGS = [
    Arg("axis", INT, 0, "the axis to run along (negative counts from the end)"),
    Arg("exclusive", INT, 0, "1: leave each element out of its own output", choices=(0, 1)),
    Arg("reverse", INT, 0, "1: run from the last element of the axis to the first", choices=(0, 1)),
]


class _Cumulative(Operator):
    ufunc = np.add
    identity = 0

    def run(self) -> None:
        x = self.input(0)
        axis = axis_of(self, self.args.axis, x.ndim)
        y = self.output(0, x.shape, x.dtype)
        if x.size == 0:
            return
        src = np.flip(x, axis) if self.args.reverse else x
        acc = self.ufunc.accumulate(src, axis=axis, dtype=x.dtype)
        if self.args.exclusive:
            head = np.full_like(np.take(acc, [0], axis=axis), self.identity)
            acc = np.concatenate([head, np.take(acc, np.arange(x.shape[axis] - 1), axis=axis)], axis=axis)
        y[...] = np.flip(acc, axis) if self.args.reverse else acc


_COMMON = dict(
    inputs=1,
    args=_ARGS,
    input_docs=[("x", "numeric tensor of rank >= 1")],
    input_types="numeric",
    ranks={0: (1, None)},
    infer=same_as_input(0),
    category="onnx",
)


@register_op("ONNXCumSum", output_docs=[("y", "running sums, x's shape and type")], **_COMMON)
class ONNXCumSum(_Cumulative):
    """ONNX CumSum (opsets 11, 14): y[i] = x[0] + ... + x[i] along ``axis`` (x[i] left out with
    ``exclusive``; summed from the end with ``reverse``)."""


@register_op("ONNXCumProd", output_docs=[("y", "running products, x's shape and type")], **_COMMON)
class ONNXCumProd(_Cumulative):
    """ONNX CumProd (opset 26): y[i] = x[0] * ... * x[i] along ``axis`` (x[i] left out with
    ``exclusive``; multiplied from the end with ``reverse``)."""

    ufunc = np.multiply
    identity = 1


no_gradient("ONNXCumSum", "ONNXCumProd")
