"""Thresholding and per-class scoring: StumpFunc, StumpFuncIndex, MultiClassAccuracy."""

from __future__ import annotations

import numpy as np

from framework.errors import ShapeError, TypeMismatchError
from framework.ops.gradient import no_gradient, should_not_do_gradient
from framework.ops.operator import Operator
from framework.ops.pointwise import float_input
from framework.ops.registry import register_op
from framework.ops.schema import FLOAT, Arg, TensorSpec, same_as_input
from framework.ops.validation import expect_rank

_I64 = np.dtype(np.int64)
_STUMP = [
    Arg("threshold", FLOAT, 0.0, "values <= threshold are low"),
    Arg("low_value", FLOAT, 0.0, "output for low values"),
    Arg("high_value", FLOAT, 0.0, "output for high values"),
]


@register_op(
    "StumpFunc",
    args=_STUMP,
    input_docs=[("X", "float tensor")],
    output_docs=[("Y", "low_value where X <= threshold, else high_value")],
    infer=same_as_input(0),
    category="math",
)
class StumpFunc(Operator):
    """Y = low_value if X <= threshold else high_value, elementwise."""

    def run(self) -> None:
        x = float_input(self, 0)
        a = self.args
        self.output(0, x.shape, x.dtype)[...] = np.where(x <= a.threshold, a.low_value, a.high_value)


@register_op(
    "StumpFuncIndex",
    outputs=2,
    args=_STUMP[:1],
    input_docs=[("X", "float tensor")],
    output_docs=[
        ("Index_Low", "int64 flat indices of elements <= threshold"),
        ("Index_High", "int64 flat indices of the others"),
    ],
    infer=lambda args, ins: [TensorSpec(None, _I64)] * 2,
    category="math",
)
class StumpFuncIndex(Operator):
    """The flat indices of the elements <= threshold and of the others, in order."""

    def run(self) -> None:
        x = float_input(self, 0).reshape(-1)
        low = x <= self.args.threshold
        lo, hi = np.flatnonzero(low), np.flatnonzero(~low)
        self.output(0, lo.shape, _I64)[...] = lo
        self.output(1, hi.shape, _I64)[...] = hi


@register_op(
    "MultiClassAccuracy",
    inputs=2,
    outputs=2,
    input_docs=[("prediction", "N x D scores"), ("labels", "(N,) int class labels")],
    output_docs=[
        ("accuracies", "(D,) float: per class, the share of its instances predicted right (0 if none)"),
        ("amounts", "(D,) int32: instances of each class"),
    ],
    infer=lambda args, ins: [
        TensorSpec(
            None if ins[0].shape is None or len(ins[0].shape) != 2 else (ins[0].shape[1],), np.dtype(np.float32)
        ),
        TensorSpec(None if ins[0].shape is None or len(ins[0].shape) != 2 else (ins[0].shape[1],), np.dtype(np.int32)),
    ],
    category="metric",
)
class MultiClassAccuracy(Operator):
    """Per class: the fraction of its instances whose top score (first on ties) is that class."""

    def run(self) -> None:
        x, lab = float_input(self, 0), self.input(1)
        expect_rank(self, 0, x, 2, "prediction, N x D")
        n, d = x.shape
        if lab.dtype.kind not in "iu":
            raise TypeMismatchError(
                f"{self.describe()}: labels ('{self.input_names[1]}') must hold integers, got {lab.dtype}"
            )
        if lab.shape != (n,) or (n and (lab.min() < 0 or lab.max() >= d)):
            raise ShapeError(f"{self.describe()}: labels ('{self.input_names[1]}') must be ({n},) in [0, {d})")
        pred = np.argmax(x, axis=1) if d else np.zeros(n, np.int64)
        amounts = np.bincount(lab, minlength=d)[:d]
        hits = np.bincount(lab[pred == lab], minlength=d)[:d]
        self.output(0, (d,), np.dtype(np.float32))[...] = np.where(amounts > 0, hits / np.maximum(amounts, 1), 0)
        self.output(1, (d,), np.dtype(np.int32))[...] = amounts


no_gradient("StumpFunc", "StumpFuncIndex")
should_not_do_gradient("MultiClassAccuracy")
