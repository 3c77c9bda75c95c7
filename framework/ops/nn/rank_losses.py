"""Ranking and metric-learning losses: PairWiseLoss (logistic loss over ordered pairs, per
session), MarginRankingCriterion, CosineEmbeddingCriterion, BernoulliJSD, MakeTwoClass and
WeightedSigmoidCrossEntropyWithLogits, with Caffe2's gradient ops and input orders."""

from __future__ import annotations

import numpy as np

from framework.errors import ShapeError, TypeMismatchError
from framework.ops.gradient import gradient
from framework.ops.operator import Operator
from framework.ops.pointwise import float_input
from framework.ops.registry import register_op
from framework.ops.schema import FLOAT, Arg, TensorSpec, same_as_input
from framework.ops.validation import check_lengths

_F32_EPS = float(np.finfo(np.float32).eps)


def _same(op: Operator, i: int, j: int, a: np.ndarray, b: np.ndarray) -> None:
    if a.shape != b.shape:
        raise ShapeError(
            f"{op.describe()}: input {j} ('{op.input_names[j]}') has shape {list(b.shape)}, input {i} "
            f"('{op.input_names[i]}') {list(a.shape)}; they must match"
        )


# -- PairWiseLoss ----------------------------------------------------------------------------------


def _sessions(op: Operator, n: int, lengths_index: int) -> np.ndarray:
    if len(op.inputs) <= lengths_index:
        return np.array([n], np.int64)
    lengths = op.input(lengths_index)
    if lengths.dtype.kind not in "iu" or lengths.ndim != 1:
        raise TypeMismatchError(
            f"{op.describe()}: lengths ('{op.input_names[lengths_index]}') must be a 1-D int tensor"
        )
    check_lengths(op, lengths_index, lengths, n, "one length per session")
    return lengths.astype(np.int64)


def _scores_labels(op: Operator) -> tuple[np.ndarray, np.ndarray, int]:
    x, label = float_input(op, 0), float_input(op, 1)
    if x.ndim == 0:
        raise ShapeError(f"{op.describe()}: X ('{op.input_names[0]}') must be N or N x 1 scores, got a scalar")
    n = x.shape[0]
    if n and x.size != n:
        raise ShapeError(
            f"{op.describe()}: X ('{op.input_names[0]}') must be N x 1 (one score per row), got {list(x.shape)}"
        )
    if n and (label.ndim == 0 or label.size != n or label.shape[0] != n):
        raise ShapeError(f"{op.describe()}: label ('{op.input_names[1]}') must be N or N x 1, got {list(label.shape)}")
    return x.reshape(-1).astype(np.float64), label.reshape(-1).astype(np.float64), n


