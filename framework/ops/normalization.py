"""Normalization: SpatialBN, LRN, InstanceNorm, LayerNorm, with their gradient ops.

Semantics follow Caffe2: SpatialBN's running statistics are updated in place
(input 3 -> output 1, input 4 -> output 2) as running = running * momentum +
batch * (1 - momentum), the running variance taking the unbiased batch
variance (n / (n - 1), as Caffe2's final SpatialBNOp) while Y uses the biased
one; saved_inv_var is 1 / sqrt(var + epsilon).
"""

from __future__ import annotations

import math

import numpy as np

from framework.errors import ShapeError, TypeMismatchError
from framework.ops.gradient import gradient
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import BOOL, FLOAT, INT, REQUIRED, STRING, UNKNOWN, Arg, TensorSpec

_ORDER = Arg("order", STRING, "NCHW", "storage order: NCHW or NHWC")


def _channel_axis(self_or_order, ndim: int) -> int:
    order = self_or_order if isinstance(self_or_order, str) else self_or_order.args.order
    return 1 if order.upper() == "NCHW" else ndim - 1


class _Norm(Operator):
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
        if a.shape != (c,):
            raise ShapeError(f"{self.describe()}: '{self.input_names[i]}' must have shape ({c},), got {a.shape}")
        if a.dtype != dtype:
            raise TypeMismatchError(f"{self.describe()}: '{self.input_names[i]}' has dtype {a.dtype}, expected {dtype}")


# -- SpatialBN --------------------------------------------------------------------------------

_BN_ARGS = [
    Arg("is_test", INT, 0, "1: use the given mean/var and output Y only"),
    Arg("epsilon", FLOAT, 1e-5, "added to the variance"),
    Arg("momentum", FLOAT, 0.9, "running = running * momentum + batch * (1 - momentum)"),
    Arg("num_batches", INT, 1, "number of batches whose sums are given (only 1 is supported)"),
    _ORDER,
]


def _infer_bn(args, ins):
    x = ins[0]
    c = None
    if x.shape is not None and len(x.shape) >= 2:
        c = x.shape[_channel_axis(args.order, len(x.shape))]
    vec = TensorSpec((c,) if c is not None else None, x.dtype)
    return [x] + [vec] * (args.num_outputs - 1)


class _BNBase(_Norm):
    def _prepare_bn(self, x) -> None:
        self._check_x(x)
        ca = _channel_axis(self.order, x.ndim)
        self._c = x.shape[ca]
        self._axes = tuple(a for a in range(x.ndim) if a != ca)
        self._bshape = tuple(x.shape[ca] if a == ca else 1 for a in range(x.ndim))
        self._count = math.prod(x.shape) // max(self._c, 1)
        self._key = (x.shape, x.dtype)


