"""ONNX's gated / stateful sequence ops of opsets 27-28: ONNXSwiGLU and ONNXCausalConvWithState.

- ``ONNXSwiGLU(A, B)``: ``A * sigmoid(alpha * A) * B`` (equal shapes), the sigmoid cast to A's
  dtype before the products, as ONNX's reference.
- ``ONNXCausalConvWithState(input, weight[, bias][, past_state])``: a depthwise causal 1-D
  convolution over ``(B, C, L)`` with ``weight`` ``(C, 1, k)``: the input is left-padded with
  ``past_state`` ``(B, C, k - 1)`` (zeros when absent), ``output[b, c, t] = bias[c] +
  sum_j weight[c, 0, j] * padded[b, c, t + j]``, optionally followed by SiLU
  (``activation`` silu / swish, computed in float32); ``present_state`` is the last ``k - 1``
  padded positions (the next call's past_state). float16 runs the products in float32 and casts
  the result back.

No gradients (inference ops of the ONNX backend).
"""

from __future__ import annotations

import numpy as np

from framework.errors import ShapeError
from framework.ops.gradient import no_gradient
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import BOOL, FLOAT, STRING, UNKNOWN, Arg, TensorSpec


@register_op(
    "ONNXSwiGLU",
    inputs=2,
    args=[Arg("alpha", FLOAT, 1.0, "scale inside the sigmoid gate")],
    input_docs=[("A", "gate input"), ("B", "A's shape")],
    output_docs=[("Y", "A * sigmoid(alpha * A) * B")],
    infer=lambda args, ins: [ins[0]],
    category="onnx",
    input_types="float",
    same_type=[(0, 1)],
    same_shape=[(0, 1)],
)
class ONNXSwiGLU(Operator):
    """SwiGLU: ``A * sigmoid(alpha * A) * B``."""

    def run(self) -> None:
        a, b = self.input(0), self.input(1)
        with np.errstate(over="ignore"):
            gate = (1 / (1 + np.exp(-float(self.args.alpha) * a))).astype(a.dtype)
        self.output(0, a.shape, a.dtype)[...] = a * gate * b


def _ccs_infer(args, ins):
    x, w = ins[0], ins[1]
    if x.shape is None or w.shape is None or len(w.shape) != 3 or len(x.shape) != 3:
        return [TensorSpec(x.shape, x.dtype), UNKNOWN]
    return [x, TensorSpec((x.shape[0], x.shape[1], None if w.shape[2] is None else w.shape[2] - 1), x.dtype)]


@register_op(
    "ONNXCausalConvWithState",
    inputs=(2, 4),
    outputs=(1, 2),
    args=[
        Arg("has_bias", BOOL, False, "a bias input (C,) follows weight"),
        Arg("has_past_state", BOOL, False, "a past_state input (B, C, k - 1) comes last"),
        Arg("activation", STRING, "none", "none, silu or swish (= silu)", choices=("none", "silu", "swish")),
    ],
    input_docs=[
        ("input", "(B, C, L)"),
        ("weight", "(C, 1, k) depthwise filters"),
        ("bias", "optional (C,)"),
        ("past_state", "optional (B, C, k - 1)"),
    ],
    output_docs=[("output", "(B, C, L)"), ("present_state", "(B, C, k - 1): the last k - 1 padded positions")],
    infer=_ccs_infer,
    category="onnx",
    input_types="float",
    same_type=[(0, 1, 2, 3)],
    ranks={0: 3, 1: 3},
)
class ONNXCausalConvWithState(Operator):
    """Depthwise causal 1-D convolution carrying its left context as state (ONNX CausalConvWithState)."""

    def setup(self) -> None:
        want = 2 + int(bool(self.args.has_bias)) + int(bool(self.args.has_past_state))
        if len(self.inputs) != want:
            raise self.arg_error(f"has {len(self.inputs)} inputs; has_bias/has_past_state call for {want}")

    def run(self) -> None:
        x, w = self.input(0), self.input(1)
        bsz, c, length = x.shape
        where = self.describe()
        if w.shape[0] != c or w.shape[1] != 1 or w.shape[2] < 1:
            raise ShapeError(f"{where}: weight '{self.input_names[1]}' has shape {w.shape}, expected ({c}, 1, k)")
        k = w.shape[2]
        i = 2
        bias = None
        if self.args.has_bias:
            bias, i = self.input(2), 3
            if bias.shape != (c,):
                raise ShapeError(f"{where}: bias '{self.input_names[2]}' has shape {bias.shape}, expected ({c},)")
        if self.args.has_past_state:
            past = self.input(i)
            if past.shape != (bsz, c, k - 1):
                raise ShapeError(
                    f"{where}: past_state '{self.input_names[i]}' has shape {past.shape}, "
                    f"expected ({bsz}, {c}, {k - 1})"
                )
        else:
            past = np.zeros((bsz, c, k - 1), x.dtype)
        padded = np.concatenate([past, x], axis=2)
        ct = np.float32 if x.dtype == np.float16 else x.dtype
        acc = np.zeros((bsz, c, length), ct)
        for j in range(k):
            acc += w[None, :, 0, j, None].astype(ct) * padded[:, :, j : j + length].astype(ct)
        if bias is not None:
            acc += bias.astype(ct)[None, :, None]
        out = acc.astype(x.dtype)
        if self.args.activation in ("silu", "swish"):
            o32 = out.astype(np.float32)
            with np.errstate(over="ignore"):
                out = (o32 / (1.0 + np.exp(-o32))).astype(x.dtype)
        self.output(0, x.shape, x.dtype)[...] = out
        if self.args.num_outputs > 1:
            self.output(1, (bsz, c, k - 1), x.dtype)[...] = padded[:, :, padded.shape[2] - (k - 1) :]


no_gradient("ONNXSwiGLU", "ONNXCausalConvWithState")
