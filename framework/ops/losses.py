"""Softmax family, losses and metrics: Softmax, LogSoftmax, SoftmaxWithLoss,
LabelCrossEntropy, CrossEntropy, SigmoidCrossEntropyWithLogits, AveragedLoss,
SquaredL2Distance, L1Distance, Accuracy, with their gradient ops.

Numerics follow Caffe2: softmax subtracts the row maximum; probabilities are
clamped at ``LOG_THRESHOLD`` = 1e-20 before a log (LabelCrossEntropy,
CrossEntropy, SoftmaxWithLoss with ``label_prob``); SoftmaxWithLoss with
integer labels takes the loss from the log-softmax directly (no clamp).
"""

from __future__ import annotations

import numpy as np

from framework.errors import ShapeError, TypeMismatchError
from framework.ops.gradient import gradient, no_gradient
from framework.ops.linalg import canonical_axis
from framework.ops.operator import Operator
from framework.ops.pointwise import float_input, scratch
from framework.ops.registry import register_op
from framework.ops.schema import BOOL, FLOAT, INT, STRING, Arg, TensorSpec, pointwise_cost, same_as_input
from framework.ops.smooth_activations import sigmoid_into

LOG_THRESHOLD = 1e-20  # Caffe2's kLOG_THRESHOLD() for float


def _prod(dims) -> int:
    n = 1
    for d in dims:
        n *= d
    return n


def _rows_at(op: Operator, x: np.ndarray, axis: int) -> tuple[int, int]:
    ax = canonical_axis(axis, x.ndim, f"{op.describe()}: input '{op.input_names[0]}' {list(x.shape)}")
    return _prod(x.shape[:ax]), _prod(x.shape[ax:])


def _softmax_rows(x2: np.ndarray, y2: np.ndarray, rowbuf: np.ndarray, log: bool, tmp: np.ndarray | None = None) -> None:
    """y2 = softmax (or log-softmax) of the rows of x2; y2 may alias x2. rowbuf is (N, 1).

    ``tmp`` (N, D) holds exp() in log mode (allocated when not given)."""
    if x2.shape[1] == 0:
        return
    if log and tmp is None:
        tmp = np.empty_like(y2)
    _softmax_closure(x2, y2, rowbuf, log, tmp)()


def _softmax_closure(x2: np.ndarray, y2: np.ndarray, rowbuf: np.ndarray, log: bool, tmp: np.ndarray | None):
    """A zero-argument callable computing _softmax_rows on these arrays (ufunc reductions: no wrappers)."""
    rmax, rsum, sub, exp = np.maximum.reduce, np.add.reduce, np.subtract, np.exp
    if log:
        ln = np.log

        def log_softmax() -> None:
            rmax(x2, axis=1, keepdims=True, out=rowbuf)
            sub(x2, rowbuf, out=y2)
            exp(y2, out=tmp)
            rsum(tmp, axis=1, keepdims=True, out=rowbuf)
            ln(rowbuf, out=rowbuf)
            sub(y2, rowbuf, out=y2)

        return log_softmax
    div = np.divide

    def softmax() -> None:
        rmax(x2, axis=1, keepdims=True, out=rowbuf)
        sub(x2, rowbuf, out=y2)
        exp(y2, out=y2)
        rsum(y2, axis=1, keepdims=True, out=rowbuf)
        div(y2, rowbuf, out=y2)

    return softmax


_AXIS = Arg("axis", INT, 1, "the input is coerced to 2D (N, D) at this axis; softmax runs over D")


