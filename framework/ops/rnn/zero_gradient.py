"""ZeroGradient (caffe2/operators/zero_gradient_op.cc): a sink that gives its input a zero gradient.

rnn_cell's UnrolledCell puts one on every output not listed in outputs_with_grads, so that the
backward pass of the unrolled steps has a (zero) gradient for each of them.
"""

from __future__ import annotations

from framework.ops.gradient import gradient
from framework.ops.operator import Operator
from framework.ops.registry import register_op


@register_op(
    "ZeroGradient",
    inputs=1,
    outputs=0,
    input_docs=[("X", "any tensor: its gradient is zeros shaped like it")],
    infer=lambda args, ins: [],
    category="rnn",
)
class ZeroGradient(Operator):
    """ZeroGradient operators don't produce any output blobs. One can use this operator to
    produce 0 gradient for the input blob (its gradient is a ConstantFill of zeros like X)."""

    def run(self) -> None:
        pass


@gradient("ZeroGradient")
def _zero_gradient_grad(g):
    return [g.op("ConstantFill", [g.I(0)], [g.GI(0)], value=0.0)]