@register_op(
    "SpatialBN",
    inputs=5,
    outputs={1, 5},
    args=_BN_ARGS,
    input_docs=[
        ("X", "input"),
        ("scale", "(C,)"),
        ("bias", "(C,)"),
        ("mean", "running mean (C,)"),
        ("var", "running variance (C,)"),
    ],
    output_docs=[
        ("Y", "normalized output"),
        ("running_mean", "updated in place (training)"),
        ("running_var", "updated in place (training)"),
        ("saved_mean", "batch mean (training)"),
        ("saved_inv_var", "1/sqrt(batch var + epsilon) (training)"),
    ],
    allow_inplace={(0, 0)},
    enforce_inplace={(3, 1), (4, 2)},
    infer=_infer_bn,
    category="normalization",
)
class SpatialBN(_BNBase):
    """Spatial batch normalization over every axis but the channel one (Caffe2's SpatialBN).
    Test mode (is_test=1): Y = (X - mean) / sqrt(var + epsilon) * scale + bias with the given
    statistics. Training: batch statistics, running statistics updated in place."""

    def setup(self) -> None:
        super().setup()
        self.is_test = bool(self.args.is_test)
        if not self.args.epsilon > 0:  # Caffe2: CAFFE_ENFORCE_GT(epsilon_, 0)
            raise self.arg_error(f"epsilon must be > 0, got {self.args.epsilon}")
        if not 0 <= self.args.momentum <= 1:
            raise self.arg_error(f"momentum must be in [0, 1], got {self.args.momentum}")
        if self.args.num_batches != 1:
            raise self.arg_error("num_batches > 1 (precomputed sums) is not supported")
        if self.is_test and len(self.outputs) != 1:
            raise self.arg_error("in test mode (is_test=1) SpatialBN has exactly one output")
        if not self.is_test and len(self.outputs) != 5:
            raise self.arg_error(
                "in training mode SpatialBN has 5 outputs (Y, running_mean, running_var, "
                "saved_mean, saved_inv_var); pass is_test=1 for inference"
            )

    def _prepare(self, x) -> None:
        self._prepare_bn(x)
        dt = x.dtype
        self._alpha = np.empty(self._c, dt)
        self._beta = np.empty(self._c, dt)
        self._tmp = None if self.is_test else np.empty(x.shape, dt)
        self._bvar = np.empty(self._c, dt)
        n = self._count
        self._unbias = dt.type(n / (n - 1) if n > 1 else 1.0)
        self._eps = dt.type(self.args.epsilon)
        self._m = dt.type(self.args.momentum)
        self._1m = dt.type(1.0 - self.args.momentum)

    def run(self) -> None:
        x = self.input(0)
        if self._key != (x.shape, x.dtype):
            self._prepare(x)
        scale, bias, mean, var = (self.input(i) for i in range(1, 5))
        for i, a in ((1, scale), (2, bias), (3, mean), (4, var)):
            self._check_vec(i, a, self._c, x.dtype)
        alpha, beta, b = self._alpha, self._beta, self._bshape
        if self.is_test:
            y = self.output(0, x.shape, x.dtype)
            np.add(var, self._eps, out=alpha)
            np.sqrt(alpha, out=alpha)
            np.divide(scale, alpha, out=alpha)
            np.multiply(mean, alpha, out=beta)
            np.subtract(bias, beta, out=beta)
            np.multiply(x, alpha.reshape(b), out=y)
            np.add(y, beta.reshape(b), out=y)
            return
        c = self._c
        sm = self.output(3, (c,), x.dtype)
        siv = self.output(4, (c,), x.dtype)
        np.mean(x, axis=self._axes, out=sm)
        y = self.output(0, x.shape, x.dtype)  # may be X itself: X is not read after this
        tmp = self._tmp
        np.subtract(x, sm.reshape(b), out=y)
        np.multiply(y, y, out=tmp)
        bvar = self._bvar
        np.mean(tmp, axis=self._axes, out=bvar)
        np.add(bvar, self._eps, out=siv)
        np.sqrt(siv, out=siv)
        np.divide(1, siv, out=siv)
        np.multiply(scale, siv, out=alpha)
        np.multiply(y, alpha.reshape(b), out=y)
        np.add(y, bias.reshape(b), out=y)
        rm = self.output(1, (c,), x.dtype)  # same blob as mean (enforced in place)
        rv = self.output(2, (c,), x.dtype)
        np.multiply(rm, self._m, out=rm)
        np.multiply(sm, self._1m, out=beta)
        np.add(rm, beta, out=rm)
        np.multiply(rv, self._m, out=rv)
        np.multiply(bvar, self._unbias * self._1m, out=beta)
        np.add(rv, beta, out=rv)


@register_op(
    "SpatialBNGradient",
    inputs=5,
    outputs=3,
    args=_BN_ARGS,
    input_docs=[
        ("X", "forward input"),
        ("scale", "(C,)"),
        ("dY", "gradient of Y"),
        ("mean", "saved_mean (training) or the running mean (is_test)"),
        ("inv_var", "saved_inv_var (training) or the running variance (is_test)"),
    ],
    output_docs=[("dX", "gradient of X"), ("dscale", "(C,)"), ("dbias", "(C,)")],
    infer=lambda args, ins: [ins[0], ins[1], ins[1]],
    category="normalization",
    private=True,
)
class SpatialBNGradient(_BNBase):
    """Gradients of SpatialBN; with is_test=1 input 4 is the variance, else 1/sqrt(var + eps)."""

    def _prepare(self, x) -> None:
        self._prepare_bn(x)
        self._xhat = np.empty(x.shape, x.dtype)
        self._tmp = np.empty(x.shape, x.dtype)
        self._rstd = np.empty(self._c, x.dtype)
        self._v = np.empty(self._c, x.dtype)

    def run(self) -> None:
        x, scale, dy, mean, iv = (self.input(i) for i in range(5))
        if self._key != (x.shape, x.dtype):
            self._prepare(x)
        if dy.shape != x.shape:
            raise ShapeError(
                f"{self.describe()}: '{self.input_names[2]}' must have X's shape {x.shape}, got {dy.shape}"
            )
        c, b = self._c, self._bshape
        rstd = self._rstd
        if self.args.is_test:
            np.add(iv, x.dtype.type(self.args.epsilon), out=rstd)
            np.sqrt(rstd, out=rstd)
            np.divide(1, rstd, out=rstd)
        else:
            np.copyto(rstd, iv)
        xhat, tmp = self._xhat, self._tmp
        np.subtract(x, mean.reshape(b), out=xhat)
        np.multiply(xhat, rstd.reshape(b), out=xhat)
        dx = self.output(0, x.shape, x.dtype)
        dscale = self.output(1, (c,), x.dtype)
        dbias = self.output(2, (c,), x.dtype)
        np.sum(dy, axis=self._axes, out=dbias)
        np.multiply(dy, xhat, out=tmp)
        np.sum(tmp, axis=self._axes, out=dscale)
        v = self._v
        np.multiply(scale, rstd, out=v)
        if self.args.is_test:
            np.multiply(dy, v.reshape(b), out=dx)
            return
        inv_n = x.dtype.type(1.0 / max(self._count, 1))
        # dX = scale * rstd * (dY - dbias / n - xhat * dscale / n)
        np.multiply(xhat, (dscale * inv_n).reshape(b), out=tmp)
        np.subtract(dy, tmp, out=dx)
        np.subtract(dx, (dbias * inv_n).reshape(b), out=dx)
        np.multiply(dx, v.reshape(b), out=dx)