def _softmax_op(name: str, log: bool):
    @register_op(
        name,
        input_docs=[("input", "tensor coerced to 2D at axis")],
        output_docs=[("output", "same shape as input")],
        args=[_AXIS],
        allow_inplace={(0, 0)},
        infer=same_as_input(0),
        cost=pointwise_cost(4),
        category="loss",
        doc=(
            "Log of the softmax over the axes from ``axis`` on: Y = X - max - log(sum(exp(X - max)))."
            if log
            else "Softmax over the axes from ``axis`` on (rows of the 2D coercion), with max subtraction."
        ),
    )
    class _Softmax(Operator):
        def run(self) -> None:
            x = float_input(self, 0)
            n, d = _rows_at(self, x, self.args.axis)
            y = self.output(0, x.shape, x.dtype)
            tmp = scratch(self, "_tmp", (n, d), x.dtype) if log else None
            _softmax_rows(x.reshape(n, d), y.reshape(n, d), scratch(self, "_row", (n, 1), x.dtype), log, tmp)

        def compile(self):
            """run() bound to the current arrays (the net's fast path; see framework.net.program)."""
            x, y = self.input(0), self.outputs[0]._obj._array
            if x.dtype.kind != "f" or y is None or y.shape != x.shape or y.dtype != x.dtype:
                return None
            if not (x.flags.c_contiguous and y.flags.c_contiguous):
                return None  # reshape would copy: the closure must write into y itself
            n, d = _rows_at(self, x, self.args.axis)
            if d == 0:
                return None
            tmp = scratch(self, "_tmp", (n, d), x.dtype) if log else None
            return _softmax_closure(x.reshape(n, d), y.reshape(n, d), scratch(self, "_row", (n, 1), x.dtype), log, tmp)

    _Softmax.__name__ = name
    return _Softmax


Softmax = _softmax_op("Softmax", log=False)
LogSoftmax = _softmax_op("LogSoftmax", log=True)


class _SoftmaxGradBase(Operator):
    log = False

    def run(self) -> None:
        y, dy = float_input(self, 0), float_input(self, 1)
        if y.shape != dy.shape:
            raise ShapeError(
                f"{self.describe()}: Y '{self.input_names[0]}' {list(y.shape)} and dY '{self.input_names[1]}' "
                f"{list(dy.shape)} must have the same shape"
            )
        n, d = _rows_at(self, y, self.args.axis)
        y2, dy2 = y.reshape(n, d), dy.reshape(n, d)
        dx2 = self.output(0, dy.shape, dy.dtype).reshape(n, d)
        row = scratch(self, "_row", (n, 1), dy.dtype)
        tmp = scratch(self, "_tmp", (n, d), dy.dtype)
        if self.log:  # dX = dY - exp(Y) * sum(dY)
            np.sum(dy2, axis=1, keepdims=True, out=row)
            np.exp(y2, out=tmp)
            tmp *= row
            np.subtract(dy2, tmp, out=dx2)
        else:  # dX = Y * (dY - sum(dY * Y))
            np.multiply(dy2, y2, out=tmp)
            np.sum(tmp, axis=1, keepdims=True, out=row)
            np.subtract(dy2, row, out=dx2)
            dx2 *= y2


_GRAD_DOCS = dict(
    inputs=2,
    input_docs=[("Y", "forward output"), ("dY", "gradient of Y")],
    output_docs=[("dX", "gradient of the input")],
    args=[_AXIS],
    allow_inplace={(1, 0)},
    infer=same_as_input(1),
    category="loss",
    private=True,
)


@register_op("SoftmaxGradient", **_GRAD_DOCS)
class SoftmaxGradient(_SoftmaxGradBase):
    """dX = Y * (dY - sum(dY * Y)) over each row."""


@register_op("LogSoftmaxGradient", **_GRAD_DOCS)
class LogSoftmaxGradient(_SoftmaxGradBase):
    """dX = dY - exp(Y) * sum(dY) over each row."""

    log = True


@gradient("Softmax")
def _softmax_grad(g):
    return [g.op("SoftmaxGradient", [g.O(0), g.GO(0)], [g.GI(0)])]


@gradient("LogSoftmax")
def _log_softmax_grad(g):
    return [g.op("LogSoftmaxGradient", [g.O(0), g.GO(0)], [g.GI(0)])]


# -- SoftmaxWithLoss ---------------------------------------------------------------------------


_SWL_ARGS = [
    Arg("scale", FLOAT, 1.0, "the averaged loss is multiplied by this (must be >= 0)"),
    Arg("label_prob", INT, 0, "1: labels are probability distributions (N x D) instead of class indices"),
    Arg("axis", INT, 1, "logits are coerced to 2D (N, D) at this axis"),
    Arg("order", STRING, "NCHW", "only NCHW is supported (as in Caffe2)"),
    Arg("average_by_batch_size", INT, 0, "1: divide a weighted loss by N instead of the sum of the weights"),
    Arg("only_loss", BOOL, False, "the softmax output may be reused elsewhere: the gradient recomputes it from X"),
]


def _infer_swl(args, ins):
    x = ins[0]
    return [x, TensorSpec((), x.dtype)]


