"""Losses and metrics: LabelCrossEntropy, CrossEntropy, SigmoidCrossEntropyWithLogits,
AveragedLoss, Accuracy, with their gradient ops (the softmax family, SoftmaxWithLoss included,
is ``framework.ops.nn.softmax``; the distances ``framework.ops.nn.distances``).

Numerics follow Caffe2: probabilities are clamped at ``LOG_THRESHOLD`` = 1e-20 before a log
(LabelCrossEntropy, CrossEntropy, SoftmaxWithLoss with ``label_prob``).
"""

from __future__ import annotations

import math

import numpy as np

from framework.errors import ShapeError, TypeMismatchError
from framework.ops.gradient import gradient, no_gradient
from framework.ops.nn.smooth_activations import sigmoid_into, softplus_into
from framework.ops.operator import Operator
from framework.ops.pointwise import float_input, scratch
from framework.ops.registry import register_op
from framework.ops.schema import BOOL, INT, Arg, TensorSpec, pointwise_cost, same_as_input
from framework.ops.validation import check_indices, expect_kind, expect_rank

LOG_THRESHOLD = 1e-20  # Caffe2's kLOG_THRESHOLD() for float


# -- cross entropies -----------------------------------------------------------------------------


def _rows_2d(op: Operator, x: np.ndarray) -> tuple[int, int]:
    if x.ndim == 2:
        return x.shape
    if x.ndim == 1:
        return 1, x.shape[0]
    raise ShapeError(f"{op.describe()}: input '{op.input_names[0]}' must be 1D or 2D, got {list(x.shape)}")


def _int_labels(op: Operator, i: int, n: int, d: int) -> np.ndarray:
    t = op.input(i)
    name = op.input_names[i]
    if t.dtype.kind not in "iu":
        raise TypeMismatchError(f"{op.describe()}: labels '{name}' must be integers, got {t.dtype}")
    if not (t.ndim == 1 or (t.ndim == 2 and t.shape[1] == 1)) or t.shape[0] != n:
        raise ShapeError(f"{op.describe()}: labels '{name}' {list(t.shape)} must have shape [{n}] or [{n}, 1]")
    t = t.reshape(n)
    check_indices(op, i, t, d, what=f"labels of {d} classes")
    return t


def _infer_rows(args, ins):
    x = ins[0]
    if x.shape is None:
        return [TensorSpec(None, x.dtype)]
    return [TensorSpec((x.shape[0] if len(x.shape) == 2 else 1,), x.dtype)]


def _soft_labels(op: Operator, x: np.ndarray) -> np.ndarray:
    t = op.input(1)
    if t.shape != x.shape or t.dtype != x.dtype:
        raise ShapeError(
            f"{op.describe()}: label '{op.input_names[1]}' {t.dtype} {list(t.shape)} must match "
            f"X '{op.input_names[0]}' {x.dtype} {list(x.shape)}"
        )
    return t


class _CrossEntropyBase(Operator):
    """Shared checks of the cross entropies: X is (N, D) (or D, one row), input 1 the labels."""

    soft_labels = False  # True: a distribution per row, shaped as X; False: N class indices

    def operands(self) -> tuple[np.ndarray, np.ndarray, int, int]:
        """(X, labels, N, D)."""
        x = float_input(self, 0)
        n, d = _rows_2d(self, x)
        return x, (_soft_labels(self, x) if self.soft_labels else _int_labels(self, 1, n, d)), n, d

    def row_gradient(self, n: int) -> np.ndarray:
        """dY (input 2), which must hold one value per row."""
        dy = self.input(2)
        expect_kind(self, 2, dy, "float")
        if dy.size != n:
            raise ShapeError(f"{self.describe()}: dY '{self.input_names[2]}' {list(dy.shape)} must hold {n} values")
        return dy


_XENT_GRAD_SCHEMA = dict(
    inputs=3,
    input_docs=[("X", "forward X"), ("label", "forward labels"), ("dY", "gradient of Y")],
    output_docs=[("dX", "gradient of X")],
    infer=same_as_input(0),
    category="loss",
    private=True,
)


