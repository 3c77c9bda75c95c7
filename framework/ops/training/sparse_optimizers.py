"""Sparse (row-wise) optimizer updates for embedding tables (Caffe2's ``caffe2/sgd``): SparseMomentumSGDUpdate,
SparseAdadelta, SparseFtrl, SparseWngrad, SparseStorm, RowWiseSparseAdam and RowWiseCounter, plus the
vectorized row kernels SparseAdagrad / RowWiseSparseAdagrad (``adaptive``) run on.

Every op updates only the rows named by INDICES, in place (Caffe2 enforces it for all but
SparseMomentumSGDUpdate's gradient), so a table of millions of rows is never copied. A row named twice is
updated twice, one after the other, as Caffe2's loops do: ``waves`` splits the indices into rounds of
distinct rows (the k-th occurrence of every row in round k), each round one vectorized numpy step.
Inputs, outputs, argument names and defaults are Caffe2's; none of these ops has a gradient.
"""

from __future__ import annotations

import math

import numpy as np

from framework.errors import ShapeError
from framework.ops.gradient import should_not_do_gradient
from framework.ops.schema import FLOAT, INT, Arg
from framework.ops.training.optimizers import UpdateOp, copy_through, update_op


def waves(idx: np.ndarray) -> list[np.ndarray]:
    """Positions of ``idx`` grouped into rounds of distinct values, occurrences in order."""
    if idx.size == 0:
        return []
    order = np.argsort(idx, kind="stable")
    s = idx[order]
    new = np.r_[True, s[1:] != s[:-1]]
    starts = np.flatnonzero(new)
    rank = np.arange(idx.size) - np.repeat(starts, np.diff(np.r_[starts, idx.size]))
    if rank.max() == 0:
        return [order]
    by_rank = np.argsort(rank, kind="stable")
    counts = np.bincount(rank)
    return np.split(order[by_rank], np.cumsum(counts)[:-1])


def rowwise_adagrad_rows(
    p: np.ndarray, h: np.ndarray, idx: np.ndarray, g: np.ndarray, lr: float, eps: float, wd: float = 0.0
) -> None:
    """Caffe2's RowWiseSparseAdagrad in place, exactly sequential over repeated rows, without a Python loop:
    ``h[r] += mean(g_k^2)``, ``p[r] += lr * g_k / (sqrt(h[r]) + eps)`` for each occurrence k of row r
    (with weight decay ``g_k + wd * p[r]``, which depends on the row's current value: one round of distinct
    rows at a time)."""
    n = idx.size
    if n == 0:
        return
    if wd:
        block = (1,) * (g.ndim - 1)
        for w in waves(idx):
            r = idx[w]
            gk = g[w] + wd * p[r]
            hr = h[r] + (gk * gk).reshape(len(r), -1).mean(axis=1)
            h[r] = hr
            p[r] += gk * (lr / (np.sqrt(hr) + eps)).reshape((len(r),) + block)
        return
    msq = np.einsum("ij,ij->i", g, g) if g.ndim == 2 else (g * g).reshape(n, -1).sum(axis=1)
    msq *= 1.0 / max(int(np.prod(g.shape[1:], dtype=np.int64)), 1)
    block = (1,) * (g.ndim - 1)
    dup = repeated(idx, p.shape[0])
    if not dup.any():  # distinct rows (the common case): one vectorized step
        hr = h[idx] + msq
        h[idx] = hr
        p[idx] += g * (lr / (np.sqrt(hr) + eps)).reshape((n,) + block).astype(p.dtype, copy=False)
        return
    u = np.flatnonzero(~dup)
    if u.size:
        r = idx[u]
        hr = h[r] + msq[u]
        h[r] = hr
        p[r] += g[u] * (lr / (np.sqrt(hr) + eps)).reshape((u.size,) + block).astype(p.dtype, copy=False)
    # repeated rows (few): sort them, running sums of mean(g^2) give each occurrence's accumulator
    d = np.flatnonzero(dup)
    order = d[np.argsort(idx[d], kind="stable")]
    s, gs, ms = idx[order], g[order], msq[order]
    m = s.size
    starts = np.flatnonzero(np.r_[True, s[1:] != s[:-1]])
    rows = s[starts]
    run = np.cumsum(ms)
    before = np.repeat(run[starts] - ms[starts], np.diff(np.r_[starts, m]))
    hk = h[s] + (run - before)  # the accumulator after each occurrence, as the sequential loop sees it
    scale = (lr / (np.sqrt(hk) + eps)).astype(p.dtype, copy=False)
    p[rows] += np.add.reduceat(gs * scale.reshape((m,) + block), starts, axis=0)
    h[rows] = hk[np.r_[starts[1:], m] - 1]