class _SoftmaxLossBase(Operator):
    def setup(self) -> None:
        if self.args.scale < 0:
            raise self.arg_error(f"argument 'scale' must be >= 0, got {self.args.scale}")
        if self.args.order != "NCHW":
            raise self.arg_error(f"only order NCHW is supported, got {self.args.order!r}")

    def labels_and_weights(self, n: int, d: int, label_index: int, weight_index: int | None):
        """Check the labels (and weights) against (N, D); returns (labels, weights or None)."""
        t = self.input(label_index)
        name = self.input_names[label_index]
        if self.args.label_prob:
            if t.dtype.kind != "f" or t.size != n * d:
                raise ShapeError(
                    f"{self.describe()}: with label_prob=1 labels '{name}' must be floats of {n} x {d} values, "
                    f"got {t.dtype} {list(t.shape)}"
                )
            labels = t.reshape(n, d)
        else:
            if t.dtype.kind not in "iu":
                raise TypeMismatchError(
                    f"{self.describe()}: labels '{name}' must be integer class indices, got {t.dtype} "
                    "(set label_prob=1 for probability labels)"
                )
            if t.size != n:
                raise ShapeError(
                    f"{self.describe()}: labels '{name}' {list(t.shape)} must hold one class per row, {n} values"
                )
            labels = t.reshape(n)
            if n and (labels.min() < 0 or labels.max() >= d):
                bad = labels[(labels < 0) | (labels >= d)][0]
                raise ShapeError(f"{self.describe()}: label {bad} in '{name}' is out of range [0, {d})")
        weights = None
        if weight_index is not None:
            weights = self.input(weight_index)
            if weights.size != n:
                raise ShapeError(
                    f"{self.describe()}: weights '{self.input_names[weight_index]}' {list(weights.shape)} "
                    f"must hold {n} values, one per row"
                )
            weights = weights.reshape(n)
        return labels, weights

    def total_weight(self, n: int, weights) -> float:
        if weights is None or self.args.average_by_batch_size:
            return float(n)
        return float(weights.sum())

    def _compiled_parts(self, x: np.ndarray, n_inputs: int):
        """Bound pieces of the common case (integer labels, no weights) for compile(), or None.

        Returns (n, d, labels view, check, gather) where check() raises run()'s error for labels
        out of range and gather() writes the flat indices of (row, label) into a reused buffer."""
        if len(self.inputs) != n_inputs or self.args.label_prob or x.dtype.kind != "f":
            return None
        n, d = _rows_at(self, x, self.args.axis)
        t = self.input(1)
        if n == 0 or d == 0 or t.dtype.kind not in "iu" or t.dtype == np.uint64 or t.size != n:
            return None
        if not t.flags.c_contiguous:
            return None
        labels = t.reshape(n)
        rmin, rmax = np.minimum.reduce, np.maximum.reduce

        def check() -> None:
            if rmin(labels) < 0 or rmax(labels) >= d:
                self.labels_and_weights(n, d, 1, None)  # raises the message run() gives

        base, idx, add = np.arange(n, dtype=np.intp) * d, np.empty(n, np.intp), np.add

        def gather() -> np.ndarray:
            add(base, labels, out=idx)
            return idx

        return n, d, labels, check, gather


