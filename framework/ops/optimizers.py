"""Optimizer update ops (Caffe2's ``caffe2/sgd``): MomentumSGD, MomentumSGDUpdate,
Adagrad, SparseAdagrad, RowWiseSparseAdagrad, Adam, SparseAdam, RmsProp and
ScatterWeightedSum.

Inputs, outputs, in-place pairs and argument defaults are Caffe2's. The
learning rate is a one-element tensor (the output of ``LearningRate``); its
sign is the caller's business (the optimizer builders pass a negative rate to
the ops that *add* ``lr * step``: Adagrad, Adam, WeightedSum). These ops are
updates, never differentiated (``should_not_do_gradient``).
"""

from __future__ import annotations

import math

import numpy as np

from framework.errors import ShapeError
from framework.ops.gradient import should_not_do_gradient
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import FLOAT, INT, UNKNOWN, Arg, TensorSpec


def _like_inputs(*idx: int):
    """Output k is shaped and typed as input ``idx[k]``."""

    def infer(args, ins: list[TensorSpec]) -> list[TensorSpec]:
        return [ins[i] if i < len(ins) else UNKNOWN for i in idx][: args.num_outputs]

    infer.__doc__ = "outputs shaped as inputs " + ", ".join(map(str, idx))
    return infer


class _Update(Operator):
    """Shared checks and scratch buffers of the update ops."""

    def scratch(self, k: int, shape: tuple, dtype: np.dtype) -> np.ndarray:
        """A reusable temporary buffer (allocated once per shape/dtype)."""
        bufs = self.__dict__.setdefault("_scratch", {})
        buf = bufs.get(k)
        if buf is None or buf.shape != shape or buf.dtype != dtype:
            buf = bufs[k] = np.empty(shape, dtype)
        return buf

    def same_shape(self, i: int, j: int) -> None:
        a, b = self.input(i), self.input(j)
        if a.shape != b.shape:
            raise ShapeError(
                f"{self.describe()}: input {j} ('{self.input_names[j]}') has shape {list(b.shape)}, expected "
                f"the shape of input {i} ('{self.input_names[i]}') {list(a.shape)}"
            )

    def scalar(self, i: int) -> np.ndarray:
        """Input ``i`` as a 0-d view; it must hold exactly one element."""
        x = self.input(i)
        if x.size != 1:
            raise ShapeError(
                f"{self.describe()}: input {i} ('{self.input_names[i]}') must hold one element "
                f"(a learning rate or counter), got shape {list(x.shape)}"
            )
        return x.reshape(())

    def rows(self, param: int, indices: int, grad: int) -> tuple[np.ndarray, np.ndarray]:
        """Indices (flattened) and the gradient as [n, row...], checked against the parameter."""
        p, idx, g = self.input(param), self.input(indices), self.input(grad)
        idx = idx.reshape(-1)
        if g.size != idx.size * int(np.prod(p.shape[1:], dtype=np.int64)):
            raise ShapeError(
                f"{self.describe()}: gradient '{self.input_names[grad]}' has shape {list(g.shape)}, expected "
                f"{[idx.size] + list(p.shape[1:])} ({idx.size} indices, rows of '{self.input_names[param]}')"
            )
        if idx.size and (idx.min() < 0 or idx.max() >= p.shape[0]):
            raise ShapeError(
                f"{self.describe()}: indices '{self.input_names[indices]}' out of range [0, {p.shape[0]}) "
                f"of '{self.input_names[param]}'"
            )
        return idx, g.reshape((idx.size,) + p.shape[1:])

    def out_like(self, k: int, i: int) -> np.ndarray:
        x = self.input(i)
        return self.output(k, x.shape, x.dtype)


_MOMENTUM_ARGS = [
    Arg("momentum", FLOAT, 0.0, "momentum coefficient"),
    Arg("nesterov", INT, 0, "1 for Nesterov accelerated gradient"),
]


def _momentum_step(op: _Update, g, m, lr, ng, nm) -> None:
    """ng, nm from g, m (any of them may alias): Caffe2's momentum_sgd_compute."""
    mu = op.args.momentum
    np.multiply(g, lr, out=ng)  # lr * g
    np.multiply(m, mu, out=nm)  # momentum * m
    nm += ng  # new moment = momentum * m + lr * g
    if op.args.nesterov:
        # (1 + mu) * m_new - mu * m_old == lr * g + mu * m_new
        t = op.scratch(0, nm.shape, nm.dtype)
        np.multiply(nm, mu, out=t)
        ng += t
    else:
        np.copyto(ng, nm)


