"""Normalization: the base of the channel-wise normalizations (order, input checks), LRN
and InstanceNorm with their gradient ops. SpatialBN is in ``batch_norm``, LayerNorm in
``layer_norm``."""

from __future__ import annotations

import math

import numpy as np

from framework.errors import ShapeError, TypeMismatchError
from framework.memory.allocator import check_elements
from framework.ops.gradient import gradient
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import FLOAT, INT, REQUIRED, STRING, Arg, TensorSpec
from framework.ops.validation import expect_shape, expect_size

ORDER_ARG = Arg("order", STRING, "NCHW", "storage order: NCHW or NHWC")


def channel_axis(self_or_order, ndim: int) -> int:
    order = self_or_order if isinstance(self_or_order, str) else self_or_order.args.order
    return 1 if order.upper() == "NCHW" else ndim - 1


AFFINE_GRAD_DOCS = [("dX", "gradient of X"), ("dscale", "(C,)"), ("dbias", "(C,)")]


def affine_grad_infer(args, ins):
    """dX shaped as X (input 0), dscale and dbias as scale (input 1)."""
    return [ins[0], ins[1], ins[1]]


class NormOp(Operator):
    """Base of SpatialBN, LRN, InstanceNorm and their gradients: ``order`` checked in setup,
    shared input checks."""

    def setup(self) -> None:
        self.order = getattr(self.args, "order", "NCHW").upper()
        if self.order not in ("NCHW", "NHWC"):
            raise self.arg_error(f"order must be NCHW or NHWC, got {self.args.order!r}")
        self._key = None

    def _check_x(self, x, min_ndim=2):
        if x.ndim < min_ndim:
            raise ShapeError(
                f"{self.describe()}: input '{self.input_names[0]}' needs >= {min_ndim} dims, got {x.shape}"
            )
        if x.dtype.kind != "f":
            raise TypeMismatchError(f"{self.describe()}: input '{self.input_names[0]}' must be float, got {x.dtype}")

    def _check_vec(self, i, a, c, dtype):
        if c is not None and a.shape != (c,):
            raise ShapeError(f"{self.describe()}: '{self.input_names[i]}' must have shape ({c},), got {a.shape}")
        if a.dtype != dtype:
            raise TypeMismatchError(f"{self.describe()}: '{self.input_names[i]}' has dtype {a.dtype}, expected {dtype}")


# -- LRN ------------------------------------------------------------------------------------

_LRN_ARGS = [
    Arg("size", INT, REQUIRED, "number of channels summed over (odd)"),
    Arg("alpha", FLOAT, 0.0, "scale of the sum of squares"),
    Arg("beta", FLOAT, 0.0, "exponent"),
    Arg("bias", FLOAT, 1.0, "added to the scaled sum"),
    ORDER_ARG,
]


class _LRNBase(NormOp):
    def setup(self) -> None:
        super().setup()
        size = self.args.size
        if size < 1 or size % 2 == 0:
            raise self.arg_error(f"size must be a positive odd number, got {size}")
        self.pre = (size - 1) // 2

    def _prepare_lrn(self, x) -> None:
        self._check_x(x)
        ca = channel_axis(self.order, x.ndim)
        self._ca, c = ca, x.shape[ca]
        size = self.args.size
        padded = list(x.shape)
        padded[ca] = c + size - 1
        check_elements(padded, x.dtype.itemsize, f"{self.describe()}: the input padded by a window of size {size}")
        self._sqp = np.zeros(padded, x.dtype)
        self._ch = lambda lo, hi: tuple(slice(lo, hi) if a == ca else slice(None) for a in range(x.ndim))
        self._inner = self._ch(self.pre, self.pre + c)
        self._wins = [self._ch(j, j + c) for j in range(size)]
        self._scale_buf = np.empty(x.shape, x.dtype)
        self._k = x.dtype.type(self.args.alpha / size)
        self._bias = x.dtype.type(self.args.bias)
        self._nbeta = x.dtype.type(-self.args.beta)
        self._key = (x.shape, x.dtype)

    def _scale(self, x, scale) -> None:
        sqp = self._sqp
        inner = sqp[self._inner]
        np.multiply(x, x, out=inner)
        np.copyto(scale, sqp[self._wins[0]])
        for w in self._wins[1:]:
            np.add(scale, sqp[w], out=scale)
        np.multiply(scale, self._k, out=scale)
        np.add(scale, self._bias, out=scale)


