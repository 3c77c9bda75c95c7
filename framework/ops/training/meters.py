"""Running metrics: Accumulate (exponential sum), APMeter (average precision over a buffer of
recent predictions) and Perplexity (Caffe2's accumulate_op, apmeter_op, perplexity_op)."""

from __future__ import annotations

import numpy as np

from framework.errors import ShapeError, TypeMismatchError
from framework.ops.gradient import should_not_do_gradient
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import FLOAT, INT, Arg, TensorSpec, same_as_input

_F32 = np.dtype(np.float32)


@register_op(
    "Accumulate",
    args=[Arg("gamma", FLOAT, 1.0, "decay of the running sum")],
    input_docs=[("input", "tensor")],
    output_docs=[("output", "input + gamma * output (output starts at 0 when its shape differs)")],
    infer=same_as_input(0),
    category="training",
)
class Accumulate(Operator):
    """``output = input + gamma * output``; when the output's shape differs from the input's
    (first run) it starts from zeros, as Caffe2's AccumulateOp."""

    def run(self) -> None:
        x = self.input(0)
        t = self.output_tensor(0)
        prev = t.array
        fresh = prev is None or prev.shape != x.shape or prev.dtype != x.dtype
        out = self.output(0, x.shape, x.dtype)
        if fresh:
            out[...] = x
            return
        out *= x.dtype.type(self.args.gamma)
        out += x


@register_op(
    "APMeter",
    inputs=2,
    outputs=1,
    args=[Arg("buffer_size", INT, 1000, "how many recent predictions to keep per class")],
    input_docs=[("predictions", "float [N, D] scores"), ("labels", "int32 [N, D] 0/1 truths")],
    output_docs=[("AP", "float [D]: average precision of each class over the buffer")],
    infer=lambda args, ins: [
        TensorSpec((ins[0].shape[1],) if ins and ins[0].shape and len(ins[0].shape) == 2 else None, _F32)
    ],
    category="training",
)
class APMeter(Operator):
    """Average precision per class over a buffer of up to ``buffer_size`` (score, label) pairs
    kept across runs (Caffe2's APMeterOp): each class's buffer is sorted by score, descending
    and stable, and ``AP = sum over positives of precision@rank / max(1, positives)``.

    As in Caffe2, each class's buffer stays sorted between runs and room for new rows is made
    by dropping its first (highest-scoring) entries, not the oldest ones.
    """

    def setup(self) -> None:
        if self.args.buffer_size < 1:
            raise self.arg_error(f"buffer_size must be >= 1, got {self.args.buffer_size}")
        self._scores: np.ndarray | None = None
        self._labels: np.ndarray | None = None

    def run(self) -> None:
        x, y = self.input(0), self.input(1)
        if x.ndim != 2 or y.shape != x.shape:
            raise ShapeError(
                f"{self.describe()}: predictions must be [N, D] and labels the same shape, got "
                f"{list(x.shape)} and {list(y.shape)}"
            )
        if x.dtype != _F32 or y.dtype.kind not in "iub":
            raise TypeMismatchError(f"{self.describe()}: predictions must be float32 and labels integers")
        if self._scores is not None and self._scores.shape[1] != x.shape[1]:
            raise ShapeError(f"{self.describe()}: {x.shape[1]} classes, earlier runs had {self._scores.shape[1]}")
        k = self.args.buffer_size
        x, y = x[-k:], y[-k:].astype(np.int32)  # at most buffer_size rows of a batch are kept
        if self._scores is None:
            scores, labels = x, y
        else:
            # Caffe2 frees room by dropping the *first* entries of each class's buffer, which it
            # left sorted by score (descending) on the previous run: kept as is.
            drop = max(len(self._scores) + len(x) - k, 0)
            scores = np.concatenate([self._scores[drop:], x])
            labels = np.concatenate([self._labels[drop:], y])
        order = np.argsort(-scores, axis=0, kind="stable")
        self._scores = np.take_along_axis(scores, order, axis=0)
        self._labels = np.take_along_axis(labels, order, axis=0)
        lab = self._labels.astype(_F32)
        tp = np.cumsum(lab, axis=0, dtype=_F32)
        rank = np.arange(1, len(lab) + 1, dtype=_F32)[:, None]
        prec = np.where(lab == 1, tp / rank, _F32.type(0)).sum(axis=0, dtype=_F32)
        ntruth = np.maximum((lab == 1).sum(axis=0), 1).astype(_F32)
        self.output(0, (x.shape[1],), _F32)[...] = prec / ntruth


@register_op(
    "Perplexity",
    input_docs=[("probabilities", "1-D float: each sample's probability of its true label")],
    output_docs=[("output", "float scalar: prod(p_i ^ (-1/N))")],
    infer=lambda args, ins: [TensorSpec((), _F32)],
    category="training",
)
class Perplexity(Operator):
    """Perplexity of a batch: ``prod_i p_i^(-1/N)`` (1 for an empty batch), in float32."""

    def run(self) -> None:
        p = self.input(0)
        if p.ndim != 1 or p.dtype != _F32:
            raise ShapeError(f"{self.describe()}: input must be a 1-D float32 tensor, got {p.dtype} {list(p.shape)}")
        n = p.shape[0]
        out = np.float32(1.0)
        if n:
            out = np.prod(np.power(p, np.float32(-1.0 / n)), dtype=np.float32)
        self.output(0, (), _F32)[...] = out


should_not_do_gradient("Accumulate", "APMeter", "Perplexity")
