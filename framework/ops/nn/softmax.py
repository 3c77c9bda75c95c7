"""The softmax family: Softmax, LogSoftmax and SoftmaxWithLoss (softmax + cross-entropy), with
their gradient ops.

Numerics follow Caffe2: softmax subtracts the row maximum; SoftmaxWithLoss with integer labels
takes the loss from the log-softmax directly (no clamp), with ``label_prob`` it clamps the
probabilities at ``LOG_THRESHOLD`` = 1e-20 before the log (as the cross entropies of
``framework.ops.nn.losses``).
"""

from __future__ import annotations

import numpy as np

from framework.errors import ShapeError, TypeMismatchError
from framework.kernels import bn_train
from framework.ops.gradient import gradient
from framework.ops.nn.axes import coerce_2d
from framework.ops.nn.losses import LOG_THRESHOLD
from framework.ops.operator import Operator
from framework.ops.pointwise import float_input, scratch
from framework.ops.registry import register_op
from framework.ops.schema import BOOL, FLOAT, INT, STRING, Arg, TensorSpec, pointwise_cost, same_as_input
from framework.ops.validation import expect_same_shape
from framework.runtime.parallel import run_parallel, work_split


def _rows_at(op: Operator, x: np.ndarray, axis: int) -> tuple[int, int]:
    return coerce_2d(x.shape, axis, f"{op.describe()}: input '{op.input_names[0]}' {list(x.shape)}")


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


def _softmax_xent_closure(x2: np.ndarray, p2: np.ndarray, rows: np.ndarray, picked: np.ndarray):
    """A callable ``f(idx)``: p2 = softmax of the rows of x2, and picked[i] = log p2[i, label_i].

    ``idx`` holds the flat indices of (row, label) in x2 (which must be C-contiguous); p2 may alias x2.
    ``rows`` is a (2, N, 1) scratch. One exp pass: p = exp(x - max) / sum, and the label's log-probability
    from x itself (x[label] - max - log(sum)), not from a second exp of a log-softmax."""
    rmax, rsum, sub, exp, ln, div, take = (
        np.maximum.reduce,
        np.add.reduce,
        np.subtract,
        np.exp,
        np.log,
        np.divide,
        np.take,
    )
    xf, rowmax, rowsum = x2.reshape(-1), rows[0], rows[1]
    rm, rs = rowmax.reshape(-1), rowsum.reshape(-1)

    def softmax_xent(idx: np.ndarray) -> None:
        take(xf, idx, out=picked)  # before p2 (possibly x2 itself) is written
        rmax(x2, axis=1, keepdims=True, out=rowmax)
        sub(x2, rowmax, out=p2)
        exp(p2, out=p2)
        rsum(p2, axis=1, keepdims=True, out=rowsum)
        div(p2, rowsum, out=p2)
        sub(picked, rm, out=picked)
        ln(rs, out=rs)
        sub(picked, rs, out=picked)

    return softmax_xent


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
        _bound = None  # (x, y, closure): the closure of the last run's arrays

        def run(self) -> None:
            x = float_input(self, 0)
            y = self.output(0, x.shape, x.dtype)
            bound = self._bound
            if bound is not None and bound[0] is x and bound[1] is y:
                bound[2]()  # the same arrays as the last run: no shapes, scratch or closure to redo
                return
            n, d = _rows_at(self, x, self.args.axis)
            tmp = scratch(self, "_tmp", (n, d), x.dtype) if log else None
            _softmax_rows(x.reshape(n, d), y.reshape(n, d), scratch(self, "_row", (n, 1), x.dtype), log, tmp)
            closure = self.compile()  # the net's fast path's closure over these arrays serves the next runs
            self._bound = (x, y, closure) if closure is not None else None

        def compile(self):
            """run() bound to the current arrays (the net's fast path; see framework.net.program)."""
            x, y = self.input(0), self.outputs[0].array
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
        expect_same_shape(self, 0, y, 1, dy)
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
        elif n and d:
            picked = np.empty(n, x.dtype)
            x2 = np.ascontiguousarray(x).reshape(n, d)
            job = bn_train.softmax_xent_job(x2, p2, labels, picked)
            if job is not None:
                job()
            else:
                idx = np.arange(n, dtype=np.intp) * d + labels
                _softmax_xent_closure(x2, p2, scratch(self, "_rows", (2, n, 1), x.dtype), picked)(idx)
            per_row = -picked
        else:
            per_row = np.zeros(n, x.dtype)
        if weights is not None:
            per_row = per_row * weights
        total = self.total_weight(n, weights)
        loss = self.output(1, (), x.dtype)
        loss[...] = float(per_row.sum()) * self.args.scale / total if total != 0.0 else 0.0

    def compile(self):
        """run() bound to the current arrays for integer labels without weights (see framework.net.program)."""
        x = self.input(0)
        parts = self._compiled_parts(x, 2)
        p, loss = self.outputs[0].array, self.outputs[1].array
        if parts is None or p is None or p.shape != x.shape or loss is None or loss.shape != ():
            return None
        n, d, labels, check, gather = parts
        if not (x.flags.c_contiguous and p.flags.c_contiguous) or np.shares_memory(loss, p):
            return None
        picked = np.empty(n, x.dtype)
        x2, p2, rows = x.reshape(n, d), p.reshape(n, d), scratch(self, "_rows", (2, n, 1), x.dtype)
        rsum, scale = np.add.reduce, self.args.scale
        job = bn_train.softmax_xent_job(x2, p2, labels, picked)
        if job is not None:  # one compiled pass per row, rows over the intra-op threads

            def softmax_with_loss_compiled() -> None:
                check()
                job()
                loss[...] = -float(rsum(picked)) * scale / n

            return softmax_with_loss_compiled
        split = work_split(n, n * d)
        if split is not None:  # rows over the intra-op threads: each row's values as on one thread
            tasks = [_xent_rows(x2, p2, rows, picked, labels, r0, r1) for r0, r1 in split]

            def softmax_with_loss_parallel() -> None:
                check()
                run_parallel(tasks, steal=True)
                loss[...] = -float(rsum(picked)) * scale / n

            return softmax_with_loss_parallel
        xent = _softmax_xent_closure(x2, p2, rows, picked)

        def softmax_with_loss() -> None:
            check()
            xent(gather())
            loss[...] = -float(rsum(picked)) * scale / n  # run(): sum of -logp[label], / total (= n)

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
        total = self.total_weight(n, weights)
        if not (self.args.only_loss or self.args.label_prob or weights is not None) and total > 0:
            k = x.dtype.type(self.args.scale / total * float(dl.reshape(-1)[0]))
            np.multiply(p.reshape(n, d), k, out=dx2)  # k * p, then k * (p - 1) at the labels (one row each)
            dx2[np.arange(n), labels] -= k
            return
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
        if total > 0:
            dx2 *= x.dtype.type(self.args.scale / total * float(dl.reshape(-1)[0]))

    def compile(self):
        """run() bound to the current arrays for integer labels without weights (see framework.net.program)."""
        x = self.input(0)
        parts = self._compiled_parts(x, 4)
        if parts is None or self.args.only_loss:
            return None
        n, d, _, check, gather = parts
        p, dl, dx = self.input(2), self.input(3), self.outputs[0].array
        if p.size != n * d or dl.size != 1 or dx is None or dx.shape != x.shape:
            return None
        if not (p.flags.c_contiguous and dx.flags.c_contiguous) or np.shares_memory(dx, dl):
            return None
        p2, dx2, dlf = p.reshape(n, d), dx.reshape(n, d), dl.reshape(-1)
        dxf, picked = dx2.reshape(-1), np.empty(n, x.dtype)
        take, put, sub, mul, ftype = np.take, np.put, np.subtract, np.multiply, x.dtype.type
        factor = self.args.scale / n
        split = work_split(n, n * d)
        if split is not None:  # rows over the intra-op threads (elementwise: the same values)
            k_cell = np.zeros((), x.dtype)
            labels = parts[2]
            tasks = [_xent_grad_rows(p2, dx2, labels, k_cell, r0, r1) for r0, r1 in split]

            def softmax_with_loss_gradient_parallel() -> None:
                check()
                k_cell[...] = ftype(factor * float(dlf[0]))
                run_parallel(tasks, steal=True)

            return softmax_with_loss_gradient_parallel

        def softmax_with_loss_gradient() -> None:
            check()
            k = ftype(factor * float(dlf[0]))
            mul(p2, k, out=dx2)  # one pass: dx = k * p, then k * (p - 1) at the labels
            idx = gather()
            take(dxf, idx, out=picked)
            sub(picked, k, out=picked)
            put(dxf, idx, picked)

        return softmax_with_loss_gradient