@register_op(
    "SoftmaxWithLoss",
    inputs=(2, 3),
    outputs=2,
    input_docs=[
        ("logits", "scores, coerced to 2D (N, D) at axis"),
        ("labels", "N integer classes, or N x D probabilities with label_prob=1"),
        ("weight_tensor", "optional per-row weights (N)"),
    ],
    output_docs=[("softmax", "probabilities, shaped as logits"), ("loss", "scalar averaged cross-entropy")],
    args=_SWL_ARGS,
    infer=_infer_swl,
    cost=pointwise_cost(6),
    category="loss",
)
class SoftmaxWithLoss(_SoftmaxLossBase):
    """Softmax followed by the cross-entropy with the labels, averaged over the (weighted) rows and scaled.

    loss = scale * sum_i w_i * (-log softmax(x_i)[label_i]) / sum_i w_i (w_i = 1 without weights).
    """

    def run(self) -> None:
        x = float_input(self, 0)
        n, d = _rows_at(self, x, self.args.axis)
        labels, weights = self.labels_and_weights(n, d, 1, 2 if len(self.inputs) > 2 else None)
        p = self.output(0, x.shape, x.dtype)
        p2 = p.reshape(n, d)
        row = scratch(self, "_row", (n, 1), x.dtype)
        if self.args.label_prob:
            if n and (labels.min() < 0 or np.any(np.abs(labels.sum(1) - 1.0) >= 1e-5)):
                raise ShapeError(
                    f"{self.describe()}: label probabilities '{self.input_names[1]}' must be >= 0 and each row "
                    "must sum to 1 (+/- 1e-5)"
                )
            _softmax_rows(x.reshape(n, d), p2, row, log=False)
            lp = scratch(self, "_lp", (n, d), x.dtype)
            np.maximum(p2, x.dtype.type(LOG_THRESHOLD), out=lp)
            np.log(lp, out=lp)
            lp *= labels
            per_row = -lp.sum(axis=1)
        else:
            _softmax_rows(x.reshape(n, d), p2, row, log=True)  # log-probabilities first
            per_row = -p2[np.arange(n), labels]
            np.exp(p2, out=p2)
        if weights is not None:
            per_row = per_row * weights
        total = self.total_weight(n, weights)
        loss = self.output(1, (), x.dtype)
        loss[...] = float(per_row.sum()) * self.args.scale / total if total != 0.0 else 0.0

    def compile(self):
        """run() bound to the current arrays for integer labels without weights (see framework.net.program)."""
        x = self.input(0)
        parts = self._compiled_parts(x, 2)
        p, loss = self.outputs[0]._obj._array, self.outputs[1]._obj._array
        if parts is None or p is None or p.shape != x.shape or loss is None or loss.shape != ():
            return None
        n, d, _, check, gather = parts
        if not (x.flags.c_contiguous and p.flags.c_contiguous) or np.shares_memory(loss, p):
            return None
        p2 = p.reshape(n, d)
        log_softmax = _softmax_closure(
            x.reshape(n, d), p2, scratch(self, "_row", (n, 1), x.dtype), True, scratch(self, "_tmp", (n, d), x.dtype)
        )
        pf, picked = p2.reshape(-1), np.empty(n, x.dtype)
        take, rsum, exp, scale = np.take, np.add.reduce, np.exp, self.args.scale

        def softmax_with_loss() -> None:
            check()
            log_softmax()
            take(pf, gather(), out=picked)
            loss[...] = -float(rsum(picked)) * scale / n  # run(): sum of -logp[label], / total (= n)
            exp(p2, out=p2)

        return softmax_with_loss


@register_op(
    "SoftmaxWithLossGradient",
    inputs={4, 5},
    input_docs=[
        ("logits", "forward logits"),
        ("labels", "forward labels"),
        ("weight_tensor", "forward weights (present in the 5-input form)"),
        ("softmax", "forward softmax output"),
        ("d_loss", "gradient of the averaged loss (scalar)"),
    ],
    output_docs=[("d_logits", "gradient of the logits")],
    args=_SWL_ARGS,
    infer=same_as_input(0),
    category="loss",
    private=True,
)
class SoftmaxWithLossGradient(_SoftmaxLossBase):
    """d_logits = (softmax - onehot(labels) or label probabilities) * w * scale * d_loss / total weight."""

    def run(self) -> None:
        x = float_input(self, 0)
        weighted = len(self.inputs) == 5
        n, d = _rows_at(self, x, self.args.axis)
        labels, weights = self.labels_and_weights(n, d, 1, 2 if weighted else None)
        p, dl = self.input(len(self.inputs) - 2), self.input(len(self.inputs) - 1)
        if p.size != n * d:
            raise ShapeError(
                f"{self.describe()}: softmax '{self.input_names[-2]}' {list(p.shape)} does not match logits "
                f"{list(x.shape)}"
            )
        if dl.size != 1:
            raise ShapeError(
                f"{self.describe()}: d_loss '{self.input_names[-1]}' must be a scalar, got {list(dl.shape)}"
            )
        dx = self.output(0, x.shape, x.dtype)
        dx2 = dx.reshape(n, d)
        if self.args.only_loss:  # the forward softmax buffer may have been reused: recompute it
            _softmax_rows(x.reshape(n, d), dx2, scratch(self, "_row", (n, 1), x.dtype), log=False)
        else:
            np.copyto(dx2, p.reshape(n, d))
        if self.args.label_prob:
            dx2 -= labels
        else:
            dx2[np.arange(n), labels] -= x.dtype.type(1)
        if weights is not None:
            dx2 *= weights.reshape(n, 1)
        total = self.total_weight(n, weights)
        if total > 0:
            dx2 *= x.dtype.type(self.args.scale / total * float(dl.reshape(-1)[0]))

    def compile(self):
        """run() bound to the current arrays for integer labels without weights (see framework.net.program)."""
        x = self.input(0)
        parts = self._compiled_parts(x, 4)
        if parts is None or self.args.only_loss:
            return None
        n, d, _, check, gather = parts
        p, dl, dx = self.input(2), self.input(3), self.outputs[0]._obj._array
        if p.size != n * d or dl.size != 1 or dx is None or dx.shape != x.shape:
            return None
        if not (p.flags.c_contiguous and dx.flags.c_contiguous) or np.shares_memory(dx, dl):
            return None
        p2, dx2, dlf = p.reshape(n, d), dx.reshape(n, d), dl.reshape(-1)
        dxf, picked, one = dx2.reshape(-1), np.empty(n, x.dtype), x.dtype.type(1)
        copyto, take, put, sub, mul, ftype = np.copyto, np.take, np.put, np.subtract, np.multiply, x.dtype.type
        factor = self.args.scale / n

        def softmax_with_loss_gradient() -> None:
            check()
            copyto(dx2, p2)
            idx = gather()
            take(dxf, idx, out=picked)
            sub(picked, one, out=picked)
            put(dxf, idx, picked)
            mul(dx2, ftype(factor * float(dlf[0])), out=dx2)

        return softmax_with_loss_gradient


