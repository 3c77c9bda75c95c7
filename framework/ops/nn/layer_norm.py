"""Layer normalization: LayerNorm and LayerNormGradient (Caffe2's LayerNorm): X viewed as
(prod(dims[:axis]), prod(dims[axis:])), each row normalized on its own."""

from __future__ import annotations

import math

import numpy as np

from framework.errors import ShapeError
from framework.kernels import activation_jit
from framework.ops.gradient import gradient, should_not_do_gradient
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import BOOL, FLOAT, INT, UNKNOWN, Arg, TensorSpec
from framework.ops.validation import expect_shape, expect_size

_LN_ARGS = [
    Arg("axis", INT, 1, "normalize over the dims from axis on"),
    Arg("epsilon", FLOAT, 1e-5, "added to the variance"),
    Arg("elementwise_affine", BOOL, False, "take gamma and beta inputs (shaped X.dims[axis:])"),
]


def _ln_axis(axis, ndim, where):
    a = axis + ndim if axis < 0 else axis
    if not 0 <= a < ndim:
        raise ShapeError(f"{where}: axis {axis} out of range for {ndim}-d input")
    return a


def _rows_and_width(op: Operator, x: np.ndarray) -> tuple[int, int, int]:
    """(axis, rows, row width) of X viewed as (prod(dims[:axis]), prod(dims[axis:]))."""
    a = _ln_axis(op.args.axis, x.ndim, op.describe())
    return a, math.prod(x.shape[:a]), math.prod(x.shape[a:])


def _infer_ln(args, ins):
    x = ins[0]
    if x.shape is None:
        return [x, UNKNOWN, UNKNOWN]
    a = _ln_axis(args.axis, len(x.shape), "LayerNorm")
    st = TensorSpec(tuple(x.shape[:a]) + (1,), x.dtype)
    return [x, st, st]


# LayerNorm's schema, shared by the name Caffe2 2020 also registered it under (C10LayerNorm_DontUseThisOpYet)
_LN_SCHEMA = dict(
    inputs={1, 3},
    outputs=3,
    args=_LN_ARGS,
    input_docs=[
        ("X", "input"),
        ("gamma", "optional scale (elementwise_affine)"),
        ("beta", "optional shift (elementwise_affine)"),
    ],
    output_docs=[
        ("Y", "normalized output"),
        ("mean", "X.dims[:axis] + [1]"),
        ("std", "sqrt(var + epsilon), X.dims[:axis] + [1]"),
    ],
    infer=_infer_ln,
    category="normalization",
    input_types="float",
    same_type=[(0, 1, 2)],
)


@register_op("LayerNorm", **_LN_SCHEMA)
class LayerNorm(Operator):
    """Layer normalization (Caffe2's LayerNorm): X is viewed as (prod(dims[:axis]),
    prod(dims[axis:])) and each row normalized by its mean and sqrt(var + epsilon). With numba, float32/64
    rows run in one compiled pass whose statistics are float64 (Caffe2 accumulates in the input's type)."""

    def setup(self) -> None:
        self._key = None
        if bool(self.args.elementwise_affine) != (len(self.inputs) == 3):
            raise self.arg_error("gamma and beta inputs go with elementwise_affine=1 (and only with it)")

    def run(self) -> None:
        x = self.input(0)
        if self._key != (x.shape, x.dtype):
            a, self._rows, self._d = _rows_and_width(self, x)
            self._sshape = tuple(x.shape[:a]) + (1,)
            self._tmp = np.empty((self._rows, self._d), x.dtype)
            self._eps = x.dtype.type(self.args.epsilon)
            self._key = (x.shape, x.dtype)
        rows, d = self._rows, self._d
        if len(self.inputs) == 3:
            expect_size(self, 1, self.input(1), d, f"X's dims from axis {self.args.axis}")
            expect_size(self, 2, self.input(2), d, f"X's dims from axis {self.args.axis}")
        mean = self.output(1, self._sshape, x.dtype)
        std = self.output(2, self._sshape, x.dtype)
        y = self.output(0, x.shape, x.dtype)
        x2, y2 = x.reshape(rows, d), y.reshape(rows, d)
        m2, s2 = mean.reshape(rows, 1), std.reshape(rows, 1)
        affine = len(self.inputs) == 3
        gb = (self.input(1), self.input(2)) if affine else ()
        # one compiled pass per row, statistics in float64
        if activation_jit.fits(x, y, mean, std, *gb) and activation_jit.layer_norm(
            x2, *(gb or (None, None)), self.args.epsilon, y2, m2, s2
        ):
            return
        np.mean(x2, axis=1, keepdims=True, out=m2)
        np.subtract(x2, m2, out=y2)
        np.multiply(y2, y2, out=self._tmp)
        np.mean(self._tmp, axis=1, keepdims=True, out=s2)
        np.add(s2, self._eps, out=s2)
        np.sqrt(s2, out=s2)
        np.divide(y2, s2, out=y2)
        if len(self.inputs) == 3:
            np.multiply(y2, self.input(1).reshape(1, d), out=y2)
            np.add(y2, self.input(2).reshape(1, d), out=y2)