def repeated(idx: np.ndarray, rows: int) -> np.ndarray:
    """Mask of the positions of ``idx`` whose value occurs more than once (a count table when the table is
    not much bigger than the batch, else a sort)."""
    if rows <= 64 * idx.size + (1 << 20):
        return np.bincount(idx, minlength=rows)[idx] > 1
    order = np.argsort(idx, kind="stable")
    same = idx[order[1:]] == idx[order[:-1]]
    mask = np.empty(idx.size, bool)
    mask[order] = np.r_[same, False] | np.r_[False, same]
    return mask


def adagrad_rows(
    p: np.ndarray, h: np.ndarray, idx: np.ndarray, g: np.ndarray, lr: float, eps: float, wd: float = 0.0
) -> None:
    """SparseAdagrad in place, row after row for repeated rows (one numpy step per round of distinct rows);
    with weight decay the step uses ``g + wd * p[r]``."""
    for w in waves(idx):
        r = idx[w]
        gk = g[w] + wd * p[r] if wd else g[w]
        hr = h[r] + gk * gk
        h[r] = hr
        p[r] += lr * gk / (np.sqrt(hr) + eps)


def _indexed(op: UpdateOp, param: int, indices: int, grad: int) -> tuple[np.ndarray, np.ndarray]:
    """Indices and gradient rows checked against the parameter (as UpdateOp.rows)."""
    return op.rows(param, indices, grad)


_MOM_ARGS = [
    Arg("momentum", FLOAT, 0.0, "momentum coefficient"),
    Arg("nesterov", INT, 0, "1: Nesterov momentum"),
]


@update_op(
    "SparseMomentumSGDUpdate",
    (0, 1, 3),
    inputs=5,
    outputs=3,
    args=_MOM_ARGS,
    input_docs=[
        ("grad", "gradient rows"),
        ("moment", "momentum (param's shape)"),
        ("lr", "rate"),
        ("param", "parameter"),
        ("indices", "rows to update"),
    ],
    output_docs=[
        ("output_grad", "the applied step per row"),
        ("output_moment", "updated"),
        ("output_param", "updated"),
    ],
    allow_inplace={(0, 0)},
    enforce_inplace={(1, 1), (3, 2)},
    snapshot_inplace=False,  # indices, shapes and the rate are checked before any row is written
)
class SparseMomentumSGDUpdate(UpdateOp):
    """Momentum SGD on the rows ``indices``: ``m' = momentum * m + lr * g``; step ``m'`` (Nesterov:
    ``(1 + momentum) m' - momentum m``); ``param -= step``; output_grad holds the steps. In place: only the
    named rows of the table and its momentum are read and written (no copy of either)."""

    def run(self) -> None:
        self.same_shape(3, 1)
        idx, g = _indexed(self, 3, 4, 0)
        lr = float(self.scalar(2))
        m, p = copy_through(self, [(1, 1), (2, 3)])
        step = self.output(0, self.input(0).shape, self.input(0).dtype).reshape(g.shape)
        mu = self.args.momentum
        for w in waves(idx):
            r = idx[w]
            old = m[r]
            new = mu * old + lr * g[w]
            m[r] = new
            s = (1 + mu) * new - mu * old if self.args.nesterov else new
            step[w] = s
            p[r] -= s


