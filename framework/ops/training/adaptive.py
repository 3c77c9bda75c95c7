"""Adaptive-rate update ops: Adagrad, SparseAdagrad, RowWiseSparseAdagrad, Adam, SparseAdam
and RmsProp (Caffe2's adagrad/adam/rmsprop ops), over the base in ``optimizers``."""

from __future__ import annotations

import math

import numpy as np

from framework.errors import ArgumentError, ShapeError
from framework.ops.gradient import should_not_do_gradient
from framework.ops.schema import FLOAT, Arg
from framework.ops.training.optimizers import UpdateOp, copy_through, update_op
from framework.ops.training.sparse_optimizers import adagrad_rows, rowwise_adagrad_rows

_WEIGHT_DECAY = Arg("weight_decay", FLOAT, 0.0, "L2 penalty: the step uses grad + weight_decay * param")
_ADAGRAD_ARGS = [
    Arg("epsilon", FLOAT, 1e-5, "added to the root of the accumulated squares"),
    Arg("decay", FLOAT, 1.0, "decay of the accumulated squares"),
    _WEIGHT_DECAY,
]


@update_op(
    "Adagrad",
    (0, 1, 2, 2),
    inputs=4,
    outputs=(2, 4),
    args=_ADAGRAD_ARGS,
    input_docs=[("param", "parameter"), ("moment", "sum of squared gradients"), ("grad", "gradient"), ("lr", "rate")],
    output_docs=[
        ("output_param", "updated parameter"),
        ("output_moment", "updated squared sum"),
        ("output_effective_lr", "optional: lr / (sqrt(moment') + epsilon)"),
        ("output_update", "optional: the step added to the parameter"),
    ],
    allow_inplace={(0, 0), (1, 1)},
    input_types="float",
    same_type=[(0, 1, 2)],
)
class Adagrad(UpdateOp):
    """``g~ = g + weight_decay * param``; ``h' = decay * h + g~^2``;
    ``param' = param + lr * g~ / (sqrt(h') + epsilon)`` (Caffe2's adagrad_op.h).

    With 3 or 4 outputs it also writes the effective rate ``lr / (sqrt(h') + epsilon)``
    and the update ``effective_lr * g~``. The optimizer builder passes a negative ``lr``.
    """

    def run(self) -> None:
        self.same_shape(0, 1)
        self.same_shape(0, 2)
        p, h, g, lr = self.input(0), self.input(1), self.input(2), self.scalar(3)
        if self.args.weight_decay != 0.0:
            gd = self.scratch(1, g.shape, g.dtype)
            np.multiply(p, self.args.weight_decay, out=gd)
            gd += g
            g = gd
        nh = self.out_like(1, 1)
        t = self.scratch(0, g.shape, g.dtype)
        np.multiply(g, g, out=t)
        if self.args.decay != 1.0:
            np.multiply(h, self.args.decay, out=nh)
            nh += t
        else:
            np.add(h, t, out=nh)
        np.sqrt(nh, out=t)
        t += self.args.epsilon
        if self.args.num_outputs > 2:
            eff = self.output(2, g.shape, g.dtype)
            np.divide(lr, t, out=eff)
            upd = self.output(3, g.shape, g.dtype) if self.args.num_outputs > 3 else t
            np.multiply(eff, g, out=upd)
            np.add(p, upd, out=self.out_like(0, 0))
            return
        np.divide(g, t, out=t)
        t *= lr
        np.add(p, t, out=self.out_like(0, 0))


def _sparse_adagrad_op(name: str, moment_doc: str, output_moment_doc: str):
    """update_op of the sparse Adagrad ops (param, moment, indices, grad rows, lr)."""
    return update_op(
        name,
        (0, 1),
        inputs=5,
        outputs=2,
        args=[_ADAGRAD_ARGS[0], _WEIGHT_DECAY],
        input_docs=[
            ("param", "parameter"),
            ("moment", moment_doc),
            ("indices", "rows to update"),
            ("grad", "gradient rows"),
            ("lr", "rate"),
        ],
        output_docs=[("output_param", "updated parameter"), ("output_moment", output_moment_doc)],
        allow_inplace={(0, 0), (1, 1)},
        input_types=["float", "float", "int", "float", "numeric"],
    )


class _SparseAdagradBase(UpdateOp):
    """The sparse Adagrad skeleton: check the moment, take the rows, copy the outputs
    through, then ``apply`` row after row (repeated indices apply one after another)."""

    def run(self) -> None:
        idx, g = self.rows(0, 2, 3)
        self.check_moment()
        lr = self.scalar(4)
        p, h = copy_through(self, [(0, 0), (1, 1)])
        self.apply(idx, g, lr, p, h, self.args.epsilon, self.args.weight_decay)


