"""ONNX's classification losses: ONNXNegativeLogLikelihoodLoss and ONNXSoftmaxCrossEntropyLoss.

``input`` is ``(N, C)`` or ``(N, C, d1, ..., dk)``, ``target`` integer ``(N)`` or ``(N, d1, ..., dk)``
with classes in ``[0, C)`` (or ``ignore_index``), ``weight`` an optional ``(C,)`` class weight.
The loss of one element is ``-weight[t] * input[n, t, d...]`` (0 where ``t == ignore_index``);
``reduction`` ``none`` keeps target's shape, ``sum`` adds, ``mean`` divides the sum by the sum of
the weights used (every weight 1 without ``weight``; ignored elements count 0), as the ONNX spec
says. SoftmaxCrossEntropyLoss applies it to ``log_softmax(input)`` over the class axis and can
output that log-probability too. Neither has a gradient here (inference ops of the ONNX backend;
Caffe2's own SoftmaxWithLoss / LabelCrossEntropy keep theirs).
"""

from __future__ import annotations

import numpy as np

from framework.errors import ShapeError
from framework.ops.gradient import no_gradient
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import INT, STRING, UNKNOWN, Arg, TensorSpec

_ARGS = [
    Arg("reduction", STRING, "mean", "none, sum or mean", choices=("none", "sum", "mean")),
    Arg("ignore_index", INT, None, "target value that contributes nothing (default: none)"),
]
_IN_DOCS = [
    ("input", "(N, C, d1..dk) float scores (log-probabilities for NLL)"),
    ("target", "(N, d1..dk) integer classes"),
    ("weight", "optional (C,) class weights"),
]


def _loss_spec(args, ins):
    x, t = ins[0], ins[1]
    if args.reduction != "none":
        return TensorSpec((), x.dtype)
    return TensorSpec(t.shape, x.dtype) if t.shape is not None else TensorSpec(None, x.dtype)


def _check(op: Operator, x: np.ndarray, t: np.ndarray, w: np.ndarray | None) -> np.ndarray:
    """The valid-element mask, after checking shapes and target values."""
    where = op.describe()
    if x.ndim < 2 or t.shape != (x.shape[0],) + x.shape[2:]:
        raise ShapeError(
            f"{where}: target '{op.input_names[1]}' shape {t.shape} does not match input "
            f"'{op.input_names[0]}' {x.shape} (expected (N, d1..dk) of (N, C, d1..dk))"
        )
    c = x.shape[1]
    if w is not None and w.shape != (c,):
        raise ShapeError(f"{where}: weight '{op.input_names[2]}' has shape {w.shape}, expected ({c},)")
    ii = op.args.ignore_index
    valid = np.ones(t.shape, bool) if ii is None else t != ii
    bad = valid & ((t < 0) | (t >= c))
    if bad.any():
        raise ShapeError(
            f"{where}: target '{op.input_names[1]}' holds {t[bad].reshape(-1)[0]}, outside [0, {c})"
            + ("" if ii is None else f" and not ignore_index {ii}")
        )
    return valid


def _reduce(op: Operator, x: np.ndarray, logp: np.ndarray, t: np.ndarray, w: np.ndarray | None) -> None:
    valid = _check(op, x, t, w)
    tc = np.where(valid, t, 0).astype(np.int64)
    picked = np.take_along_axis(logp, tc[:, None], axis=1)[:, 0]
    weights = valid.astype(x.dtype) if w is None else np.where(valid, w[tc], 0).astype(x.dtype)
    loss = -picked * weights
    red = op.args.reduction
    if red == "none":
        op.output(0, t.shape, x.dtype)[...] = loss
        return
    with np.errstate(all="ignore"):
        value = loss.sum() if red == "sum" else loss.sum() / weights.sum()
    op.output(0, (), x.dtype)[...] = value


@register_op(
    "ONNXNegativeLogLikelihoodLoss",
    inputs=(2, 3),
    args=_ARGS,
    input_docs=_IN_DOCS,
    output_docs=[("loss", "target's shape (reduction none) or a scalar")],
    infer=lambda args, ins: [_loss_spec(args, ins)],
    category="onnx",
    input_types={0: "float", 1: "int", 2: "float"},
    same_type=[(0, 2)],
    ranks={0: (2, None)},
)
class ONNXNegativeLogLikelihoodLoss(Operator):
    """ONNX NegativeLogLikelihoodLoss: ``-weight[t] * input[n, t, d...]`` per element, reduced
    (none / sum / mean over the weights used); ``ignore_index`` elements contribute nothing."""

    def run(self) -> None:
        x, t = self.input(0), self.input(1)
        w = self.input(2) if len(self.inputs) == 3 else None
        _reduce(self, x, x, t, w)


def _sce_infer(args, ins):
    out = [_loss_spec(args, ins)]
    if args.num_outputs == 2:
        out.append(ins[0] if ins[0] is not UNKNOWN else UNKNOWN)
    return out


@register_op(
    "ONNXSoftmaxCrossEntropyLoss",
    inputs=(2, 3),
    outputs=(1, 2),
    args=_ARGS,
    input_docs=_IN_DOCS,
    output_docs=[
        ("loss", "target's shape (reduction none) or a scalar"),
        ("log_prob", "optional: log_softmax(input) over axis 1"),
    ],
    infer=_sce_infer,
    category="onnx",
    input_types={0: "float", 1: "int", 2: "float"},
    same_type=[(0, 2)],
    ranks={0: (2, None)},
)
class ONNXSoftmaxCrossEntropyLoss(Operator):
    """ONNX SoftmaxCrossEntropyLoss: NegativeLogLikelihoodLoss of ``log_softmax(input, axis=1)``;
    the optional second output is that log-probability."""

    def run(self) -> None:
        x, t = self.input(0), self.input(1)
        w = self.input(2) if len(self.inputs) == 3 else None
        _check(self, x, t, w)
        with np.errstate(all="ignore"):
            shifted = x - np.max(x, axis=1, keepdims=True) if x.size else x
            logp = shifted - np.log(np.sum(np.exp(shifted), axis=1, keepdims=True))
        _reduce(self, x, logp.astype(x.dtype, copy=False), t, w)
        if self.args.num_outputs == 2:
            self.output(1, x.shape, x.dtype)[...] = logp


no_gradient("ONNXNegativeLogLikelihoodLoss", "ONNXSoftmaxCrossEntropyLoss")