@update_op(
    "SparseAdadelta",
    (0, 1, 2),
    inputs=6,
    outputs=3,
    args=[Arg("epsilon", FLOAT, 1e-5, "added under the roots"), Arg("decay", FLOAT, 0.95, "decay of both moments")],
    input_docs=[
        ("param", "parameter"),
        ("moment_grad", "running mean of squared gradients"),
        ("moment_delta", "running mean of squared steps"),
        ("indices", "rows to update"),
        ("grad", "gradient rows"),
        ("lr", "rate (negative from the builder)"),
    ],
    output_docs=[("output_param", "updated"), ("output_moment_grad", "updated"), ("output_moment_delta", "updated")],
    enforce_inplace={(0, 0), (1, 1), (2, 2)},
)
class SparseAdadelta(UpdateOp):
    """Adadelta on the rows: ``h' = decay h + (1 - decay) g^2``; ``step = sqrt(d + eps) / sqrt(h' + eps) * g``;
    ``param += lr * step``; ``d' = decay d + (1 - decay) step^2``."""

    def setup(self) -> None:
        if self.args.epsilon < 0 or not 0 < self.args.decay < 1:
            raise self.arg_error("epsilon must be >= 0 and decay in (0, 1)")

    def run(self) -> None:
        self.same_shape(0, 1)
        self.same_shape(0, 2)
        idx, g = _indexed(self, 0, 3, 4)
        lr = float(self.scalar(5))
        p, h, d = copy_through(self, [(0, 0), (1, 1), (2, 2)])
        eps, decay = self.args.epsilon, self.args.decay
        for w in waves(idx):
            r, gk = idx[w], g[w]
            hr = decay * h[r] + (1 - decay) * gk * gk
            h[r] = hr
            dr = d[r]
            step = np.sqrt(dr + eps) / np.sqrt(hr + eps) * gk
            p[r] += lr * step
            d[r] = decay * dr + (1 - decay) * step * step


@update_op(
    "SparseFtrl",
    (0, 1),
    inputs=(4, 5),
    outputs=2,
    args=[
        Arg("alpha", FLOAT, 0.005, "learning rate (or the 5th input)"),
        Arg("beta", FLOAT, 1.0, "FTRL beta"),
        Arg("lambda1", FLOAT, 0.001, "L1 strength"),
        Arg("lambda2", FLOAT, 0.001, "L2 strength"),
    ],
    input_docs=[
        ("var", "parameter"),
        ("n_z", "param.shape + [2]: accumulated (n, z) per weight"),
        ("indices", "rows to update"),
        ("grad", "gradient rows"),
        ("alpha", "optional run-time alpha (one element)"),
    ],
    output_docs=[("output_var", "updated"), ("output_n_z", "updated")],
    enforce_inplace={(0, 0), (1, 1)},
)
class SparseFtrl(UpdateOp):
    """FTRL-proximal on the rows: ``n' = n + g^2``; ``z' = z + g - (sqrt(n') - sqrt(n)) / alpha * w``;
    ``w' = (lambda1 sign(z') - z') / ((beta + sqrt(n')) / alpha + lambda2)`` if ``|z'| > lambda1``, else 0."""

    def setup(self) -> None:
        has_alpha = self.args.has("alpha")
        if has_alpha and len(self.inputs) == 5:
            raise self.arg_error("cannot specify alpha by both input and argument")

    def run(self) -> None:
        w_all, nz = self.input(0), self.input(1)
        if nz.size != 2 * w_all.size:
            raise ShapeError(f"{self.describe()}: n_z has {nz.size} elements, expected {2 * w_all.size} (2 per weight)")
        idx, g = _indexed(self, 0, 2, 3)
        alpha = float(self.scalar(4)) if len(self.inputs) == 5 else self.args.alpha
        w_all, nz = copy_through(self, [(0, 0), (1, 1)])
        a_inv, beta, l1, l2 = 1.0 / alpha, self.args.beta, self.args.lambda1, self.args.lambda2
        blk = int(np.prod(w_all.shape[1:], dtype=np.int64))
        w2 = w_all.reshape(w_all.shape[0], blk)
        nz3 = nz.reshape(w_all.shape[0], blk, 2)
        g2 = g.reshape(idx.size, blk)
        for wv in waves(idx):
            r, gk = idx[wv], g2[wv]
            n, z, wr = nz3[r, :, 0], nz3[r, :, 1], w2[r]
            new_n = n + gk * gk
            sigma = (np.sqrt(new_n) - np.sqrt(n)) * a_inv
            new_z = z + gk - sigma * wr
            w2[r] = np.where(
                np.abs(new_z) > l1, (l1 * np.sign(new_z) - new_z) / ((beta + np.sqrt(new_n)) * a_inv + l2), 0.0
            )
            nz3[r, :, 0] = new_n
            nz3[r, :, 1] = new_z