@register_op(
    "LabelCrossEntropy",
    inputs=2,
    input_docs=[("X", "probabilities N x D (or D)"), ("label", "N integer classes")],
    output_docs=[("Y", "N cross-entropies -log(X[i, label[i]])")],
    infer=_infer_rows,
    category="loss",
)
class LabelCrossEntropy(_CrossEntropyBase):
    """Y[i] = -log(max(X[i, label[i]], 1e-20))."""

    def run(self) -> None:
        x, labels, n, d = self.operands()
        y = self.output(0, (n,), x.dtype)
        np.maximum(x.reshape(n, d)[np.arange(n), labels], x.dtype.type(LOG_THRESHOLD), out=y)
        np.log(y, out=y)
        np.negative(y, out=y)


@register_op("LabelCrossEntropyGradient", **_XENT_GRAD_SCHEMA)
class LabelCrossEntropyGradient(_CrossEntropyBase):
    """dX[i, label[i]] = -dY[i] / max(X[i, label[i]], 1e-20); 0 elsewhere."""

    def run(self) -> None:
        x, labels, n, d = self.operands()
        dy = self.row_gradient(n)
        dx = self.output(0, x.shape, x.dtype)
        dx.fill(0)
        rows = np.arange(n)
        picked = np.maximum(x.reshape(n, d)[rows, labels], x.dtype.type(LOG_THRESHOLD))
        dx.reshape(n, d)[rows, labels] = -dy.reshape(n) / picked


@gradient("LabelCrossEntropy")
def _label_xent_grad(g):
    return [g.op("LabelCrossEntropyGradient", [g.I(0), g.I(1), g.GO(0)], [g.GI(0)])]


@register_op(
    "CrossEntropy",
    inputs=2,
    input_docs=[("X", "probabilities N x D (or D)"), ("label", "target distributions, shaped as X")],
    output_docs=[("Y", "N cross-entropies")],
    infer=_infer_rows,
    cost=pointwise_cost(3),
    category="loss",
)
class CrossEntropy(_CrossEntropyBase):
    """Y[i] = -sum_j label[i, j] * log(max(X[i, j], 1e-20))."""

    soft_labels = True

    def run(self) -> None:
        x, t, n, d = self.operands()
        tmp = scratch(self, "_tmp", (n, d), x.dtype)
        np.maximum(x.reshape(n, d), x.dtype.type(LOG_THRESHOLD), out=tmp)
        np.log(tmp, out=tmp)
        tmp *= t.reshape(n, d)
        y = self.output(0, (n,), x.dtype)
        np.sum(tmp, axis=1, out=y)
        np.negative(y, out=y)


@register_op("CrossEntropyGradient", **_XENT_GRAD_SCHEMA)
class CrossEntropyGradient(_CrossEntropyBase):
    """dX = -dY[i] * label / max(X, 1e-20)."""

    soft_labels = True

    def run(self) -> None:
        x, t, n, d = self.operands()
        dy = self.row_gradient(n)
        dx2 = self.output(0, x.shape, x.dtype).reshape(n, d)
        tmp = scratch(self, "_tmp", (n, d), x.dtype)
        np.maximum(x.reshape(n, d), x.dtype.type(LOG_THRESHOLD), out=tmp)
        np.divide(t.reshape(n, d), tmp, out=dx2)
        dx2 *= dy.reshape(n, 1)
        np.negative(dx2, out=dx2)


@gradient("CrossEntropy")
def _xent_grad(g):
    return [g.op("CrossEntropyGradient", [g.I(0), g.I(1), g.GO(0)], [g.GI(0)])]


# -- SigmoidCrossEntropyWithLogits ---------------------------------------------------------------


def _infer_sigmoid_xent(args, ins):
    x = ins[0]
    if x.shape is None:
        return [TensorSpec(None, x.dtype)]
    return [TensorSpec(tuple(x.shape[:-1]), x.dtype)]


_SIGMOID_XENT_ARGS = [
    Arg("log_D_trick", BOOL, False, "GAN generator trick: the loss is -(2t - 1) * log(sigmoid(x))"),
    Arg(
        "unjoined_lr_loss",
        BOOL,
        False,
        "unjoined logistic loss (positives' log-sigmoid term dropped): -x t + (1 - t) softplus(x)",
    ),
]