@register_op(
    "LRN",
    outputs=(1, 2),
    args=_LRN_ARGS,
    input_docs=[("X", "input")],
    output_docs=[("Y", "X * scale^(-beta)"), ("scale", "optional: bias + alpha/size * windowed sum of X^2")],
    infer=lambda args, ins: [ins[0]] * args.num_outputs,
    category="normalization",
)
class LRN(_LRNBase):
    """Local response normalization across channels (Caffe2's LRN): scale = bias + alpha/size *
    sum of X^2 over the ``size`` channels around each one; Y = X * scale^(-beta)."""

    def run(self) -> None:
        x = self.input(0)
        if self._key != (x.shape, x.dtype):
            self._prepare_lrn(x)
        scale = self.output(1, x.shape, x.dtype) if len(self.outputs) == 2 else self._scale_buf
        self._scale(x, scale)
        y = self.output(0, x.shape, x.dtype)
        np.power(scale, self._nbeta, out=y)
        np.multiply(y, x, out=y)


@register_op(
    "LRNGradient",
    inputs=3,
    args=_LRN_ARGS,
    input_docs=[("X", "forward input"), ("Y", "forward output"), ("dY", "gradient of Y")],
    output_docs=[("dX", "gradient of X")],
    infer=lambda args, ins: [ins[0]],
    category="normalization",
    private=True,
    input_types="float",
    same_type=[(0, 1, 2)],
    same_shape=[(0, 1, 2)],
)
class LRNGradient(_LRNBase):
    """dX = dY * scale^(-beta) - 2 alpha beta / size * X * sum over the windows holding each
    channel of dY * Y / scale."""

    def run(self) -> None:
        x, y, dy = self.input(0), self.input(1), self.input(2)
        if self._key != (x.shape, x.dtype):
            self._prepare_lrn(x)
            size = self.args.size
            c = x.shape[self._ca]
            post = size - 1 - self.pre
            self._rinner = self._ch(post, post + c)
            self._t = np.empty(x.shape, x.dtype)
            self._coef = x.dtype.type(2.0 * self.args.alpha * self.args.beta / size)
        scale = self._scale_buf
        self._scale(x, scale)
        sqp, t = self._sqp, self._t
        sqp.fill(0)
        ratio = sqp[self._rinner]  # windows reversed: channel c collects from c-post .. c+pre
        np.multiply(dy, y, out=ratio)
        np.divide(ratio, scale, out=ratio)
        np.copyto(t, sqp[self._wins[0]])
        for w in self._wins[1:]:
            np.add(t, sqp[w], out=t)
        dx = self.output(0, x.shape, x.dtype)
        np.multiply(t, x, out=t)
        np.multiply(t, self._coef, out=t)
        np.power(scale, self._nbeta, out=dx)
        np.multiply(dx, dy, out=dx)
        np.subtract(dx, t, out=dx)


@gradient("LRN")
def _lrn_grad(g):
    return [g.op("LRNGradient", [g.I(0), g.O(0), g.GO(0)], [g.GI(0)])]


# -- InstanceNorm ---------------------------------------------------------------------------

_IN_ARGS = [Arg("epsilon", FLOAT, 1e-5, "added to the variance"), ORDER_ARG]


def _infer_in(args, ins):
    x = ins[0]
    outs = [x]
    if args.num_outputs > 1:
        nc = None
        if x.shape is not None:
            nc = (x.shape[0], x.shape[channel_axis(args.order, len(x.shape))])
        outs += [TensorSpec(nc, x.dtype)] * (args.num_outputs - 1)
    return outs


class _INBase(NormOp):
    def _prepare_in(self, x) -> None:
        self._check_x(x, 3)
        ca = channel_axis(self.order, x.ndim)
        self._c = x.shape[ca]
        self._sp = tuple(a for a in range(1, x.ndim) if a != ca)
        self._m = math.prod(x.shape[a] for a in self._sp)
        self._nc_b = tuple(x.shape[a] if a in (0, ca) else 1 for a in range(x.ndim))
        self._c_b = tuple(x.shape[a] if a == ca else 1 for a in range(x.ndim))
        self._nc = (x.shape[0], self._c)
        self._tmp = np.empty(x.shape, x.dtype)
        self._mean = np.empty(self._nc, x.dtype)
        self._inv = np.empty(self._nc, x.dtype)
        self._eps = x.dtype.type(self.args.epsilon)
        self._key = (x.shape, x.dtype)

    def _stats(self, x, mean, inv) -> None:
        np.mean(x, axis=self._sp, keepdims=True, out=mean.reshape(self._nc_b))
        np.subtract(x, mean.reshape(self._nc_b), out=self._tmp)
        np.multiply(self._tmp, self._tmp, out=self._tmp)
        np.mean(self._tmp, axis=self._sp, keepdims=True, out=inv.reshape(self._nc_b))
        np.add(inv, self._eps, out=inv)
        np.sqrt(inv, out=inv)
        np.divide(1, inv, out=inv)