def _pairs(label: np.ndarray, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(i, j, sign) over j < i in [lo, hi) with labels further apart than float32 epsilon."""
    i, j = np.tril_indices(hi - lo, -1)
    i, j = i + lo, j + lo
    keep = np.abs(label[i] - label[j]) >= _F32_EPS
    i, j = i[keep], j[keep]
    return i, j, np.where(label[i] > label[j], 1.0, -1.0)


def _log_logit(v: np.ndarray) -> np.ndarray:
    """log(1 + exp(v)) with Caffe2's float cut-offs."""
    lim = np.log(_F32_EPS)
    return np.where(v < lim, 0.0, np.where(v > -lim, v, np.log1p(np.exp(np.clip(v, lim, -lim)))))


def _pairwise_infer(ins: list) -> TensorSpec:
    x = ins[0]
    if x.shape is None:
        return TensorSpec(None, x.dtype)
    if not x.shape or x.shape[0] == 0:
        return TensorSpec((0,), x.dtype)
    if len(ins) > 2:
        return TensorSpec(None if ins[2].shape is None else (ins[2].shape[0],), x.dtype)
    return TensorSpec((1,), x.dtype)


@register_op(
    "PairWiseLoss",
    inputs=(2, 3),
    input_docs=[("X", "N x 1 scores"), ("label", "N or N x 1 relevance labels"), ("lengths", "optional session sizes")],
    output_docs=[("Y", "one loss per session (N = 0: empty)")],
    infer=lambda args, ins: [_pairwise_infer(ins)],
    category="loss",
)
class PairWiseLoss(Operator):
    """Per session: the mean over pairs with different labels of log(1 + exp(s (x_j - x_i))),
    s = +1 if label_i > label_j else -1 (a logistic ranking loss)."""

    def run(self) -> None:
        x, label, n = _scores_labels(self)
        if n == 0:
            self.output(0, (0,), self.input(0).dtype)
            return
        lengths = _sessions(self, n, 2)
        out = np.zeros(len(lengths))
        off = 0
        for k, ln in enumerate(lengths):
            i, j, s = _pairs(label, off, off + int(ln))
            if i.size:
                out[k] = _log_logit(s * (x[j] - x[i])).sum() / i.size
            off += int(ln)
        self.output(0, out.shape, self.input(0).dtype)[...] = out


@register_op(
    "PairWiseLossGradient",
    inputs=(3, 4),
    input_docs=[("X", "forward scores"), ("label", "forward labels"), ("dY", "gradient of Y"), ("lengths", "optional")],
    output_docs=[("dX", "gradient of X")],
    infer=same_as_input(0),
    category="loss",
    private=True,
)
class PairWiseLossGradient(Operator):
    """dX from each pair's logistic derivative, divided by the session's pair count."""

    def run(self) -> None:
        x, label, n = _scores_labels(self)
        dy = float_input(self, 2).reshape(-1)
        lengths = _sessions(self, n, 3) if n else np.zeros(0, np.int64)
        if n and dy.size != len(lengths):
            raise ShapeError(f"{self.describe()}: dY ('{self.input_names[2]}') must hold {len(lengths)} values")
        dx = np.zeros(n)
        off = 0
        for k, ln in enumerate(lengths):
            i, j, s = _pairs(label, off, off + int(ln))
            if i.size:
                g = s * dy[k] / (1 + np.exp(-s * (x[j] - x[i])))
                np.add.at(dx, i, -g)
                np.add.at(dx, j, g)
                dx[off : off + int(ln)] /= i.size
            off += int(ln)
        self.output(0, self.input(0).shape, self.input(0).dtype)[...] = dx.reshape(self.input(0).shape)


@gradient("PairWiseLoss")
def _pair_wise_loss_grad(g):
    ins = [g.I(0), g.I(1), g.GO(0)] + ([g.I(2)] if len(g.def_.input) == 3 else [])
    return [g.op("PairWiseLossGradient", ins, [g.GI(0)])]


# -- MarginRankingCriterion / CosineEmbeddingCriterion ---------------------------------------------


@register_op(
    "MarginRankingCriterion",
    inputs=3,
    args=[Arg("margin", FLOAT, 1.0, "the margin")],
    input_docs=[("X1", "scores"), ("X2", "scores, shaped as X1"), ("Y", "labels +1 / -1, shaped as X1")],
    output_docs=[("loss", "max(0, -Y (X1 - X2) + margin), elementwise")],
    infer=same_as_input(0),
    category="loss",
)
class MarginRankingCriterion(Operator):
    """loss = max(0, -Y * (X1 - X2) + margin), elementwise."""

    def run(self) -> None:
        x1, x2, y = float_input(self, 0), float_input(self, 1), self.input(2)
        _same(self, 0, 1, x1, x2)
        _same(self, 0, 2, x1, y)
        self.output(0, x1.shape, x1.dtype)[...] = np.maximum(0, -y * (x1 - x2) + self.args.margin)


@register_op(
    "MarginRankingCriterionGradient",
    inputs=4,
    outputs=2,
    args=[Arg("margin", FLOAT, 1.0, "the margin")],
    input_docs=[("X1", "forward X1"), ("X2", "forward X2"), ("Y", "forward labels"), ("dLoss", "gradient of loss")],
    output_docs=[("dX1", "-Y dLoss where the hinge is active"), ("dX2", "Y dLoss where the hinge is active")],
    infer=lambda args, ins: [ins[0], ins[1]],
    category="loss",
    private=True,
)
class MarginRankingCriterionGradient(Operator):
    """dX1 = -Y dLoss, dX2 = Y dLoss where -Y (X1 - X2) + margin > 0, else 0."""

    def run(self) -> None:
        x1, x2, y, dl = float_input(self, 0), float_input(self, 1), self.input(2), float_input(self, 3)
        for j, a in ((1, x2), (2, y), (3, dl)):
            _same(self, 0, j, x1, a)
        active = (-y * (x1 - x2) + self.args.margin) > 0
        self.output(0, x1.shape, x1.dtype)[...] = np.where(active, -y * dl, 0)
        self.output(1, x1.shape, x1.dtype)[...] = np.where(active, y * dl, 0)


@gradient("MarginRankingCriterion")
def _margin_ranking_grad(g):
    return [g.op("MarginRankingCriterionGradient", [g.I(0), g.I(1), g.I(2), g.GO(0)], [g.GI(0), g.GI(1)])]


@register_op(
    "CosineEmbeddingCriterion",
    inputs=2,
    args=[Arg("margin", FLOAT, 0.0, "the margin for dissimilar pairs")],
    input_docs=[("S", "cosine similarities"), ("Y", "labels: 1 similar, else dissimilar, shaped as S")],
    output_docs=[("loss", "1 - S where Y == 1, else max(0, S - margin)")],
    infer=same_as_input(0),
    category="loss",
)
class CosineEmbeddingCriterion(Operator):
    """loss = 1 - S for Y == 1, max(0, S - margin) otherwise, elementwise."""

    def run(self) -> None:
        s, y = float_input(self, 0), self.input(1)
        _same(self, 0, 1, s, y)
        self.output(0, s.shape, s.dtype)[...] = np.where(y == 1, 1 - s, np.maximum(0, s - self.args.margin))


@register_op(
    "CosineEmbeddingCriterionGradient",
    inputs=3,
    args=[Arg("margin", FLOAT, 0.0, "the margin")],
    input_docs=[("S", "forward S"), ("Y", "forward labels"), ("dLoss", "gradient of loss")],
    output_docs=[("dS", "gradient of S")],
    infer=same_as_input(0),
    category="loss",
    private=True,
)
class CosineEmbeddingCriterionGradient(Operator):
    """dS = -dLoss for Y == 1, dLoss where S > margin otherwise, else 0."""

    def run(self) -> None:
        s, y, dl = float_input(self, 0), self.input(1), float_input(self, 2)
        _same(self, 0, 1, s, y)
        _same(self, 0, 2, s, dl)
        self.output(0, s.shape, s.dtype)[...] = np.where(y == 1, -dl, np.where(s - self.args.margin > 0, dl, 0))


@gradient("CosineEmbeddingCriterion")
def _cosine_embedding_grad(g):
    return [g.op("CosineEmbeddingCriterionGradient", [g.I(0), g.I(1), g.GO(0)], [g.GI(0)])]


# -- BernoulliJSD --------------------------------------------------------------------------------------

_LOG_T = 1e-20


def _entropy(p: np.ndarray) -> np.ndarray:
    inside = (p >= _LOG_T) & (1 - p >= _LOG_T)
    q = np.clip(p, _LOG_T, 1 - _LOG_T)
    return np.where(inside, -q * np.log(q) - (1 - q) * np.log(1 - q), 0.0)


def _logit(p: np.ndarray) -> np.ndarray:
    x = np.clip(p, _LOG_T, 1 - _LOG_T)
    return -np.log(1.0 / x - 1.0)


@register_op(
    "BernoulliJSD",
    inputs=2,
    input_docs=[("X", "predicted probabilities"), ("T", "target probabilities, as many")],
    output_docs=[("L", "flat Jensen-Shannon divergences, one per element")],
    infer=lambda args, ins: [TensorSpec(None if ins[0].shape is None else (int(np.prod(ins[0].shape)),), ins[0].dtype)],
    category="loss",
)
class BernoulliJSD(Operator):
    """L = H((x + t) / 2) - (H(x) + H(t)) / 2 with H the Bernoulli entropy (0 within 1e-20 of 0
    or 1)."""

    def run(self) -> None:
        x, t = float_input(self, 0), float_input(self, 1)
        if t.size != x.size:
            raise ShapeError(f"{self.describe()}: T ('{self.input_names[1]}') must hold {x.size} values, got {t.size}")
        xf, tf = x.reshape(-1).astype(np.float64), t.reshape(-1).astype(np.float64)
        jsd = _entropy((xf + tf) / 2) - (_entropy(xf) + _entropy(tf)) / 2
        self.output(0, (x.size,), x.dtype)[...] = jsd


@register_op(
    "BernoulliJSDGradient",
    inputs=3,
    input_docs=[("dL", "gradient of L"), ("X", "forward X"), ("T", "forward T")],
    output_docs=[("dX", "gradient of X, shaped as X")],
    infer=lambda args, ins: [ins[1]],
    category="loss",
    private=True,
)
class BernoulliJSDGradient(Operator):
    """dX = dL (logit(x) - logit((x + t) / 2)) / 2 (Caffe2 writes it flat; here shaped as X)."""

    def run(self) -> None:
        dl, x, t = float_input(self, 0), float_input(self, 1), float_input(self, 2)
        if t.size != x.size or dl.size != x.size:
            raise ShapeError(f"{self.describe()}: dL, X and T must hold as many values ({dl.size}, {x.size}, {t.size})")
        xf, tf = x.reshape(-1).astype(np.float64), t.reshape(-1).astype(np.float64)
        g = dl.reshape(-1) * (_logit(xf) - _logit((xf + tf) / 2)) / 2
        self.output(0, x.shape, x.dtype)[...] = g.reshape(x.shape)


@gradient("BernoulliJSD")
def _bernoulli_jsd_grad(g):
    return [g.op("BernoulliJSDGradient", [g.GO(0), g.I(0), g.I(1)], [g.GI(0)])]


# -- MakeTwoClass / WeightedSigmoidCrossEntropyWithLogits ---------------------------------------------


@register_op(
    "MakeTwoClass",
    input_docs=[("X", "probabilities of the positive class")],
    output_docs=[("Y", "X.shape + [2]: [1 - X, X]")],
    infer=lambda args, ins: [TensorSpec(None if ins[0].shape is None else tuple(ins[0].shape) + (2,), ins[0].dtype)],
    category="loss",
)
class MakeTwoClass(Operator):
    """Y[..., 0] = 1 - X, Y[..., 1] = X."""

    def run(self) -> None:
        x = float_input(self, 0)
        y = self.output(0, x.shape + (2,), x.dtype)
        y[..., 0] = 1 - x
        y[..., 1] = x


@register_op(
    "MakeTwoClassGradient",
    input_docs=[("dY", "gradient of Y, last dim 2")],
    output_docs=[("dX", "dY[..., 1] - dY[..., 0]")],
    infer=lambda args, ins: [TensorSpec(None if ins[0].shape is None else tuple(ins[0].shape)[:-1], ins[0].dtype)],
    category="loss",
    private=True,
)
class MakeTwoClassGradient(Operator):
    """dX = dY[..., 1] - dY[..., 0]."""

    def run(self) -> None:
        dy = float_input(self, 0)
        if dy.ndim < 1 or dy.shape[-1] != 2:
            raise ShapeError(
                f"{self.describe()}: dY ('{self.input_names[0]}') must end in a dim of 2, got {list(dy.shape)}"
            )
        self.output(0, dy.shape[:-1], dy.dtype)[...] = dy[..., 1] - dy[..., 0]


@gradient("MakeTwoClass")
def _make_two_class_grad(g):
    return [g.op("MakeTwoClassGradient", [g.GO(0)], [g.GI(0)])]


def _xent(lg: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Caffe2's sigmoid_xent_forward: t log(sigmoid(lg)) + (1 - t) log(1 - sigmoid(lg)), stable."""
    pos = (lg >= 0).astype(np.float64)
    return lg * (t - pos) - np.log1p(np.exp(lg - 2 * lg * pos))


def _three(op: Operator, first: int) -> tuple:
    a, b, c = (float_input(op, first + k) for k in range(3))
    _same(op, first, first + 1, a, b)
    _same(op, first, first + 2, a, c)
    return a, b, c


@register_op(
    "WeightedSigmoidCrossEntropyWithLogits",
    inputs=3,
    input_docs=[("logits", "float tensor"), ("targets", "shaped as logits"), ("weights", "shaped as logits")],
    output_docs=[("xentropy", "logits.shape[:-1]: weighted mean over the last dim of the sigmoid cross entropy")],
    infer=lambda args, ins: [TensorSpec(None if ins[0].shape is None else tuple(ins[0].shape)[:-1], ins[0].dtype)],
    category="loss",
)
class WeightedSigmoidCrossEntropyWithLogits(Operator):
    """xentropy = -mean over the last dim of w * (t log sigmoid(x) + (1 - t) log(1 - sigmoid(x)))."""

    def run(self) -> None:
        lg, t, w = _three(self, 0)
        inner = lg.shape[-1] if lg.ndim else 1
        v = (_xent(lg.astype(np.float64), t) * w).reshape(lg.shape[:-1] + (inner,) if lg.ndim else (1,))
        self.output(0, lg.shape[:-1], lg.dtype)[...] = (-v.sum(axis=-1) / max(inner, 1)).reshape(lg.shape[:-1])


@register_op(
    "WeightedSigmoidCrossEntropyWithLogitsGradient",
    inputs=4,
    input_docs=[
        ("dxentropy", "gradient of xentropy"),
        ("logits", "forward"),
        ("targets", "forward"),
        ("weights", "forward"),
    ],
    output_docs=[("dlogits", "gradient of logits")],
    infer=lambda args, ins: [ins[1]],
    category="loss",
    private=True,
)
class WeightedSigmoidCrossEntropyWithLogitsGradient(Operator):
    """dlogits = -dxentropy / inner * w * (t - sigmoid(x))."""

    def run(self) -> None:
        g = float_input(self, 0)
        lg, t, w = _three(self, 1)
        inner = lg.shape[-1] if lg.ndim else 1
        if g.size != int(np.prod(lg.shape[:-1], dtype=np.int64)):
            raise ShapeError(
                f"{self.describe()}: dxentropy ('{self.input_names[0]}') must be shaped {list(lg.shape[:-1])}"
            )
        sig = 1 / (1 + np.exp(-lg.astype(np.float64)))
        factor = -g.reshape(lg.shape[:-1] + (1,) if lg.ndim else ()) / max(inner, 1)
        self.output(0, lg.shape, lg.dtype)[...] = factor * (t - sig) * w


@gradient("WeightedSigmoidCrossEntropyWithLogits")
def _weighted_sigmoid_xent_grad(g):
    return [g.op("WeightedSigmoidCrossEntropyWithLogitsGradient", [g.GO(0), g.I(0), g.I(1), g.I(2)], [g.GI(0)])]