class _SigmoidXentBase(Operator):
    def setup(self) -> None:
        if self.args.log_D_trick and self.args.unjoined_lr_loss:
            raise self.arg_error("log_D_trick and unjoined_lr_loss cannot both be set")
        self.mode = "log_D_trick" if self.args.log_D_trick else "unjoined" if self.args.unjoined_lr_loss else ""

    def special_loss(self, x: np.ndarray, t: np.ndarray) -> np.ndarray:
        """Elementwise loss of the log_D_trick / unjoined modes (softplus computed stably)."""
        softplus = np.maximum(x, 0) + np.log1p(np.exp(-np.abs(x)))
        if self.mode == "log_D_trick":
            return (2 * t - 1) * (softplus - x)  # -(2t - 1) log(sigmoid(x))
        return (1 - t) * softplus - x * t

    def special_slope(self, x: np.ndarray, t: np.ndarray) -> np.ndarray:
        """Derivative of ``special_loss`` with respect to the logits."""
        if self.mode == "log_D_trick":
            return -(2 * t - 1) / (1 + np.exp(x))
        return (1 - t) / (1 + np.exp(-x)) - t

    def pair(self, i: int, j: int) -> tuple[np.ndarray, np.ndarray]:
        """Logits and targets (a 0-d pair is viewed as one row of one value)."""
        x, t = float_input(self, i), self.input(j)
        expect_kind(self, j, t, "numeric")
        if x.shape != t.shape:
            raise ShapeError(
                f"{self.describe()}: logits '{self.input_names[i]}' {list(x.shape)} and targets "
                f"'{self.input_names[j]}' {list(t.shape)} must have the same shape"
            )
        if x.ndim == 0:
            return x.reshape(1), t.reshape(1)
        return x, t


@register_op(
    "SigmoidCrossEntropyWithLogits",
    inputs=2,
    input_docs=[("logits", "scores"), ("targets", "targets in [0, 1], shaped as logits")],
    output_docs=[("xentropy", "mean over the last dimension of the elementwise cross-entropy")],
    args=_SIGMOID_XENT_ARGS,
    infer=_infer_sigmoid_xent,
    cost=pointwise_cost(6),
    category="loss",
)
class SigmoidCrossEntropyWithLogits(_SigmoidXentBase):
    """Y = mean over the last dim of max(x, 0) - x * t + log(1 + exp(-|x|)) (stable binary cross-entropy);
    with ``log_D_trick`` of -(2t - 1) log(sigmoid(x)), with ``unjoined_lr_loss`` of -x t + (1 - t) softplus(x)."""

    def run(self) -> None:
        x, t = self.pair(0, 1)
        inner = x.shape[-1]
        if self.mode:
            tmp = self.special_loss(x, t.astype(x.dtype)).astype(x.dtype)
        else:
            tmp = scratch(self, "_tmp", x.shape, x.dtype)
            tmp2 = scratch(self, "_tmp2", x.shape, x.dtype)
            softplus_into(x, tmp, tmp2)
            np.multiply(x, t, out=tmp2)
            tmp -= tmp2
        y = self.output(0, self.input(0).shape[:-1], x.dtype)
        if inner == 0:
            y.fill(np.nan)
            return
        np.sum(tmp, axis=-1, out=y.reshape(x.shape[:-1]))
        y *= x.dtype.type(1.0 / inner)