@register_op(
    "MomentumSGD",
    inputs=3,
    outputs=2,
    args=_MOMENTUM_ARGS,
    input_docs=[("grad", "gradient"), ("moment", "momentum history"), ("lr", "learning rate (one element)")],
    output_docs=[("output_grad", "the step to subtract"), ("output_moment", "updated momentum")],
    allow_inplace={(0, 0), (1, 1)},
    infer=_like_inputs(0, 1),
    category="optimizer",
)
class MomentumSGD(_Update):
    """Momentum SGD step without touching the parameter.

    Classic: ``m' = momentum * m + lr * g``, ``g' = m'``. Nesterov:
    ``m' = momentum * m + lr * g``, ``g' = (1 + momentum) * m' - momentum * m``.
    Subtract ``g'`` from the parameter to descend.
    """

    def run(self) -> None:
        self.same_shape(0, 1)
        g, m, lr = self.input(0), self.input(1), self.scalar(2)
        _momentum_step(self, g, m, lr, self.out_like(0, 0), self.out_like(1, 1))


@register_op(
    "MomentumSGDUpdate",
    inputs=4,
    outputs=3,
    args=_MOMENTUM_ARGS,
    input_docs=[
        ("grad", "gradient"),
        ("moment", "momentum history"),
        ("lr", "learning rate (one element, positive)"),
        ("param", "parameter"),
    ],
    output_docs=[("output_grad", "the step"), ("output_moment", "updated momentum"), ("output_param", "param - step")],
    allow_inplace={(0, 0), (1, 1), (3, 2)},
    infer=_like_inputs(0, 1, 3),
    category="optimizer",
)
class MomentumSGDUpdate(_Update):
    """MomentumSGD followed by ``param' = param - g'`` (fused)."""

    def run(self) -> None:
        self.same_shape(0, 1)
        self.same_shape(0, 3)
        g, m, lr, p = self.input(0), self.input(1), self.scalar(2), self.input(3)
        ng = self.out_like(0, 0)
        _momentum_step(self, g, m, lr, ng, self.out_like(1, 1))
        np.subtract(p, ng, out=self.out_like(2, 3))


_ADAGRAD_ARGS = [
    Arg("epsilon", FLOAT, 1e-5, "added to the root of the accumulated squares"),
    Arg("decay", FLOAT, 1.0, "decay of the accumulated squares"),
]


@register_op(
    "Adagrad",
    inputs=4,
    outputs=2,
    args=_ADAGRAD_ARGS,
    input_docs=[("param", "parameter"), ("moment", "sum of squared gradients"), ("grad", "gradient"), ("lr", "rate")],
    output_docs=[("output_param", "updated parameter"), ("output_moment", "updated squared sum")],
    allow_inplace={(0, 0), (1, 1)},
    infer=_like_inputs(0, 1),
    category="optimizer",
)
class Adagrad(_Update):
    """``h' = decay * h + g^2``; ``param' = param + lr * g / (sqrt(h') + epsilon)``.

    The optimizer builder passes a negative ``lr``.
    """

    def run(self) -> None:
        self.same_shape(0, 1)
        self.same_shape(0, 2)
        p, h, g, lr = self.input(0), self.input(1), self.input(2), self.scalar(3)
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
        np.divide(g, t, out=t)
        t *= lr
        np.add(p, t, out=self.out_like(0, 0))


def _copy_through(op: _Update, pairs) -> list[np.ndarray]:
    """Outputs that are not in place start as copies of their inputs (sparse ops touch rows)."""
    outs = []
    for k, i in pairs:
        x = op.input(i)
        y = op.output(k, x.shape, x.dtype)
        if y is not x and not np.shares_memory(y, x):
            np.copyto(y, x)
        outs.append(y)
    return outs


