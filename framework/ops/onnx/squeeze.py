"""ONNX Squeeze whose negative axes resolve against the rank seen at run time (loop-carried state in
a Scan body has no static rank); with a known rank the backend uses Caffe2's Squeeze. (MatMul of
values of unknown rank runs on ``ONNXMatMul``, ``framework/ops/onnx/native.py``.)

No gradient: this op serves the ONNX backend (inference).
"""

from __future__ import annotations

from framework.errors import ShapeError
from framework.ops.gradient import no_gradient
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import INTS, REQUIRED, Arg, TensorSpec


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


no_gradient("ONNXSqueeze")