@register_op(
    "SigmoidCrossEntropyWithLogitsGradient",
    inputs=3,
    input_docs=[("g", "gradient of the output"), ("logits", "forward logits"), ("targets", "forward targets")],
    output_docs=[("dlogits", "gradient of the logits")],
    args=_SIGMOID_XENT_ARGS,
    infer=same_as_input(1),
    category="loss",
    private=True,
)
class SigmoidCrossEntropyWithLogitsGradient(_SigmoidXentBase):
    """dlogits = g / D * (sigmoid(logits) - targets), D the size of the last dimension (with
    ``log_D_trick`` / ``unjoined_lr_loss``, g / D times the derivative of that mode's loss)."""

    def run(self) -> None:
        x, t = self.pair(1, 2)
        g = self.input(0)
        expect_kind(self, 0, g, "float")
        if g.size != math.prod(x.shape[:-1]):
            raise ShapeError(
                f"{self.describe()}: g '{self.input_names[0]}' {list(g.shape)} must have shape {list(x.shape[:-1])}"
            )
        g = g.reshape(x.shape[:-1])
        inner = x.shape[-1]
        dx = self.output(0, self.input(1).shape, x.dtype).reshape(x.shape)
        if self.mode:
            dx[...] = self.special_slope(x, t.astype(x.dtype))
        else:
            sigmoid_into(x, dx)
            dx -= t
        dx *= g[..., None]
        if inner:
            dx *= x.dtype.type(1.0 / inner)


@gradient("SigmoidCrossEntropyWithLogits")
def _sigmoid_xent_grad(g):
    return [g.op("SigmoidCrossEntropyWithLogitsGradient", [g.GO(0), g.I(0), g.I(1)], [g.GI(0)])]


# -- AveragedLoss ------------------------------------------------------------------------------


@register_op(
    "AveragedLoss",
    input_docs=[("X", "per-example losses")],
    output_docs=[("loss", "scalar mean of X")],
    infer=lambda args, ins: [TensorSpec((), ins[0].dtype)],
    cost=pointwise_cost(1),
    category="loss",
)
class AveragedLoss(Operator):
    """loss = mean of all elements of X, as a scalar."""

    def run(self) -> None:
        x = float_input(self, 0)
        y = self.output(0, (), x.dtype)
        y[...] = x.sum() / x.size if x.size else 0.0


@register_op(
    "AveragedLossGradient",
    inputs=2,
    input_docs=[("X", "forward input"), ("dY", "gradient of the scalar loss")],
    output_docs=[("dX", "dY / X.size everywhere")],
    infer=same_as_input(0),
    category="loss",
    private=True,
    input_types="numeric",
)
class AveragedLossGradient(Operator):
    """dX = dY / size(X), broadcast to X's shape."""

    def run(self) -> None:
        x, dy = self.input(0), self.input(1)
        if dy.size != 1:
            raise ShapeError(f"{self.describe()}: dY '{self.input_names[1]}' must be a scalar, got {list(dy.shape)}")
        dx = self.output(0, x.shape, x.dtype)
        if x.size:
            dx.fill(float(dy.reshape(-1)[0]) / x.size)


@gradient("AveragedLoss")
def _averaged_loss_grad(g):
    return [g.op("AveragedLossGradient", [g.I(0), g.GO(0)], [g.GI(0)])]


# -- Accuracy ----------------------------------------------------------------------------------


@register_op(
    "Accuracy",
    inputs=2,
    input_docs=[("predictions", "scores N x D"), ("labels", "N integer classes")],
    output_docs=[("accuracy", "float scalar: fraction of rows whose label is in the top_k scores")],
    args=[Arg("top_k", INT, 1, "a row counts as correct if its label is among the top_k scores")],
    infer=lambda args, ins: [TensorSpec((), np.dtype(np.float32))],
    category="loss",
)
class Accuracy(Operator):
    """Fraction of rows whose label ranks within the top_k scores; ties rank the lower class index first."""

    def setup(self) -> None:
        if self.args.top_k < 1:
            raise self.arg_error(f"argument 'top_k' must be >= 1, got {self.args.top_k}")

    def run(self) -> None:
        x = self.input(0)
        expect_rank(self, 0, x, 2, "predictions")
        n, d = x.shape
        labels = _int_labels(self, 1, n, d)
        out = self.output(0, (), np.dtype(np.float32))
        if n == 0:
            out[...] = np.nan
            return
        score = x[np.arange(n), labels][:, None]
        ahead = (x > score) | ((x == score) & (np.arange(d)[None, :] < labels[:, None]))
        correct = np.count_nonzero(ahead.sum(axis=1) < self.args.top_k)
        out[...] = np.float32(correct) / np.float32(n)


no_gradient("Accuracy")