@gradient("SoftmaxWithLoss")
def _softmax_with_loss_grad(g):
    ins = [g.I(0), g.I(1), g.O(0), g.GO(1)]
    if len(g.def_.input) == 3:
        ins.insert(2, g.I(2))
    return [g.op("SoftmaxWithLossGradient", ins, [g.GI(0)])]


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
    if n and (t.min() < 0 or t.max() >= d):
        raise ShapeError(f"{op.describe()}: a label in '{name}' is out of range [0, {d})")
    return t


def _infer_rows(args, ins):
    x = ins[0]
    if x.shape is None:
        return [TensorSpec(None, x.dtype)]
    return [TensorSpec((x.shape[0] if len(x.shape) == 2 else 1,), x.dtype)]


@register_op(
    "LabelCrossEntropy",
    inputs=2,
    input_docs=[("X", "probabilities N x D (or D)"), ("label", "N integer classes")],
    output_docs=[("Y", "N cross-entropies -log(X[i, label[i]])")],
    infer=_infer_rows,
    category="loss",
)
class LabelCrossEntropy(Operator):
    """Y[i] = -log(max(X[i, label[i]], 1e-20))."""

    def run(self) -> None:
        x = float_input(self, 0)
        n, d = _rows_2d(self, x)
        labels = _int_labels(self, 1, n, d)
        y = self.output(0, (n,), x.dtype)
        np.maximum(x.reshape(n, d)[np.arange(n), labels], x.dtype.type(LOG_THRESHOLD), out=y)
        np.log(y, out=y)
        np.negative(y, out=y)


@register_op(
    "LabelCrossEntropyGradient",
    inputs=3,
    input_docs=[("X", "forward X"), ("label", "forward labels"), ("dY", "gradient of Y")],
    output_docs=[("dX", "gradient of X")],
    infer=same_as_input(0),
    category="loss",
    private=True,
)
class LabelCrossEntropyGradient(Operator):
    """dX[i, label[i]] = -dY[i] / max(X[i, label[i]], 1e-20); 0 elsewhere."""

    def run(self) -> None:
        x = float_input(self, 0)
        n, d = _rows_2d(self, x)
        labels = _int_labels(self, 1, n, d)
        dy = self.input(2)
        if dy.size != n:
            raise ShapeError(f"{self.describe()}: dY '{self.input_names[2]}' {list(dy.shape)} must hold {n} values")
        dx = self.output(0, x.shape, x.dtype)
        dx.fill(0)
        rows = np.arange(n)
        picked = np.maximum(x.reshape(n, d)[rows, labels], x.dtype.type(LOG_THRESHOLD))
        dx.reshape(n, d)[rows, labels] = -dy.reshape(n) / picked


@gradient("LabelCrossEntropy")
def _label_xent_grad(g):
    return [g.op("LabelCrossEntropyGradient", [g.I(0), g.I(1), g.GO(0)], [g.GI(0)])]