@register_op(
    "SparseAdagrad",
    inputs=5,
    outputs=2,
    args=_ADAGRAD_ARGS[:1],
    input_docs=[
        ("param", "parameter"),
        ("moment", "sum of squared gradients"),
        ("indices", "rows to update"),
        ("grad", "gradient rows"),
        ("lr", "rate"),
    ],
    output_docs=[("output_param", "updated parameter"), ("output_moment", "updated squared sum")],
    allow_inplace={(0, 0), (1, 1)},
    infer=_like_inputs(0, 1),
    category="optimizer",
)
class SparseAdagrad(_Update):
    """Adagrad on the rows ``indices`` only; repeated indices apply one after another."""

    def run(self) -> None:
        self.same_shape(0, 1)
        idx, g = self.rows(0, 2, 3)
        lr = self.scalar(4)
        p, h = _copy_through(self, [(0, 0), (1, 1)])
        eps = self.args.epsilon
        for k in range(idx.size):
            r = idx[k]
            gk = g[k]
            h[r] += gk * gk
            p[r] += lr * gk / (np.sqrt(h[r]) + eps)


@register_op(
    "RowWiseSparseAdagrad",
    inputs=5,
    outputs=2,
    args=_ADAGRAD_ARGS[:1],
    input_docs=[
        ("param", "parameter"),
        ("moment", "one accumulated mean square per row (1-D)"),
        ("indices", "rows to update"),
        ("grad", "gradient rows"),
        ("lr", "rate"),
    ],
    output_docs=[("output_param", "updated parameter"), ("output_moment", "updated per-row moments")],
    allow_inplace={(0, 0), (1, 1)},
    infer=_like_inputs(0, 1),
    category="optimizer",
)
class RowWiseSparseAdagrad(_Update):
    """Adagrad with one accumulator per row: ``h[r] += mean(g_r^2)``;
    ``param[r] += lr * g_r / (sqrt(h[r]) + epsilon)``."""

    def run(self) -> None:
        p_in, m_in = self.input(0), self.input(1)
        if m_in.reshape(-1).shape[0] != p_in.shape[0]:
            raise ShapeError(
                f"{self.describe()}: moment '{self.input_names[1]}' has shape {list(m_in.shape)}, expected "
                f"one value per row of '{self.input_names[0]}' ([{p_in.shape[0]}])"
            )
        idx, g = self.rows(0, 2, 3)
        lr = self.scalar(4)
        p, h = _copy_through(self, [(0, 0), (1, 1)])
        h = h.reshape(-1)
        eps = self.args.epsilon
        for k in range(idx.size):
            r = idx[k]
            gk = g[k]
            h[r] += np.mean(gk * gk) if gk.size else 0.0
            p[r] += (lr / (np.sqrt(h[r]) + eps)) * gk


_ADAM_ARGS = [
    Arg("beta1", FLOAT, 0.9, "decay of the first moment"),
    Arg("beta2", FLOAT, 0.999, "decay of the second moment"),
    Arg("epsilon", FLOAT, 1e-5, "added to the root of the second moment"),
]


def _adam_correction(op: _Update, it: np.ndarray) -> float:
    t = float(it) + 1.0
    return math.sqrt(1.0 - op.args.beta2**t) / (1.0 - op.args.beta1**t)


@register_op(
    "Adam",
    inputs=6,
    outputs=(3, 4),
    args=_ADAM_ARGS,
    input_docs=[
        ("param", "parameter"),
        ("moment_1", "first moment"),
        ("moment_2", "second moment"),
        ("grad", "gradient"),
        ("lr", "rate (negative from the builder)"),
        ("iter", "iteration counter (int64, one element)"),
    ],
    output_docs=[
        ("output_param", "updated parameter"),
        ("output_moment_1", "updated first moment"),
        ("output_moment_2", "updated second moment"),
        ("output_grad", "optional: the effective step"),
    ],
    allow_inplace={(0, 0), (1, 1), (2, 2)},
    infer=_like_inputs(0, 1, 2, 3),
    category="optimizer",
)
class Adam(_Update):
    """``m1' = beta1 m1 + (1 - beta1) g``; ``m2' = beta2 m2 + (1 - beta2) g^2``;
    ``param' = param + lr * sqrt(1 - beta2^t) / (1 - beta1^t) * m1' / (sqrt(m2') + epsilon)``
    with ``t = iter + 1``."""

    def run(self) -> None:
        for j in (1, 2, 3):
            self.same_shape(0, j)
        p, m1, m2, g = (self.input(i) for i in range(4))
        lr, it = self.scalar(4), self.scalar(5)
        b1, b2 = self.args.beta1, self.args.beta2
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
        t *= float(lr) * _adam_correction(self, it)
        if self.args.num_outputs > 3:
            np.copyto(self.out_like(3, 3), t)
        np.add(p, t, out=self.out_like(0, 0))