def _xent_rows(x2, p2, rows, picked, labels, r0: int, r1: int):
    """Rows r0:r1 of SoftmaxWithLoss's compiled pass: their softmax into p2 and log-probabilities into picked."""
    d = x2.shape[1]
    xent = _softmax_xent_closure(x2[r0:r1], p2[r0:r1], rows[:, r0:r1], picked[r0:r1])
    lab, base, idx, add = labels[r0:r1], np.arange(r1 - r0, dtype=np.intp) * d, np.empty(r1 - r0, np.intp), np.add

    def part() -> None:
        add(base, lab, out=idx)
        xent(idx)

    return part


def _xent_grad_rows(p2, dx2, labels, k_cell, r0: int, r1: int):
    """Rows r0:r1 of SoftmaxWithLossGradient's compiled pass: dx = k p, then k (p - 1) at the labels."""
    p, dx, lab, d = p2[r0:r1], dx2[r0:r1], labels[r0:r1], p2.shape[1]
    dxf, base = dx.reshape(-1), np.arange(r1 - r0, dtype=np.intp) * d
    idx, picked = np.empty(r1 - r0, np.intp), np.empty(r1 - r0, dx2.dtype)
    mul, sub, add, take, put = np.multiply, np.subtract, np.add, np.take, np.put

    def part() -> None:
        mul(p, k_cell, out=dx)
        add(base, lab, out=idx)
        take(dxf, idx, out=picked)
        sub(picked, k_cell, out=picked)
        put(dxf, idx, picked)

    return part


@gradient("SoftmaxWithLoss")
def _softmax_with_loss_grad(g):
    ins = [g.I(0), g.I(1), g.O(0), g.GO(1)]
    if len(g.def_.input) == 3:
        ins.insert(2, g.I(2))
    return [g.op("SoftmaxWithLossGradient", ins, [g.GI(0)])]
