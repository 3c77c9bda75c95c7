"""ONNX MatMul and Squeeze for operands whose ranks are known only at run time (e.g. loop-carried
state in a Scan body): numpy's ``matmul`` rules, and negative squeeze axes, resolved per run. (With
known ranks the backend uses Caffe2's MatMul/BatchMatMul/Squeeze.)

``ONNXMatMul(A, B)``: a 1-D A is a row (its dim dropped from the result), a 1-D B a column; other
operands are stacks of matrices broadcast over their leading dims. Float types; computed in the
operands' type.

No gradient: this op serves the ONNX backend (inference).
"""

from __future__ import annotations

import numpy as np

from framework.errors import ShapeError
from framework.memory.allocator import check_elements
from framework.ops.gradient import no_gradient
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import INTS, REQUIRED, Arg, TensorSpec


def _infer(args, ins):
    a, b = ins
    if a.known and b.known and len(a.shape) and len(b.shape):
        try:
            shape = np.matmul(np.empty(a.shape, np.int8), np.empty(b.shape, np.int8)).shape
        except ValueError:
            return [TensorSpec(None, a.dtype)]
        return [TensorSpec(shape, a.dtype)]
    return [TensorSpec(None, a.dtype)]


@register_op(
    "ONNXMatMul",
    inputs=2,
    input_docs=[("A", "float tensor of rank >= 1"), ("B", "float tensor of rank >= 1, A's type")],
    output_docs=[("Y", "numpy's matmul of A and B")],
    input_types="float",
    same_type=[(0, 1)],
    ranks={0: (1, None), 1: (1, None)},
    infer=_infer,
    category="onnx",
)
class ONNXMatMul(Operator):
    """ONNX MatMul (opsets 1-13) with numpy's rank rules applied at run time."""

    def run(self) -> None:
        a, b = self.input(0), self.input(1)
        k_a, k_b = a.shape[-1], b.shape[0] if b.ndim == 1 else b.shape[-2]
        try:
            lead = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
        except ValueError:
            lead = None
        if k_a != k_b or lead is None:
            raise ShapeError(
                f"{self.describe()}: A '{self.input_names[0]}' {list(a.shape)} and B '{self.input_names[1]}' "
                f"{list(b.shape)} do not multiply"
            )
        shape = tuple(lead) + ((a.shape[-2],) if a.ndim > 1 else ()) + ((b.shape[-1],) if b.ndim > 1 else ())
        check_elements(shape, a.dtype.itemsize, f"{self.describe()} output")
        self.output(0, shape, a.dtype)[...] = np.matmul(a, b)


@register_op(
    "ONNXSqueeze",
    inputs=1,
    args=[Arg("axes", INTS, REQUIRED, "the size-1 dims to remove (negative: from the end)")],
    input_docs=[("data", "tensor")],
    output_docs=[("squeezed", "data without those dims")],
    infer=lambda args, ins: [TensorSpec(None, ins[0].dtype)],
    category="onnx",
)
class ONNXSqueeze(Operator):
    """ONNX Squeeze (opsets 1-24) whose negative axes resolve against the rank seen at run time
    (with a known rank the backend uses Caffe2's Squeeze)."""

    def run(self) -> None:
        x = self.input(0)
        r = x.ndim
        axes = [int(a) for a in self.args.axes]
        if (r == 0 and axes) or any(not -r <= a < r for a in axes) or len({a % max(r, 1) for a in axes}) != len(axes):
            raise ShapeError(
                f"{self.describe()}: axes {axes} are not distinct dims of '{self.input_names[0]}' {list(x.shape)}"
            )
        dims = {a % r for a in axes}
        if any(x.shape[d] != 1 for d in dims):
            raise ShapeError(
                f"{self.describe()}: dims {sorted(dims)} of '{self.input_names[0]}' {list(x.shape)} are not all 1"
            )
        shape = tuple(d for i, d in enumerate(x.shape) if i not in dims)
        self.output(0, shape, x.dtype)[...] = x.reshape(shape)


no_gradient("ONNXMatMul", "ONNXSqueeze")