@register_op(
    "SparseAdam",
    inputs=7,
    outputs=(3, 4),
    args=_ADAM_ARGS,
    input_docs=[
        ("param", "parameter"),
        ("moment_1", "first moment"),
        ("moment_2", "second moment"),
        ("indices", "rows to update"),
        ("grad", "gradient rows"),
        ("lr", "rate"),
        ("iter", "iteration counter"),
    ],
    output_docs=[
        ("output_param", "updated parameter"),
        ("output_moment_1", "updated first moment"),
        ("output_moment_2", "updated second moment"),
        ("output_grad", "optional: the effective step of the rows"),
    ],
    allow_inplace={(0, 0), (1, 1), (2, 2)},
    infer=_like_inputs(0, 1, 2, 4),
    category="optimizer",
)
class SparseAdam(_Update):
    """Adam on the rows ``indices`` only (rows applied one after another)."""

    def run(self) -> None:
        self.same_shape(0, 1)
        self.same_shape(0, 2)
        idx, g = self.rows(0, 3, 4)
        lr, it = self.scalar(5), self.scalar(6)
        p, m1, m2 = _copy_through(self, [(0, 0), (1, 1), (2, 2)])
        b1, b2, eps = self.args.beta1, self.args.beta2, self.args.epsilon
        step = float(lr) * _adam_correction(self, it)
        out_g = self.out_like(3, 4) if self.args.num_outputs > 3 else None
        for k in range(idx.size):
            r = idx[k]
            gk = g[k]
            m1[r] = m1[r] * b1 + gk * (1.0 - b1)
            m2[r] = m2[r] * b2 + gk * gk * (1.0 - b2)
            d = step * m1[r] / (np.sqrt(m2[r]) + eps)
            if out_g is not None:
                out_g.reshape(g.shape)[k] = d
            p[r] += d


@register_op(
    "RmsProp",
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
    infer=_like_inputs(0, 1, 2),
    category="optimizer",
)
class RmsProp(_Update):
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


@register_op(
    "ScatterWeightedSum",
    inputs=lambda n: n >= 5 and n % 2 == 1,
    outputs=1,
    input_docs=[
        ("X_0", "tensor updated in place"),
        ("Weight_0", "scalar weight of X_0"),
        ("INDICES", "rows of X_0 to update"),
        ("X_1", "slices, one per index"),
        ("Weight_1", "scalar weight of X_1"),
    ],
    output_docs=[("X_0", "same blob as input 0")],
    enforce_inplace={(0, 0)},
    infer=_like_inputs(0),
    category="optimizer",
)
class ScatterWeightedSum(_Update):
    """``X_0[INDICES] = Weight_0 * X_0[INDICES] + Weight_1 * X_1 (+ Weight_2 * X_2 ...)`` in place.

    Repeated indices apply one after another, as Caffe2's CPU kernel does.
    """

    def run(self) -> None:
        x = self.out_like(0, 0)
        w0 = self.scalar(1)
        idx, _ = self.rows(0, 2, 3)
        slices = [self.rows(0, 2, j)[1] for j in range(3, len(self.input_names), 2)]
        weights = [self.scalar(j) for j in range(4, len(self.input_names), 2)]
        if idx.size == 0:
            return
        if float(w0) == 1.0:
            for s, w in zip(slices, weights):
                np.add.at(x, idx, s * w)
            return
        for k in range(idx.size):
            r = idx[k]
            row = x[r] * w0
            for s, w in zip(slices, weights):
                row += s[k] * w
            x[r] = row


should_not_do_gradient(
    "MomentumSGD",
    "MomentumSGDUpdate",
    "Adagrad",
    "SparseAdagrad",
    "RowWiseSparseAdagrad",
    "Adam",
    "SparseAdam",
    "RmsProp",
    "ScatterWeightedSum",
)