@_sparse_adagrad_op("SparseAdagrad", "sum of squared gradients", "updated squared sum")
class SparseAdagrad(_SparseAdagradBase):
    """Adagrad on the rows ``indices`` only; repeated indices apply one after another.
    ``weight_decay`` adds ``weight_decay * param[row]`` to each gradient row, as Caffe2."""

    def check_moment(self) -> None:
        self.same_shape(0, 1)

    def apply(self, idx, g, lr, p, h, eps, wd) -> None:
        adagrad_rows(p, h, idx, g, float(lr), eps, wd)


@_sparse_adagrad_op("RowWiseSparseAdagrad", "one accumulated mean square per row (1-D)", "updated per-row moments")
class RowWiseSparseAdagrad(_SparseAdagradBase):
    """Adagrad with one accumulator per row: ``g~ = g_r + weight_decay * param[r]``;
    ``h[r] += mean(g~^2)``; ``param[r] += g~ * lr / (sqrt(h[r]) + epsilon)``."""

    def check_moment(self) -> None:
        p_in, m_in = self.input(0), self.input(1)
        if m_in.reshape(-1).shape[0] != p_in.shape[0]:
            raise ShapeError(
                f"{self.describe()}: moment '{self.input_names[1]}' has shape {list(m_in.shape)}, expected "
                f"one value per row of '{self.input_names[0]}' ([{p_in.shape[0]}])"
            )

    def apply(self, idx, g, lr, p, h, eps, wd) -> None:
        rowwise_adagrad_rows(p, h.reshape(-1), idx, g, float(lr), eps, wd)


_ADAM_ARGS = [
    Arg("beta1", FLOAT, 0.9, "decay of the first moment"),
    Arg("beta2", FLOAT, 0.999, "decay of the second moment"),
    Arg("epsilon", FLOAT, 1e-5, "added to the root of the second moment"),
]


def _adam_correction(op: UpdateOp, it: np.ndarray) -> float:
    """Adam's bias correction for iteration ``it``; ArgumentError (before any output is written: the
    ops compute it first) for a negative iteration or betas that make it undefined."""
    t = float(it) + 1.0
    if not t >= 1.0 or not math.isfinite(t):
        raise ArgumentError(f"{op.describe()}: iteration '{op.input_names[-1]}' is {float(it)}, it must be >= 0")
    b1, b2 = op.args.beta1, op.args.beta2
    try:
        num, den = 1.0 - b2**t, 1.0 - b1**t
    except OverflowError:
        num = den = float("nan")
    if isinstance(num, complex) or isinstance(den, complex):  # a negative beta to a fractional power
        num = den = float("nan")
    if not (num >= 0.0 and den != 0.0 and math.isfinite(num) and math.isfinite(den)):
        raise ArgumentError(
            f"{op.describe()}: beta1={b1}, beta2={b2} at iteration {float(it)} make the bias correction "
            "undefined (betas must lie in [0, 1))"
        )
    return math.sqrt(num) / den


def _adam_op(name: str, like: tuple[int, ...], more_inputs: list, step_doc: str):
    """update_op of Adam / SparseAdam: (param, moment_1, moment_2, *more_inputs) in,
    (param, moment_1, moment_2[, step]) out, the first three in place. Inputs are floats of the
    parameter's type but for ``indices`` (integers) and ``iter`` (a number)."""
    roles = ["param", "moment_1", "moment_2"] + [r for r, _ in more_inputs]
    kinds = {"indices": "int", "iter": "numeric", "lr": "float"}
    return update_op(
        name,
        like,
        inputs=3 + len(more_inputs),
        outputs=(3, 4),
        args=_ADAM_ARGS,
        input_docs=[("param", "parameter"), ("moment_1", "first moment"), ("moment_2", "second moment"), *more_inputs],
        output_docs=[
            ("output_param", "updated parameter"),
            ("output_moment_1", "updated first moment"),
            ("output_moment_2", "updated second moment"),
            ("output_grad", step_doc),
        ],
        allow_inplace={(0, 0), (1, 1), (2, 2)},
        input_types=[kinds.get(r, "float") for r in roles],
        same_type=[tuple(i for i, r in enumerate(roles) if r in ("param", "moment_1", "moment_2", "grad"))],
    )


