"""Per-channel affine maps and statistics: GroupNorm (+GroupNormGradient), AffineChannel
(+AffineChannelGradient), ChannelStats and ChannelBackpropStats (the sums SpatialBN's
multi-device training reduces)."""

from __future__ import annotations

import math

import numpy as np

from framework.errors import GradientError, ShapeError
from framework.ops.gradient import gradient, should_not_do_gradient
from framework.ops.nn.normalization import ORDER_ARG, NormOp, channel_axis
from framework.ops.registry import register_op
from framework.ops.schema import BOOL, FLOAT, INT, Arg, TensorSpec
from framework.ops.validation import expect_same_shape


def _to_nc_rest(x: np.ndarray, c_axis: int) -> np.ndarray:
    """X as N x C x (rest), a view for NCHW, a transposed copy for NHWC."""
    rest = math.prod(d for i, d in enumerate(x.shape) if i not in (0, c_axis))  # explicit: N may be 0
    return np.moveaxis(x, c_axis, 1).reshape(x.shape[0], x.shape[c_axis], rest)


def _from_nc_rest(v: np.ndarray, shape: tuple, c_axis: int) -> np.ndarray:
    moved = list(shape)
    moved.insert(1, moved.pop(c_axis))
    return np.moveaxis(v.reshape(moved), 1, c_axis)


# -- GroupNorm ------------------------------------------------------------------------------------

_GN_ARGS = [
    Arg("group", INT, 32, "number of channel groups (must divide C)"),
    Arg("epsilon", FLOAT, 1e-5, "added to the variance"),
    ORDER_ARG,
]


def _gn_infer(args, ins):
    x = ins[0]
    if x.shape is None or len(x.shape) < 2:
        return [x] + [TensorSpec(None, x.dtype)] * (args.num_outputs - 1)
    st = TensorSpec((x.shape[0], args.group), x.dtype)
    return [x] + [st] * (args.num_outputs - 1)


class _GroupNormBase(NormOp):
    def _groups(self, x: np.ndarray) -> tuple[int, int]:
        self._check_x(x)
        c_axis = channel_axis(self, x.ndim)
        c, g = x.shape[c_axis], self.args.group
        if g <= 0 or c % g:
            raise ShapeError(f"{self.describe()}: group {g} must divide the {c} channels of '{self.input_names[0]}'")
        return c_axis, g