@register_op(
    "InstanceNorm",
    inputs=3,
    outputs=(1, 3),
    args=_IN_ARGS,
    input_docs=[("X", "input"), ("scale", "(C,)"), ("bias", "(C,)")],
    output_docs=[("Y", "normalized output"), ("saved_mean", "optional (N, C)"), ("saved_inv_stdev", "optional (N, C)")],
    allow_inplace={(0, 0)},
    infer=_infer_in,
    category="normalization",
)
class InstanceNorm(_INBase):
    """Instance normalization (Caffe2's InstanceNorm): each (sample, channel) plane is
    normalized by its own mean and 1/sqrt(var + epsilon), then scaled and shifted per channel.
    Y may be X's blob (in place, as Caffe2 allows): the statistics are taken before Y is written."""

    def run(self) -> None:
        x = self.input(0)
        if self._key != (x.shape, x.dtype):
            self._prepare_in(x)
        scale, bias = self.input(1), self.input(2)
        self._check_vec(1, scale, self._c, x.dtype)
        self._check_vec(2, bias, self._c, x.dtype)
        n = len(self.outputs)
        mean = self.output(1, self._nc, x.dtype) if n > 1 else self._mean
        inv = self.output(2, self._nc, x.dtype) if n > 2 else self._inv
        self._stats(x, mean, inv)
        y = self.output(0, x.shape, x.dtype)
        np.subtract(x, mean.reshape(self._nc_b), out=y)
        np.multiply(y, inv.reshape(self._nc_b), out=y)
        np.multiply(y, scale.reshape(self._c_b), out=y)
        np.add(y, bias.reshape(self._c_b), out=y)


@register_op(
    "InstanceNormGradient",
    inputs={4, 6},
    outputs=3,
    args=_IN_ARGS,
    input_docs=[
        ("X", "forward input"),
        ("scale", "(C,)"),
        ("bias", "(C,)"),
        ("dY", "gradient of Y"),
        ("saved_mean", "optional"),
        ("saved_inv_stdev", "optional"),
    ],
    output_docs=AFFINE_GRAD_DOCS,
    infer=affine_grad_infer,
    category="normalization",
    private=True,
)
class InstanceNormGradient(_INBase):
    """Gradients of InstanceNorm (statistics recomputed when not given)."""

    def run(self) -> None:
        x, scale, _, dy = (self.input(i) for i in range(4))
        if self._key != (x.shape, x.dtype):
            self._prepare_in(x)
            self._xhat = np.empty(x.shape, x.dtype)
            self._s1 = np.empty(self._nc, x.dtype)
            self._s2 = np.empty(self._nc, x.dtype)
        self._check_vec(1, scale, self._c, x.dtype)
        self._check_vec(3, dy, None, x.dtype)
        expect_shape(self, 3, dy, x.shape, "X's shape")
        if len(self.inputs) == 6:
            mean, inv = self.input(4), self.input(5)
            for i, a in ((4, mean), (5, inv)):
                self._check_vec(i, a, None, x.dtype)
                expect_size(self, i, a, int(np.prod(self._nc, dtype=np.int64)), "one per (instance, channel)")
        else:
            mean, inv = self._mean, self._inv
            self._stats(x, mean, inv)
        nc_b, c_b = self._nc_b, self._c_b
        xhat, tmp, s1, s2 = self._xhat, self._tmp, self._s1, self._s2
        np.subtract(x, mean.reshape(nc_b), out=xhat)
        np.multiply(xhat, inv.reshape(nc_b), out=xhat)
        dx = self.output(0, x.shape, x.dtype)
        dscale = self.output(1, (self._c,), x.dtype)
        dbias = self.output(2, (self._c,), x.dtype)
        ca = channel_axis(self.order, x.ndim)
        red = tuple(a for a in range(x.ndim) if a != ca)
        np.sum(dy, axis=red, out=dbias)
        np.multiply(dy, xhat, out=tmp)
        np.sum(tmp, axis=red, out=dscale)
        np.mean(tmp, axis=self._sp, keepdims=True, out=s2.reshape(nc_b))
        np.mean(dy, axis=self._sp, keepdims=True, out=s1.reshape(nc_b))
        np.multiply(xhat, s2.reshape(nc_b), out=dx)
        np.subtract(dy, dx, out=dx)
        np.subtract(dx, s1.reshape(nc_b), out=dx)
        np.multiply(dx, inv.reshape(nc_b), out=dx)
        np.multiply(dx, scale.reshape(c_b), out=dx)


@gradient("InstanceNorm")
def _instance_norm_grad(g):
    ins = [g.I(0), g.I(1), g.I(2), g.GO(0)]
    if len(g.def_.output) == 3:
        ins += [g.O(1), g.O(2)]
    return [g.op("InstanceNormGradient", ins, [g.GI(0), g.GI(1), g.GI(2)])]
