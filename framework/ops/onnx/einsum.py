"""ONNX Einsum: Einstein summation over any number of operands (numpy's ``einsum``).

``ONNXEinsum(x_0, ..., x_n)`` with ``equation`` such as ``"ij,jk->ik"`` or ``"...ii->...i"``:
subscripts per operand, ``...`` for broadcast dims, an optional ``->`` output (implicit mode: the
subscripts seen once, in alphabetical order). Output type: the operands' (all the same).

No gradient: this op serves the ONNX backend (inference).
"""

from __future__ import annotations

import re

import numpy as np

from framework.errors import ArgumentError, ShapeError
from framework.ops.gradient import no_gradient
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import REQUIRED, STRING, Arg, TensorSpec

_EQUATION = re.compile(r"^[A-Za-z. ]*(,[A-Za-z. ]*)*(->[A-Za-z. ]*)?$")


@register_op(
    "ONNXEinsum",
    inputs=(1, 16),
    args=[Arg("equation", STRING, REQUIRED, "subscripts, e.g. 'bij,bjk->bik'")],
    input_docs=[("inputs", "the operands, one subscript group each")],
    output_docs=[("output", "the summation's result")],
    input_types="numeric",
    same_type=[tuple(range(16))],
    infer=lambda args, ins: [TensorSpec(None, ins[0].dtype)],
    category="onnx",
)
class ONNXEinsum(Operator):
    """ONNX Einsum (opset 12): Einstein summation as numpy's ``einsum`` computes it."""

    def setup(self) -> None:
        eq = self.args.equation.replace(" ", "")
        if not _EQUATION.match(eq) or eq.split("->")[0].count(",") + 1 != len(self.inputs):
            raise ArgumentError(
                f"{self.describe()}: equation {self.args.equation!r} does not give {len(self.inputs)} operand(s) "
                "subscripts (letters, '...', commas, an optional '->')"
            )
        self._eq = eq

    def run(self) -> None:
        xs = [self.input(i) for i in range(len(self.inputs))]
        try:
            out = np.einsum(self._eq, *xs)
        except ValueError as e:
            raise ShapeError(f"{self.describe()}: operands {[list(x.shape) for x in xs]} do not fit "
                             f"{self.args.equation!r}: {e}") from e  # fmt: skip
        out = np.asarray(out, dtype=xs[0].dtype)
        self.output(0, out.shape, xs[0].dtype)[...] = out


no_gradient("ONNXEinsum")