def _soft_labels(op: Operator, x: np.ndarray) -> np.ndarray:
    t = op.input(1)
    if t.shape != x.shape or t.dtype != x.dtype:
        raise ShapeError(
            f"{op.describe()}: label '{op.input_names[1]}' {t.dtype} {list(t.shape)} must match "
            f"X '{op.input_names[0]}' {x.dtype} {list(x.shape)}"
        )
    return t


@register_op(
    "CrossEntropy",
    inputs=2,
    input_docs=[("X", "probabilities N x D (or D)"), ("label", "target distributions, shaped as X")],
    output_docs=[("Y", "N cross-entropies")],
    infer=_infer_rows,
    cost=pointwise_cost(3),
    category="loss",
)
class CrossEntropy(Operator):
    """Y[i] = -sum_j label[i, j] * log(max(X[i, j], 1e-20))."""

    def run(self) -> None:
        x = float_input(self, 0)
        n, d = _rows_2d(self, x)
        t = _soft_labels(self, x)
        tmp = scratch(self, "_tmp", (n, d), x.dtype)
        np.maximum(x.reshape(n, d), x.dtype.type(LOG_THRESHOLD), out=tmp)
        np.log(tmp, out=tmp)
        tmp *= t.reshape(n, d)
        y = self.output(0, (n,), x.dtype)
        np.sum(tmp, axis=1, out=y)
        np.negative(y, out=y)


@register_op(
    "CrossEntropyGradient",
    inputs=3,
    input_docs=[("X", "forward X"), ("label", "forward labels"), ("dY", "gradient of Y")],
    output_docs=[("dX", "gradient of X")],
    infer=same_as_input(0),
    category="loss",
    private=True,
)
class CrossEntropyGradient(Operator):
    """dX = -dY[i] * label / max(X, 1e-20)."""

    def run(self) -> None:
        x = float_input(self, 0)
        n, d = _rows_2d(self, x)
        t = _soft_labels(self, x)
        dy = self.input(2)
        if dy.size != n:
            raise ShapeError(f"{self.describe()}: dY '{self.input_names[2]}' {list(dy.shape)} must hold {n} values")
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
    Arg("log_D_trick", BOOL, False, "not supported here (GAN generator trick); must stay 0"),
    Arg("unjoined_lr_loss", BOOL, False, "not supported here; must stay 0"),
]


class _SigmoidXentBase(Operator):
    def setup(self) -> None:
        for name in ("log_D_trick", "unjoined_lr_loss"):
            if getattr(self.args, name):
                raise self.arg_error(f"argument '{name}' is not supported")

    def pair(self, i: int, j: int) -> tuple[np.ndarray, np.ndarray]:
        """Logits and targets (a 0-d pair is viewed as one row of one value)."""
        x, t = float_input(self, i), self.input(j)
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
    """Y = mean over the last dim of max(x, 0) - x * t + log(1 + exp(-|x|)) (stable binary cross-entropy)."""

    def run(self) -> None:
        x, t = self.pair(0, 1)
        inner = x.shape[-1]
        tmp = scratch(self, "_tmp", x.shape, x.dtype)
        tmp2 = scratch(self, "_tmp2", x.shape, x.dtype)
        np.abs(x, out=tmp)
        np.negative(tmp, out=tmp)
        np.exp(tmp, out=tmp)
        np.log1p(tmp, out=tmp)
        np.maximum(x, x.dtype.type(0), out=tmp2)
        tmp += tmp2
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
    """dlogits = g / D * (sigmoid(logits) - targets), D the size of the last dimension."""

    def run(self) -> None:
        x, t = self.pair(1, 2)
        g = self.input(0)
        if g.size != _prod(x.shape[:-1]):
            raise ShapeError(
                f"{self.describe()}: g '{self.input_names[0]}' {list(g.shape)} must have shape {list(x.shape[:-1])}"
            )
        g = g.reshape(x.shape[:-1])
        inner = x.shape[-1]
        dx = self.output(0, self.input(1).shape, x.dtype).reshape(x.shape)
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


# -- distances ---------------------------------------------------------------------------------


