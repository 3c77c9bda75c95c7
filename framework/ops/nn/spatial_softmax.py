"""SpatialSoftmaxWithLoss (+SpatialSoftmaxWithLossGradient): a softmax over the channels of
every pixel and the weighted mean cross entropy of the pixels' labels (-1: ignored)."""

from __future__ import annotations

import numpy as np

from framework.errors import ShapeError, TypeMismatchError
from framework.ops.gradient import gradient
from framework.ops.operator import Operator
from framework.ops.pointwise import float_input
from framework.ops.registry import register_op
from framework.ops.schema import FLOAT, Arg, TensorSpec
from framework.ops.validation import expect_rank

_SCALE = [Arg("scale", FLOAT, 1.0, "gradient scale")]


def _inputs(op: Operator, weight_index: int | None) -> tuple:
    x, t = float_input(op, 0), op.input(1)
    expect_rank(op, 0, x, 4, "logits, N x D x H x W")
    n, d, h, w = x.shape
    if t.dtype.kind not in "iu" or t.shape != (n, h, w):
        raise TypeMismatchError(
            f"{op.describe()}: labels ('{op.input_names[1]}') must be int ({n}, {h}, {w}), "
            f"got {t.dtype} {list(t.shape)}"
        )
    if t.size and (np.any(t >= d) or np.any(t < -1)):
        raise ShapeError(f"{op.describe()}: labels ('{op.input_names[1]}') must lie in [0, {d}) or be -1")
    wt = None
    if weight_index is not None:
        wt = float_input(op, weight_index)
        if wt.size != t.size:
            raise ShapeError(
                f"{op.describe()}: weight_tensor ('{op.input_names[weight_index]}') must hold {t.size} values"
            )
        wt = wt.reshape(t.shape).astype(np.float64)
    return x, t.astype(np.int64), wt


@register_op(
    "SpatialSoftmaxWithLoss",
    inputs=(2, 3),
    outputs=2,
    args=_SCALE,
    input_docs=[
        ("logits", "N x D x H x W"),
        ("labels", "N x H x W int labels, -1: ignore"),
        ("weight_tensor", "optional N x H x W pixel weights"),
    ],
    output_docs=[
        ("softmax", "per-pixel class probabilities, shaped as logits"),
        ("loss", "scalar: sum of w * -log(max(p_label, 1e-20)) / sum of w (0 with no weight)"),
    ],
    infer=lambda args, ins: [ins[0], TensorSpec((), ins[0].dtype)],
    category="loss",
)
class SpatialSoftmaxWithLoss(Operator):
    """Softmax over D at every (n, y, x) and the weighted mean cross entropy over the pixels
    whose label is not -1."""

    def run(self) -> None:
        x, t, wt = _inputs(self, 2 if len(self.inputs) > 2 else None)
        xd = x.astype(np.float64)
        e = np.exp(xd - xd.max(axis=1, keepdims=True)) if x.size else xd
        p = e / e.sum(axis=1, keepdims=True) if x.size else xd
        care = t != -1
        w = np.where(care, wt if wt is not None else 1.0, 0.0)
        pl = np.take_along_axis(p, np.where(care, t, 0)[:, None], axis=1)[:, 0] if x.size else np.zeros(t.shape)
        total = w.sum()
        loss = (-np.log(np.maximum(pl, 1e-20)) * w).sum() / total if total != 0 else 0.0
        self.output(0, x.shape, x.dtype)[...] = p
        self.output(1, (), x.dtype)[...] = loss


@register_op(
    "SpatialSoftmaxWithLossGradient",
    inputs=(4, 5),
    args=_SCALE,
    input_docs=[
        ("logits", "forward logits"),
        ("labels", "forward labels"),
        ("weight_tensor", "optional"),
        ("softmax", "forward softmax"),
        ("dloss", "gradient of loss"),
    ],
    output_docs=[("dlogits", "gradient of the logits")],
    infer=lambda args, ins: [ins[0]],
    category="loss",
    private=True,
)
class SpatialSoftmaxWithLossGradient(Operator):
    """dX = (P - onehot(label)) * w per pixel (0 where label is -1), times scale / sum of w and
    dloss."""

    def run(self) -> None:
        has_w = len(self.inputs) > 4
        x, t, wt = _inputs(self, 2 if has_w else None)
        p, dl = float_input(self, len(self.inputs) - 2), float_input(self, len(self.inputs) - 1)
        if p.shape != x.shape or dl.size != 1:
            raise ShapeError(f"{self.describe()}: softmax must be shaped as logits and dloss hold one value")
        care = t != -1
        w = np.where(care, wt if wt is not None else 1.0, 0.0)
        g = p.astype(np.float64).copy()
        if x.size:
            np.put_along_axis(
                g,
                np.where(care, t, 0)[:, None],
                np.take_along_axis(g, np.where(care, t, 0)[:, None], axis=1) - care[:, None],
                axis=1,
            )
        g *= w[:, None]
        total = w.sum()
        if total > 0:
            g *= self.args.scale / total
        self.output(0, x.shape, x.dtype)[...] = g * float(dl.reshape(-1)[0])


@gradient("SpatialSoftmaxWithLoss")
def _spatial_softmax_with_loss_grad(g):
    ins = [g.I(0), g.I(1)] + ([g.I(2)] if len(g.def_.input) == 3 else []) + [g.O(0), g.GO(1)]
    return [g.op("SpatialSoftmaxWithLossGradient", ins, [g.GI(0)])]