@register_op(
    "GroupNorm",
    inputs=3,
    outputs=frozenset({1, 3}),
    args=_GN_ARGS,
    input_docs=[("X", "N x C x ... (NCHW) or N x ... x C (NHWC)"), ("gamma", "scale, (C,)"), ("beta", "shift, (C,)")],
    output_docs=[
        ("Y", "normalized X"),
        ("mean", "(N, G) group means (optional, with inv_std)"),
        ("inv_std", "(N, G) 1 / sqrt(var + epsilon) (optional, with mean)"),
    ],
    infer=_gn_infer,
    category="normalization",
)
class GroupNorm(_GroupNormBase):
    """Group normalization: the channels are split in `group` groups; each (sample, group) is
    normalized by its own mean and variance over its channels and positions, then scaled by
    gamma and shifted by beta per channel. mean and inv_std are for the gradient, not activations.

    The third output is the inverse standard deviation ``1 / sqrt(var + epsilon)``, as Caffe2's kernel
    writes it (2018 and 2020, and its recorded golden outputs), although its schema calls it "std"."""

    def run(self) -> None:
        x = self.input(0)
        c_axis, g = self._groups(x)
        n, c = x.shape[0], x.shape[c_axis]
        for i in (1, 2):
            self._check_vec(i, self.input(i), c, x.dtype)
        xr = _to_nc_rest(x, c_axis).reshape(n, g, x.size // max(n * g, 1) if n else 0).astype(np.float64)
        if xr.shape[2]:
            mu = xr.mean(axis=2)
            var = ((xr - mu[..., None]) ** 2).mean(axis=2)
        else:
            mu = var = np.zeros((n, g))
        sig = np.sqrt(var + self.args.epsilon)
        xhat = ((xr - mu[..., None]) / sig[..., None]).reshape(n, c, x.size // max(n * c, 1) if n else 0)
        y = xhat * self.input(1)[None, :, None] + self.input(2)[None, :, None]
        self.output(0, x.shape, x.dtype)[...] = _from_nc_rest(y, x.shape, c_axis)
        if len(self.outputs) == 3:
            self.output(1, (n, g), x.dtype)[...] = mu
            self.output(2, (n, g), x.dtype)[...] = 1.0 / sig


@register_op(
    "GroupNormGradient",
    inputs=6,
    outputs=3,
    args=_GN_ARGS,
    input_docs=[
        ("dY", "gradient of Y"),
        ("X", "forward input"),
        ("gamma", "scale"),
        ("beta", "shift"),
        ("mean", "forward mean"),
        ("inv_std", "forward 1 / sqrt(var + epsilon)"),
    ],
    output_docs=[("dX", "gradient of X"), ("dgamma", "(C,)"), ("dbeta", "(C,)")],
    infer=lambda args, ins: [ins[1], ins[2], ins[2]],
    category="normalization",
    private=True,
)
class GroupNormGradient(_GroupNormBase):
    """dX = (dXhat - mean(dXhat) - Xhat mean(dXhat Xhat)) * inv_std per group, dXhat = dY gamma;
    dgamma = sum dY Xhat, dbeta = sum dY per channel."""

    def run(self) -> None:
        dy, x = self.input(0), self.input(1)
        c_axis, g = self._groups(x)
        n, c = x.shape[0], x.shape[c_axis]
        expect_same_shape(self, 1, x, 0, dy)
        gamma = self.input(2)
        self._check_vec(2, gamma, c, x.dtype)
        mu, rsig = self.input(4), self.input(5)
        for i, a in ((4, mu), (5, rsig)):
            if a.shape != (n, g):
                raise ShapeError(
                    f"{self.describe()}: input {i} ('{self.input_names[i]}') must be ({n}, {g}), got {a.shape}"
                )
        xr = _to_nc_rest(x, c_axis).reshape(n, g, x.size // max(n * g, 1) if n else 0).astype(np.float64)
        dyr = _to_nc_rest(dy, c_axis).astype(np.float64)
        xhat = (xr - mu[..., None]) * rsig[..., None]
        dxhat = (dyr * gamma[None, :, None]).reshape(n, g, x.size // max(n * g, 1) if n else 0)
        d = max(xr.shape[2], 1)
        dx = dxhat - dxhat.sum(axis=2, keepdims=True) / d - xhat * (dxhat * xhat).sum(axis=2, keepdims=True) / d
        dx = (dx * rsig[..., None]).reshape(n, c, x.size // max(n * c, 1) if n else 0)
        self.output(0, x.shape, x.dtype)[...] = _from_nc_rest(dx, x.shape, c_axis)
        self.output(1, (c,), x.dtype)[...] = (dyr * xhat.reshape(n, c, x.size // max(n * c, 1) if n else 0)).sum(
            axis=(0, 2)
        )
        self.output(2, (c,), x.dtype)[...] = dyr.sum(axis=(0, 2))


@gradient("GroupNorm")
def _group_norm_grad(g):
    if len(g.def_.output) < 3:
        raise GradientError("GroupNorm: the gradient needs the mean and inv_std outputs (use the 3-output form)")
    return [g.op("GroupNormGradient", [g.GO(0), g.I(0), g.I(1), g.I(2), g.O(1), g.O(2)], [g.GI(0), g.GI(1), g.GI(2)])]


# -- AffineChannel -------------------------------------------------------------------------------

_AC_ARGS = [ORDER_ARG, Arg("is_learnable", BOOL, False, "scale and bias get gradients too")]


class _AffineBase(NormOp):
    def _scale_shape(self, x: np.ndarray, i: int) -> tuple[int, list]:
        self._check_x(x)
        c_axis = channel_axis(self, x.ndim)
        c = x.shape[c_axis]
        self._check_vec(i, self.input(i), c, x.dtype)
        shape = [1] * x.ndim
        shape[c_axis] = c
        return c_axis, shape


@register_op(
    "AffineChannel",
    inputs=3,
    args=_AC_ARGS,
    input_docs=[("X", "feature map, NCHW or NHWC"), ("scale", "(C,)"), ("bias", "(C,)")],
    output_docs=[("Y", "X * scale + bias per channel")],
    allow_inplace={(0, 0)},
    infer=lambda args, ins: [ins[0]],
    category="normalization",
)
class AffineChannel(_AffineBase):
    """Y = X * scale[c] + bias[c] per channel (a frozen batch norm)."""

    def run(self) -> None:
        x = self.input(0)
        _, shape = self._scale_shape(x, 1)
        self._check_vec(2, self.input(2), shape[channel_axis(self, x.ndim)], x.dtype)
        y = x * self.input(1).reshape(shape) + self.input(2).reshape(shape)
        self.output(0, x.shape, x.dtype)[...] = y


@register_op(
    "AffineChannelGradient",
    inputs=(2, 3),
    outputs=(1, 3),
    args=_AC_ARGS,
    input_docs=[("dY", "gradient of Y"), ("X or scale", "X (is_learnable), else scale"), ("scale", "(is_learnable)")],
    output_docs=[("dX", "dY * scale"), ("dscale", "sum of dY * X per channel"), ("dbias", "sum of dY per channel")],
    allow_inplace={(0, 0)},
    infer=lambda args, ins: [ins[0]] + [ins[-1], ins[-1]][: args.num_outputs - 1],
    category="normalization",
    private=True,
)
class AffineChannelGradient(_AffineBase):
    """dX = dY * scale; with is_learnable also dscale = sum dY X and dbias = sum dY."""

    def run(self) -> None:
        dy = self.input(0)
        learn = self.args.is_learnable
        si = 2 if learn else 1
        if learn and len(self.inputs) < 3:
            raise self.arg_error("is_learnable=1 needs the inputs (dY, X, scale)")
        c_axis, shape = self._scale_shape(dy, si)
        scale = self.input(si)
        if learn:
            x = self.input(1)
            expect_same_shape(self, 0, dy, 1, x)
            axes = tuple(a for a in range(dy.ndim) if a != c_axis)
            ds, db = (dy * x).sum(axis=axes), dy.sum(axis=axes)
        dx = dy * scale.reshape(shape)
        self.output(0, dy.shape, dy.dtype)[...] = dx
        if learn and len(self.outputs) > 2:
            self.output(1, scale.shape, dy.dtype)[...] = ds
            self.output(2, scale.shape, dy.dtype)[...] = db


@gradient("AffineChannel")
def _affine_channel_grad(g):
    if g.arg("is_learnable", 0):
        return [g.op("AffineChannelGradient", [g.GO(0), g.I(0), g.I(1)], [g.GI(0), g.GI(1), g.GI(2)])]
    return [g.op("AffineChannelGradient", [g.GO(0), g.I(1)], [g.GI(0)])]


# -- ChannelStats / ChannelBackpropStats ----------------------------------------------------------


@register_op(
    "ChannelStats",
    outputs=2,
    args=[ORDER_ARG],
    input_docs=[("X", "feature map, NCHW or NHWC")],
    output_docs=[("sum", "(C,) sum of X per channel"), ("sumsq", "(C,) sum of X^2 per channel")],
    infer=lambda args, ins: (
        [
            TensorSpec(
                None
                if ins[0].shape is None or len(ins[0].shape) < 2
                else (ins[0].shape[channel_axis(args.order, len(ins[0].shape))],),
                ins[0].dtype,
            )
        ]
        * 2
    ),
    category="normalization",
)
class ChannelStats(NormOp):
    """Per-channel sum and sum of squares over the batch and positions."""

    def run(self) -> None:
        x = self.input(0)
        self._check_x(x)
        c_axis = channel_axis(self, x.ndim)
        axes = tuple(a for a in range(x.ndim) if a != c_axis)
        c = x.shape[c_axis]
        self.output(0, (c,), x.dtype)[...] = x.sum(axis=axes)
        self.output(1, (c,), x.dtype)[...] = (x.astype(np.float64) ** 2).sum(axis=axes)


@register_op(
    "ChannelBackpropStats",
    inputs=4,
    outputs=2,
    input_docs=[("X", "N x C x ... input"), ("mean", "(C,)"), ("invStd", "(C,)"), ("outputGrad", "dY, shaped as X")],
    output_docs=[("scaleGrad", "(C,) sum of dY (X - mean) invStd"), ("biasGrad", "(C,) sum of dY")],
    infer=lambda args, ins: (
        [TensorSpec(None if ins[0].shape is None or len(ins[0].shape) < 2 else (ins[0].shape[1],), ins[0].dtype)] * 2
    ),
    category="normalization",
)
class ChannelBackpropStats(NormOp):
    """SpatialBN's scale and bias gradients (NCHW): sums over the batch and positions."""

    def run(self) -> None:
        x, dy = self.input(0), self.input(3)
        self._check_x(x)
        c = x.shape[1]
        for i in (1, 2):
            self._check_vec(i, self.input(i), c, x.dtype)
        expect_same_shape(self, 0, x, 3, dy)
        axes = tuple(a for a in range(x.ndim) if a != 1)
        shape = [1, c] + [1] * (x.ndim - 2)
        xhat = (x - self.input(1).reshape(shape)) * self.input(2).reshape(shape)
        self.output(0, (c,), x.dtype)[...] = (dy * xhat).sum(axis=axes)
        self.output(1, (c,), x.dtype)[...] = dy.sum(axis=axes)


should_not_do_gradient("ChannelStats", "ChannelBackpropStats")