@_adam_op(
    "Adam",
    (0, 1, 2, 3),
    [
        ("grad", "gradient"),
        ("lr", "rate (negative from the builder)"),
        ("iter", "iteration counter (int64, one element)"),
    ],
    "optional: the effective gradient (the step divided by lr)",
)
class Adam(UpdateOp):
    """``m1' = beta1 m1 + (1 - beta1) g``; ``m2' = beta2 m2 + (1 - beta2) g^2``;
    ``param' = param + lr * sqrt(1 - beta2^t) / (1 - beta1^t) * m1' / (sqrt(m2') + epsilon)``
    with ``t = iter + 1``. The optional 4th output is Caffe2's effective gradient
    ``sqrt(1 - beta2^t) / (1 - beta1^t) * m1' / (sqrt(m2') + epsilon)`` (without lr)."""

    def run(self) -> None:
        for j in (1, 2, 3):
            self.same_shape(0, j)
        p, m1, m2, g = (self.input(i) for i in range(4))
        lr, it = self.scalar(4), self.scalar(5)
        b1, b2 = self.args.beta1, self.args.beta2
        corr = _adam_correction(self, it)  # may refuse: before any output is touched
        nm1, nm2 = self.out_like(1, 1), self.out_like(2, 2)
        t = self.scratch(0, g.shape, g.dtype)
        np.multiply(m1, b1, out=nm1)
        np.multiply(g, 1.0 - b1, out=t)
        nm1 += t
        np.multiply(g, g, out=t)
        t *= 1.0 - b2
        np.multiply(m2, b2, out=nm2)
        nm2 += t
        np.sqrt(nm2, out=t)
        t += self.args.epsilon
        np.divide(nm1, t, out=t)
        if self.args.num_outputs > 3:
            ng = self.out_like(3, 3)
            np.multiply(t, corr, out=ng)
            np.multiply(ng, lr, out=t)
        else:
            t *= float(lr) * corr
        np.add(p, t, out=self.out_like(0, 0))


@_adam_op(
    "SparseAdam",
    (0, 1, 2, 4),
    [("indices", "rows to update"), ("grad", "gradient rows"), ("lr", "rate"), ("iter", "iteration counter")],
    "optional: the effective gradient of the rows (the step divided by lr)",
)
class SparseAdam(UpdateOp):
    """Adam on the rows ``indices`` only (rows applied one after another); the optional
    4th output is each row's effective gradient (without lr), as Caffe2's."""

    def run(self) -> None:
        self.same_shape(0, 1)
        self.same_shape(0, 2)
        idx, g = self.rows(0, 3, 4)
        lr, it = self.scalar(5), self.scalar(6)
        corr = _adam_correction(self, it)  # may refuse: before any output is touched
        p, m1, m2 = copy_through(self, [(0, 0), (1, 1), (2, 2)])
        b1, b2, eps = self.args.beta1, self.args.beta2, self.args.epsilon
        out_g = self.out_like(3, 4) if self.args.num_outputs > 3 else None
        for k in range(idx.size):
            r = idx[k]
            gk = g[k]
            m1[r] = m1[r] * b1 + gk * (1.0 - b1)
            m2[r] = m2[r] * b2 + gk * gk * (1.0 - b2)
            ng = corr * m1[r] / (np.sqrt(m2[r]) + eps)
            if out_g is not None:
                out_g.reshape(g.shape)[k] = ng
            p[r] += lr * ng


@update_op(
    "RmsProp",
    (0, 1, 2),
    inputs=4,
    outputs=3,
    args=[
        Arg("decay", FLOAT, 0.9, "decay of the mean square"),
        Arg("momentum", FLOAT, 0.0, "momentum coefficient"),
        Arg("epsilon", FLOAT, 1e-5, "added under the root"),
    ],
    input_docs=[("grad", "gradient"), ("mean_squares", "running mean square"), ("mom", "momentum"), ("lr", "rate")],
    output_docs=[("output_grad", "the step"), ("output_mean_squares", "updated"), ("output_mom", "updated")],
    allow_inplace={(0, 0), (1, 1), (2, 2)},
    input_types="float",
    same_type=[(0, 1, 2)],
)
class RmsProp(UpdateOp):
    """``ms' = ms + (1 - decay) (g^2 - ms)``; ``mom' = momentum * mom + lr * g / sqrt(epsilon + ms')``;
    ``g' = mom'`` (subtract it from the parameter)."""

    def run(self) -> None:
        self.same_shape(0, 1)
        self.same_shape(0, 2)
        g, ms, mom, lr = self.input(0), self.input(1), self.input(2), self.scalar(3)
        nms, nmom, ng = self.out_like(1, 1), self.out_like(2, 2), self.out_like(0, 0)
        t = self.scratch(0, g.shape, g.dtype)
        np.multiply(g, g, out=t)
        t -= ms
        t *= 1.0 - self.args.decay
        np.add(ms, t, out=nms)
        np.add(nms, self.args.epsilon, out=t)
        np.sqrt(t, out=t)
        np.divide(g, t, out=t)
        t *= lr
        np.multiply(mom, self.args.momentum, out=nmom)
        nmom += t
        np.copyto(ng, nmom)


should_not_do_gradient("Adagrad", "SparseAdagrad", "RowWiseSparseAdagrad", "Adam", "SparseAdam", "RmsProp")