@update_op(
    "SparseWngrad",
    (0, 1),
    inputs=5,
    outputs=2,
    args=[Arg("epsilon", FLOAT, 1e-5, "added to seq_b in the step")],
    input_docs=[
        ("param", "parameter"),
        ("seq_b", "one-element accumulator b"),
        ("indices", "rows to update"),
        ("grad", "gradient rows"),
        ("lr", "rate (negative from the builder)"),
    ],
    output_docs=[("output_param", "updated"), ("output_seq_b", "updated")],
    enforce_inplace={(0, 0), (1, 1)},
    input_types=["float", "float", "int", "float", "numeric"],
)
class SparseWngrad(UpdateOp):
    """WNGrad on the rows: ``param[r] += lr * g / (b + epsilon)``, then ``b += sum(g^2) / b`` (Caffe2's sparse
    form divides by b without epsilon there)."""

    def run(self) -> None:
        idx, g = _indexed(self, 0, 2, 3)
        b0, lr = float(self.scalar(1)), float(self.scalar(4))
        p, b = copy_through(self, [(0, 0), (1, 1)])
        step = g * (lr / (b0 + self.args.epsilon))
        if idx.size:
            np.add.at(p, idx, step.astype(p.dtype, copy=False))  # the step does not depend on the row's value
            with np.errstate(all="ignore"):  # IEEE division as Caffe2's float kernel: b = 0 gives inf
                b.reshape(-1)[0] = b0 + np.sum(g.astype(np.float64) ** 2) / np.float64(b0)


@update_op(
    "SparseStorm",
    (0, 1, 2),
    inputs=6,
    outputs=3,
    args=[Arg("momentum", FLOAT, 10.0, "momentum factor"), Arg("beta", FLOAT, 0.1, "added to the squared sum")],
    input_docs=[
        ("param", "parameter"),
        ("moment", "param's shape"),
        ("grad_sq_sum", "one-element sum of squared gradients"),
        ("grad", "gradient rows"),
        ("indices", "rows to update"),
        ("lr", "rate"),
    ],
    output_docs=[("output_param", "updated"), ("output_moment", "updated"), ("output_grad_sq_sum", "updated")],
    enforce_inplace={(0, 0), (1, 1), (2, 2)},
)
class SparseStorm(UpdateOp):
    """STORM on the rows: ``G' = G + sum(g^2)``; ``nlr = lr (beta + G')^(-1/3)``; ``a = momentum nlr^2``;
    ``m' = g + (1 - a)(m - g)``; ``param += nlr m'`` (note Caffe2's input order: GRAD before INDICES)."""

    def run(self) -> None:
        self.same_shape(0, 1)
        idx, g = _indexed(self, 0, 4, 3)
        gs0, lr = float(self.scalar(2)), float(self.scalar(5))
        p, m, gs = copy_through(self, [(0, 0), (1, 1), (2, 2)])
        if idx.size == 0:
            return
        total = gs0 + float(np.sum(g.astype(np.float64) ** 2))
        gs.reshape(-1)[0] = total
        nlr = lr * math.pow(self.args.beta + total, -1.0 / 3.0)
        a = self.args.momentum * nlr * nlr
        for w in waves(idx):
            r, gk = idx[w], g[w]
            new = gk + (1.0 - a) * (m[r] - gk)
            m[r] = new
            p[r] += nlr * new