@register_op(
    "LayerNormGradient",
    inputs={5, 7},
    outputs={1, 3},
    args=_LN_ARGS,
    input_docs=[
        ("dY", "gradient of Y"),
        ("Y", "forward output"),
        ("mean", "forward mean"),
        ("std", "forward std"),
        ("X", "forward input"),
        ("gamma", "optional"),
        ("beta", "optional"),
    ],
    output_docs=[("dX", "gradient of X"), ("dgamma", "optional"), ("dbeta", "optional")],
    infer=lambda args, ins: [ins[4]] + ([ins[5], ins[6]] if len(ins) == 7 and args.num_outputs == 3 else []),
    category="normalization",
    private=True,
    input_types="float",
    same_type=[(0, 1, 2, 3, 4, 5, 6)],
)
class LayerNormGradient(Operator):
    """dX = (g - mean(g) - xhat * mean(g * xhat)) / std with g = dY * gamma (or dY)."""

    def setup(self) -> None:
        if (len(self.inputs) == 7) != (len(self.outputs) == 3):
            raise self.arg_error(
                f"takes 5 inputs and 1 output (dX), or 7 inputs (with gamma, beta) and 3 outputs "
                f"(dX, dgamma, dbeta); got {len(self.inputs)} inputs and {len(self.outputs)} outputs"
            )
        self._key = None

    def run(self) -> None:
        dy, mean, std, x = self.input(0), self.input(2), self.input(3), self.input(4)
        if self._key != (x.shape, x.dtype):
            _, self._rows, self._d = _rows_and_width(self, x)
            self._xhat = np.empty((self._rows, self._d), x.dtype)
            self._g = np.empty((self._rows, self._d), x.dtype)
            self._r1 = np.empty((self._rows, 1), x.dtype)
            self._key = (x.shape, x.dtype)
        rows, d = self._rows, self._d
        expect_shape(self, 0, dy, x.shape, "X's shape")
        expect_size(self, 2, mean, rows, "one per normalized row")
        expect_size(self, 3, std, rows, "one per normalized row")
        if len(self.inputs) == 7:
            expect_size(self, 5, self.input(5), d, "the normalized width")
            expect_size(self, 6, self.input(6), d, "the normalized width")
        xhat, g, r1 = self._xhat, self._g, self._r1
        s2 = std.reshape(rows, 1)
        np.subtract(x.reshape(rows, d), mean.reshape(rows, 1), out=xhat)
        np.divide(xhat, s2, out=xhat)
        dy2 = dy.reshape(rows, d)
        affine = len(self.inputs) == 7
        if affine:
            gamma = self.input(5)
            dgamma = self.output(1, gamma.shape, x.dtype)
            dbeta = self.output(2, self.input(6).shape, x.dtype)
            np.multiply(dy2, xhat, out=g)
            np.sum(g, axis=0, out=dgamma.reshape(d))
            np.sum(dy2, axis=0, out=dbeta.reshape(d))
            np.multiply(dy2, gamma.reshape(1, d), out=g)
        else:
            np.copyto(g, dy2)
        dx = self.output(0, x.shape, x.dtype)
        dx2 = dx.reshape(rows, d)
        np.multiply(g, xhat, out=dx2)
        np.mean(dx2, axis=1, keepdims=True, out=r1)
        np.multiply(xhat, r1, out=dx2)
        np.mean(g, axis=1, keepdims=True, out=r1)
        np.subtract(g, dx2, out=dx2)
        np.subtract(dx2, r1, out=dx2)
        np.divide(dx2, s2, out=dx2)


@gradient("LayerNorm")
def _layer_norm_grad(g):
    ins = [g.GO(0), g.O(0), g.O(1), g.O(2), g.I(0)]
    if len(g.def_.input) == 3:
        return [g.op("LayerNormGradient", ins + [g.I(1), g.I(2)], [g.GI(0), g.GI(1), g.GI(2)])]
    return [g.op("LayerNormGradient", ins, [g.GI(0)])]


@register_op("C10LayerNorm_DontUseThisOpYet", **_LN_SCHEMA)
class C10LayerNorm(LayerNorm):
    """LayerNorm as Caffe2 2020 also registered it, through its c10 kernel: the same arguments, inputs and
    outputs as LayerNorm, and no gradient (Caffe2 registers none for this name)."""


should_not_do_gradient("C10LayerNorm_DontUseThisOpYet")