def _rows_of(x: np.ndarray) -> tuple[int, int]:
    n = x.shape[0] if x.ndim else 1
    return n, (x.size // n if n else 0)


def _check_pair(op: Operator) -> tuple[np.ndarray, np.ndarray, int, int]:
    x, y = float_input(op, 0), float_input(op, 1)
    if x.shape != y.shape or x.dtype != y.dtype:
        raise ShapeError(
            f"{op.describe()}: X '{op.input_names[0]}' {x.dtype} {list(x.shape)} and Y '{op.input_names[1]}' "
            f"{y.dtype} {list(y.shape)} must have the same shape and dtype"
        )
    n, d = _rows_of(x)
    return x.reshape(n, d), y.reshape(n, d), n, d


def _infer_distance(args, ins):
    x = ins[0]
    if x.shape is None:
        return [TensorSpec(None, x.dtype)]
    return [TensorSpec((x.shape[0] if len(x.shape) else 1,), x.dtype)]


def _distance_op(name: str, doc: str, l1: bool):
    @register_op(
        name,
        inputs=2,
        input_docs=[("X", "tensor, rows along dim 0"), ("Y", "tensor shaped as X")],
        output_docs=[("Z", "one distance per row (X.dims[0])")],
        infer=_infer_distance,
        cost=pointwise_cost(3),
        category="loss",
        doc=doc,
    )
    class _Distance(Operator):
        def run(self) -> None:
            x2, y2, n, d = _check_pair(self)
            diff = scratch(self, "_diff", (n, d), x2.dtype)
            np.subtract(x2, y2, out=diff)
            z = self.output(0, (n,), x2.dtype)
            if l1:
                np.abs(diff, out=diff)
                np.sum(diff, axis=1, out=z)
            else:
                np.einsum("ij,ij->i", diff, diff, out=z)
                z *= x2.dtype.type(0.5)

    _Distance.__name__ = name
    return _Distance


SquaredL2Distance = _distance_op("SquaredL2Distance", "Z[i] = 0.5 * ||X[i] - Y[i]||^2 per row.", l1=False)
L1Distance = _distance_op("L1Distance", "Z[i] = sum_j |X[i, j] - Y[i, j]| per row.", l1=True)


def _distance_grad_op(name: str, doc: str, l1: bool):
    @register_op(
        name,
        inputs=3,
        outputs=2,
        input_docs=[("X", "forward X"), ("Y", "forward Y"), ("dDistance", "gradient of Z")],
        output_docs=[("dX", "gradient of X"), ("dY", "gradient of Y")],
        infer=lambda args, ins: [ins[0], ins[1]],
        category="loss",
        private=True,
        doc=doc,
    )
    class _DistanceGrad(Operator):
        def run(self) -> None:
            x2, y2, n, d = _check_pair(self)
            dz = self.input(2)
            if dz.shape != (n,):
                raise ShapeError(
                    f"{self.describe()}: dDistance '{self.input_names[2]}' {list(dz.shape)} must have shape [{n}]"
                )
            x = self.input(0)
            dx2 = self.output(0, x.shape, x.dtype).reshape(n, d)
            dy2 = self.output(1, x.shape, x.dtype).reshape(n, d)
            np.subtract(x2, y2, out=dx2)
            if l1:  # subgradient: sign of the difference, 0 within 1e-12 (as Caffe2)
                eps = x2.dtype.type(1e-12)
                np.copyto(dx2, 0, where=np.abs(dx2) <= eps)
                np.sign(dx2, out=dx2)
            dx2 *= dz.reshape(n, 1)
            np.negative(dx2, out=dy2)

    _DistanceGrad.__name__ = name
    return _DistanceGrad


SquaredL2DistanceGradient = _distance_grad_op(
    "SquaredL2DistanceGradient", "dX = (X - Y) * dZ, dY = -dX (per row).", l1=False
)
L1DistanceGradient = _distance_grad_op(
    "L1DistanceGradient", "dX = sign(X - Y) * dZ (0 where |X - Y| <= 1e-12), dY = -dX.", l1=True
)


@gradient("SquaredL2Distance")
def _sql2_grad(g):
    return [g.op("SquaredL2DistanceGradient", [g.I(0), g.I(1), g.GO(0)], [g.GI(0), g.GI(1)])]


@gradient("L1Distance")
def _l1_grad(g):
    return [g.op("L1DistanceGradient", [g.I(0), g.I(1), g.GO(0)], [g.GI(0), g.GI(1)])]


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
        if x.ndim != 2:
            raise ShapeError(f"{self.describe()}: predictions '{self.input_names[0]}' must be 2D, got {list(x.shape)}")
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