@gradient("SpatialBN")
def _spatial_bn_grad(g):
    if g.arg("is_test", 0):
        ins = [g.I(0), g.I(1), g.GO(0), g.I(3), g.I(4)]
    else:
        ins = [g.I(0), g.I(1), g.GO(0), g.O(3), g.O(4)]
    return [g.op("SpatialBNGradient", ins, [g.GI(0), g.GI(1), g.GI(2)])]


# -- LRN ------------------------------------------------------------------------------------

_LRN_ARGS = [
    Arg("size", INT, REQUIRED, "number of channels summed over (odd)"),
    Arg("alpha", FLOAT, 0.0, "scale of the sum of squares"),
    Arg("beta", FLOAT, 0.0, "exponent"),
    Arg("bias", FLOAT, 1.0, "added to the scaled sum"),
    _ORDER,
]


class _LRNBase(_Norm):
    def setup(self) -> None:
        super().setup()
        size = self.args.size
        if size < 1 or size % 2 == 0:
            raise self.arg_error(f"size must be a positive odd number, got {size}")
        self.pre = (size - 1) // 2

    def _prepare_lrn(self, x) -> None:
        self._check_x(x)
        ca = _channel_axis(self.order, x.ndim)
        self._ca, c = ca, x.shape[ca]
        size = self.args.size
        padded = list(x.shape)
        padded[ca] = c + size - 1
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

_IN_ARGS = [Arg("epsilon", FLOAT, 1e-5, "added to the variance"), _ORDER]


def _infer_in(args, ins):
    x = ins[0]
    outs = [x]
    if args.num_outputs > 1:
        nc = None
        if x.shape is not None:
            nc = (x.shape[0], x.shape[_channel_axis(args.order, len(x.shape))])
        outs += [TensorSpec(nc, x.dtype)] * (args.num_outputs - 1)
    return outs


class _INBase(_Norm):
    def _prepare_in(self, x) -> None:
        self._check_x(x, 3)
        ca = _channel_axis(self.order, x.ndim)
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
    infer=_infer_in,
    category="normalization",
)
class InstanceNorm(_INBase):
    """Instance normalization (Caffe2's InstanceNorm): each (sample, channel) plane is
    normalized by its own mean and 1/sqrt(var + epsilon), then scaled and shifted per channel."""

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
    output_docs=[("dX", "gradient of X"), ("dscale", "(C,)"), ("dbias", "(C,)")],
    infer=lambda args, ins: [ins[0], ins[1], ins[1]],
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
        if len(self.inputs) == 6:
            mean, inv = self.input(4), self.input(5)
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
        ca = _channel_axis(self.order, x.ndim)
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


# -- LayerNorm ------------------------------------------------------------------------------

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


def _infer_ln(args, ins):
    x = ins[0]
    if x.shape is None:
        return [x, UNKNOWN, UNKNOWN]
    a = _ln_axis(args.axis, len(x.shape), "LayerNorm")
    st = TensorSpec(tuple(x.shape[:a]) + (1,), x.dtype)
    return [x, st, st]


@register_op(
    "LayerNorm",
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
)
class LayerNorm(Operator):
    """Layer normalization (Caffe2's LayerNorm): X is viewed as (prod(dims[:axis]),
    prod(dims[axis:])) and each row normalized by its mean and sqrt(var + epsilon)."""

    def setup(self) -> None:
        self._key = None
        if bool(self.args.elementwise_affine) != (len(self.inputs) == 3):
            raise self.arg_error("gamma and beta inputs go with elementwise_affine=1 (and only with it)")

    def run(self) -> None:
        x = self.input(0)
        if self._key != (x.shape, x.dtype):
            a = _ln_axis(self.args.axis, x.ndim, self.describe())
            self._rows, self._d = math.prod(x.shape[:a]), math.prod(x.shape[a:])
            self._sshape = tuple(x.shape[:a]) + (1,)
            self._tmp = np.empty((self._rows, self._d), x.dtype)
            self._eps = x.dtype.type(self.args.epsilon)
            self._key = (x.shape, x.dtype)
        rows, d = self._rows, self._d
        mean = self.output(1, self._sshape, x.dtype)
        std = self.output(2, self._sshape, x.dtype)
        y = self.output(0, x.shape, x.dtype)
        x2, y2 = x.reshape(rows, d), y.reshape(rows, d)
        m2, s2 = mean.reshape(rows, 1), std.reshape(rows, 1)
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
            a = _ln_axis(self.args.axis, x.ndim, self.describe())
            self._rows, self._d = math.prod(x.shape[:a]), math.prod(x.shape[a:])
            self._xhat = np.empty((self._rows, self._d), x.dtype)
            self._g = np.empty((self._rows, self._d), x.dtype)
            self._r1 = np.empty((self._rows, 1), x.dtype)
            self._key = (x.shape, x.dtype)
        rows, d = self._rows, self._d
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
