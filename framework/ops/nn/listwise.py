"""Listwise ranking and sampling: LambdaRankNdcg (+LambdaRankNdcgGradient) and WeightedSample."""

from __future__ import annotations

import math

import numpy as np

from framework.errors import ShapeError, TypeMismatchError
from framework.ops.gradient import gradient, should_not_do_gradient
from framework.ops.operator import Operator
from framework.ops.pointwise import float_input
from framework.ops.registry import register_op
from framework.ops.schema import BOOL, Arg, TensorSpec

_F32 = np.dtype(np.float32)


def _sessions(op: Operator, i: int, n: int) -> np.ndarray:
    s = op.input(i)
    if s.dtype.kind not in "iu" or s.ndim != 1:
        raise TypeMismatchError(f"{op.describe()}: session_lengths ('{op.input_names[i]}') must be a 1-D int tensor")
    if np.any(s < 0) or int(s.sum()) != n:
        raise ShapeError(f"{op.describe()}: session_lengths ('{op.input_names[i]}') must be >= 0 and sum to {n}")
    return s.astype(np.int64)


def _session(y: np.ndarray, r: np.ndarray, ndcg_loss: bool, idcg_norm: bool, exp_gain: bool) -> tuple:
    """(loss, dy) of one session, as Caffe2's LambdaRankNdcgSession (stable ranks on ties)."""
    n = y.size
    if n == 0 or np.abs(r).sum() < 1e-6:
        return 0.0, np.zeros(n)
    inv_log = math.log(2.0) / np.log(np.arange(2, n + 2, dtype=np.float64))
    rank = np.argsort(-y, kind="stable")
    ideal = np.argsort(-r, kind="stable")
    gain = r.astype(np.float64) if (ndcg_loss and not exp_gain) else np.exp(r * math.log(2.0))
    ideal_disc = np.empty(n)
    ideal_disc[ideal] = inv_log
    disc = np.empty(n)
    disc[rank] = inv_log
    idcg, dcg = float((gain * ideal_disc).sum()), float((gain * disc).sum())
    lam = np.abs((disc[:, None] - disc[None, :]) * (gain[:, None] - gain[None, :]))
    sign = np.where(r[:, None] - r[None, :] > 0, 1.0, -1.0)
    dyy = y[:, None] - y[None, :]
    dy = -(lam * sign / (1 + np.exp(sign * dyy))).sum(axis=1)
    if ndcg_loss:
        loss = idcg - dcg
    else:
        v = sign * dyy
        logsig = np.where(v > 100, 0.0, np.where(v < -100, v, -np.log1p(np.exp(-np.clip(v, -100, 100)))))
        loss = -(lam * logsig).sum()
    if idcg_norm:
        dy = dy / max(idcg, 1e-5)
        loss = loss / max(idcg, 1e-5)
    return loss, dy


@register_op(
    "LambdaRankNdcg",
    inputs=(2, 3),
    outputs=2,
    args=[
        Arg("use_ndcg_as_loss", BOOL, False, "loss = IDCG - DCG"),
        Arg("use_idcg_normalization", BOOL, True, "divide by IDCG"),
        Arg("use_exp_gain", BOOL, True, "gain 2^rel (else rel, with use_ndcg_as_loss)"),
    ],
    input_docs=[
        ("y", "(N,) predicted scores"),
        ("r", "(N,) relevance labels"),
        ("session_lengths", "int sessions, summing to N (optional: Caffe2 2018's form, one session)"),
    ],
    output_docs=[("loss", "one loss per session"), ("dy", "(N,) the lambda gradient, cached for the gradient op")],
    infer=lambda args, ins: [
        TensorSpec((1,) if len(ins) < 3 else None if ins[2].shape is None else (ins[2].shape[0],), _F32),
        TensorSpec(None if ins[0].shape is None else (int(np.prod(ins[0].shape)),), _F32),
    ],
    category="loss",
)
class LambdaRankNdcg(Operator):
    """LambdaRank (Wu et al. 2010) per session: pair weights lambda_ij = |(d_i - d_j)(g_i - g_j)|
    from the current-rank discounts d and gains g = 2^r; loss = -sum lambda_ij log sigmoid(
    sign(r_i - r_j)(y_i - y_j)) (or IDCG - DCG), divided by IDCG. `dy` is Caffe2's lambda
    gradient (half the derivative of that sum, which counts every pair twice); ranks among
    equal scores follow the lower index (Caffe2's std::sort leaves them unspecified). Without
    session_lengths (Caffe2 2018's two-input op) all N items are one session: loss has shape [1]."""

    def run(self) -> None:
        y, r = float_input(self, 0), float_input(self, 1)
        if y.ndim != 1 or r.size != y.size:
            raise ShapeError(
                f"{self.describe()}: y must be 1-D and r hold as many values, got {list(y.shape)}, {list(r.shape)}"
            )
        sl = _sessions(self, 2, y.size) if len(self.inputs) == 3 else np.array([y.size], np.int64)
        a = self.args
        yd, rd = y.astype(np.float64), r.reshape(-1).astype(np.float64)
        loss, dy = np.zeros(sl.size), np.zeros(y.size)
        off = 0
        for k, n in enumerate(sl):
            loss[k], dy[off : off + n] = _session(
                yd[off : off + n], rd[off : off + n], a.use_ndcg_as_loss, a.use_idcg_normalization, a.use_exp_gain
            )
            off += int(n)
        self.output(0, (sl.size,), _F32)[...] = loss
        self.output(1, (y.size,), _F32)[...] = dy


