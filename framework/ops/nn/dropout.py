"""Dropout and its gradient (Caffe2's Dropout / DropoutGrad)."""

from __future__ import annotations

import numpy as np

from framework.errors import TypeMismatchError
from framework.ops.gradient import gradient
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import FLOAT, INT, Arg, TensorSpec
from framework.ops.validation import expect_same_shape

_ARGS = [
    Arg("ratio", FLOAT, 0.5, "probability of dropping an element"),
    Arg("is_test", INT, 0, "1: identity (inference)"),
]


def _scale(ratio: float) -> float:
    return 0.0 if ratio >= 1.0 else 1.0 / (1.0 - ratio)


def _infer(args, ins):
    x = ins[0]
    outs = [x]
    if args.num_outputs == 2:
        outs.append(TensorSpec(x.shape, np.dtype(bool)))
    return outs


@register_op(
    "Dropout",
    outputs=(1, 2),
    args=_ARGS,
    input_docs=[("X", "input")],
    output_docs=[
        ("Y", "X with dropped elements zeroed and the rest scaled by 1/(1-ratio)"),
        ("mask", "optional bool mask of kept elements"),
    ],
    allow_inplace={(0, 0)},
    infer=_infer,
    category="normalization",
    input_types="float",
)
class Dropout(Operator):
    """Dropout (Caffe2's): in training each element is kept with probability 1 - ratio and
    scaled by 1/(1 - ratio); with is_test=1, Y = X. Random numbers come from the op's
    generator (seeded by DeviceOption.random_seed)."""

    def setup(self) -> None:
        r = self.args.ratio
        if not 0.0 <= r <= 1.0:
            raise self.arg_error(f"ratio must be in [0, 1], got {r}")
        self._key = None

    def run(self) -> None:
        x = self.input(0)
        y = self.output(0, x.shape, x.dtype)
        has_mask = len(self.outputs) == 2
        if self.args.is_test:
            if y is not x:
                np.copyto(y, x)
            if has_mask:
                self.output(1, x.shape, np.dtype(bool)).fill(True)
            return
        if self._key != (x.shape, x.dtype):
            self._u = np.empty(x.shape, np.float64 if x.dtype == np.float64 else np.float32)
            self._m = np.empty(x.shape, bool)
            self._ratio = self._u.dtype.type(self.args.ratio)
            self._s = x.dtype.type(_scale(self.args.ratio))
            self._key = (x.shape, x.dtype)
        mask = self.output(1, x.shape, np.dtype(bool)) if has_mask else self._m
        if x.size:
            self.rng.random(out=self._u, dtype=self._u.dtype)
        np.greater_equal(self._u, self._ratio, out=mask)
        np.multiply(x, mask, out=y)
        np.multiply(y, self._s, out=y)


@register_op(
    "DropoutGrad",
    inputs=(1, 2),
    args=_ARGS,
    input_docs=[("dY", "gradient of Y"), ("mask", "the forward mask (training)")],
    output_docs=[("dX", "gradient of X")],
    allow_inplace={(0, 0)},
    infer=lambda args, ins: [ins[0]],
    category="normalization",
    aliases=("DropoutGradient",),
    private=True,
    input_types={0: "float"},
)
class DropoutGrad(Operator):
    """dX = dY * mask / (1 - ratio) in training; dX = dY with is_test=1."""

    def run(self) -> None:
        dy = self.input(0)
        dx = self.output(0, dy.shape, dy.dtype)
        if self.args.is_test:
            if dx is not dy:
                np.copyto(dx, dy)
            return
        if len(self.inputs) < 2:
            raise self.arg_error("in training mode DropoutGrad needs the mask input")
        mask = self.input(1)
        if mask.dtype.kind not in "biuf":
            raise TypeMismatchError(f"{self.describe()}: mask '{self.input_names[1]}' must be bool, got {mask.dtype}")
        expect_same_shape(self, 0, dy, 1, mask)
        np.multiply(dy, mask, out=dx)
        np.multiply(dx, dy.dtype.type(_scale(self.args.ratio)), out=dx)


@gradient("Dropout")
def _dropout_grad(g):
    if g.arg("is_test", 0):
        return [g.op("DropoutGrad", [g.GO(0)], [g.GI(0)])]
    if len(g.def_.output) < 2:
        from framework.errors import GradientError

        raise GradientError(f"gradient of Dropout '{g.def_.name}': training mode needs the mask output")
    return [g.op("DropoutGrad", [g.GO(0), g.O(1)], [g.GI(0)])]