@update_op(
    "RowWiseSparseAdam",
    (0, 1, 2, 4),
    inputs=7,
    outputs={3, 4},
    args=[
        Arg("beta1", FLOAT, 0.9, "decay of the first moment"),
        Arg("beta2", FLOAT, 0.999, "decay of the per-row second moment"),
        Arg("epsilon", FLOAT, 1e-5, "added to its root"),
    ],
    input_docs=[
        ("param", "parameter"),
        ("moment_1", "first moment (param's shape)"),
        ("moment_2", "second moment, one per row"),
        ("indices", "rows to update"),
        ("grad", "gradient rows"),
        ("lr", "rate (negative from the builder)"),
        ("iter", "iteration counter (int64)"),
    ],
    input_types=["float", "float", "float", "int", "float", "float", "numeric"],
    output_docs=[
        ("output_param", "updated"),
        ("output_moment_1", "updated"),
        ("output_moment_2", "updated"),
        ("output_grad", "optional: the effective gradient of the rows (the step divided by lr), grad's shape"),
    ],
    enforce_inplace={(0, 0), (1, 1), (2, 2)},
)
class RowWiseSparseAdam(UpdateOp):
    """Adam with one second moment per row: ``v' = beta2 v + (1 - beta2) mean(g^2)``;
    ``m' = beta1 m + (1 - beta1) g``; ``param += lr sqrt(1 - beta2^t) / (1 - beta1^t) m' / (sqrt(v') + eps)``.
    The optional 4th output is each row's effective gradient (the step without lr), as Caffe2's."""

    def run(self) -> None:
        self.same_shape(0, 1)
        p, m1, v = self.input(0), self.input(1), self.input(2)
        if p.ndim < 1:
            raise ShapeError(f"{self.describe()}: param '{self.input_names[0]}' must have rows, got a scalar")
        if v.size != p.shape[0]:
            raise ShapeError(f"{self.describe()}: moment_2 has {v.size} elements, expected one per row ({p.shape[0]})")
        idx, g = _indexed(self, 0, 3, 4)
        from framework.ops.training.adaptive import _adam_correction  # adaptive imports this module

        lr = float(self.scalar(5))
        corr = _adam_correction(self, self.scalar(6))  # refuses a negative or NaN iteration, bad betas
        p, m1, v = copy_through(self, [(0, 0), (1, 1), (2, 2)])
        eps = self.args.epsilon
        b1, b2 = self.args.beta1, self.args.beta2
        v1 = v.reshape(-1)
        block = (1,) * (g.ndim - 1)
        out_g = self.out_like(3, 4) if self.args.num_outputs > 3 else None
        for w in waves(idx):
            r, gk = idx[w], g[w]
            vr = v1[r] * b2 + (gk * gk).reshape(len(r), gk[0].size).mean(axis=1) * (1 - b2)
            v1[r] = vr
            mr = m1[r] * b1 + gk * (1 - b1)
            m1[r] = mr
            step = corr * mr / (np.sqrt(vr).reshape((len(r),) + block) + eps)
            if out_g is not None:
                out_g[w] = step
            p[r] += lr * step


@update_op(
    "RowWiseCounter",
    (0, 1),
    inputs=4,
    outputs=2,
    args=[Arg("counter_halflife", INT, -1, "half-life in iterations; <= 0 disables the op")],
    input_docs=[
        ("prev_iter", "int64, one per row: the last iteration the row was seen"),
        ("counter", "float64, one per row: the decayed count"),
        ("indices", "rows seen this iteration"),
        ("iter", "int64 current iteration (one element)"),
    ],
    output_docs=[("output_prev_iter", "updated"), ("output_counter", "updated")],
    enforce_inplace={(0, 0), (1, 1)},
    input_types=["numeric", "float", "int", "int"],
)
class RowWiseCounter(UpdateOp):
    """Decayed per-row occurrence counts: ``counter[r] = 1 + exp(-ln2 / halflife * (iter - prev_iter[r]))
    * counter[r]``, ``prev_iter[r] = max(iter, prev_iter[r])`` for each occurrence of row r."""

    def run(self) -> None:
        prev, counter, idx = self.input(0), self.input(1), self.input(2).reshape(-1)
        if prev.size != counter.size:
            raise ShapeError(f"{self.describe()}: prev_iter has {prev.size} rows, counter {counter.size}")
        if idx.dtype.kind not in "iu":
            raise ShapeError(f"{self.describe()}: indices must be integers, got {idx.dtype}")
        if idx.size and (idx.min() < 0 or idx.max() >= counter.size):
            raise ShapeError(f"{self.describe()}: indices out of range [0, {counter.size})")
        it = int(self.scalar(3))
        prev, counter = copy_through(self, [(0, 0), (1, 1)])
        if self.args.counter_halflife <= 0 or idx.size == 0:
            return
        rho = math.log(2.0) / self.args.counter_halflife
        pv, cv = prev.reshape(-1), counter.reshape(-1)
        for w in waves(idx):
            r = idx[w]
            delta = np.maximum(0, it - pv[r])
            cv[r] = 1.0 + np.exp(-delta * rho) * cv[r]
            pv[r] = np.maximum(it, pv[r])


should_not_do_gradient(
    "SparseMomentumSGDUpdate",
    "SparseAdadelta",
    "SparseFtrl",
    "SparseWngrad",
    "SparseStorm",
    "RowWiseSparseAdam",
    "RowWiseCounter",
)