@register_op(
    "LambdaRankNdcgGradient",
    inputs=(3, 4),
    input_docs=[
        ("y", "forward scores"),
        ("session_lengths", "forward sessions (absent in Caffe2 2018's form: y, dy_cache, dLoss)"),
        ("dy_cache", "forward dy"),
        ("dLoss", "gradient of loss, one per session"),
    ],
    output_docs=[("dy", "dLoss of each session times its cached dy")],
    infer=lambda args, ins: [TensorSpec(ins[-2].shape, _F32)],
    category="loss",
    private=True,
)
class LambdaRankNdcgGradient(Operator):
    """dy = dLoss[session] * dy_cache. The three-input form (Caffe2 2018) has one session."""

    def run(self) -> None:
        k = len(self.inputs) - 2  # dy_cache's index
        y, cache, dl = float_input(self, 0), float_input(self, k), float_input(self, k + 1)
        if cache.size != y.size or cache.ndim != 1:
            raise ShapeError(f"{self.describe()}: dy_cache ('{self.input_names[k]}') must be 1-D with {y.size} values")
        sl = _sessions(self, 1, y.size) if k == 2 else np.array([y.size], np.int64)
        if dl.size != sl.size:
            raise ShapeError(f"{self.describe()}: dLoss ('{self.input_names[k + 1]}') must hold {sl.size} values")
        self.output(0, (y.size,), _F32)[...] = np.repeat(dl.reshape(-1), sl) * cache


@gradient("LambdaRankNdcg")
def _lambda_rank_ndcg_grad(g):
    sessions = [g.I(2)] if len(g.def_.input) == 3 else []
    return [g.op("LambdaRankNdcgGradient", [g.I(0), *sessions, g.O(1), g.GO(0)], [g.GI(0)])]


@register_op(
    "WeightedSample",
    inputs=(1, 2),
    outputs=(1, 2),
    input_docs=[("sampling_weights", "N x D non-negative weights"), ("sampling_values", "optional N x D values")],
    output_docs=[
        ("sampled_indexes", "int32 N x 1: one index per row, drawn with probability weight / row sum"),
        ("sampled_values", "N x 1 values at those indexes"),
    ],
    infer=lambda args, ins: [TensorSpec(None, np.dtype(np.int32)), TensorSpec(None, _F32)][: args.num_outputs],
    category="math",
)
class WeightedSample(Operator):
    """Per row: r ~ U(0, total weight); the index is the first whose running sum is >= r (the
    last running sum padded by 0.01, as Caffe2). Empty input: empty outputs. The op's random
    generator follows DeviceOption.random_seed."""

    def run(self) -> None:
        w = float_input(self, 0)
        if len(self.inputs) != len(self.outputs):
            raise self.arg_error("give as many outputs as inputs (indexes, and values with sampling_values)")
        if w.ndim != 2 or np.any(w < 0):
            raise ShapeError(f"{self.describe()}: sampling_weights ('{self.input_names[0]}') must be N x D and >= 0")
        vals = None
        if len(self.inputs) > 1:
            vals = float_input(self, 1)
            if vals.shape != w.shape:
                raise ShapeError(f"{self.describe()}: sampling_values must be shaped as the weights {list(w.shape)}")
        n, d = w.shape
        if n == 0 or d == 0:
            self.output(0, (0,), np.dtype(np.int32))
            if vals is not None:
                self.output(1, (0,), _F32)
            return
        cum = np.cumsum(w.astype(np.float32), axis=1, dtype=np.float32)
        r = (self.rng.random(n) * cum[:, -1]).astype(np.float32)
        cum[:, -1] += np.float32(0.01)
        idx = np.array([int(np.searchsorted(cum[i], r[i], side="left")) for i in range(n)], np.int64)
        idx = np.minimum(idx, d - 1)
        self.output(0, (n, 1), np.dtype(np.int32))[...] = idx[:, None]
        if vals is not None:
            self.output(1, (n, 1), _F32)[...] = vals[np.arange(n), idx][:, None]


should_not_do_gradient("WeightedSample")
