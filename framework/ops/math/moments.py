"""Moments and norm reductions: Moments (mean and population variance over `axes`),
BatchMoments (per-channel E[X] and E[X^2], NCHW or NHWC), ReduceL1 and ReduceL2 (over `axes`),
with Caffe2's gradient ops MomentsGradient(dmean, dvariance, X, mean),
BatchMomentsGradient(dmu, dvar, X) and ReduceL{1,2}Gradient(dY, X, Y).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from framework.errors import ShapeError
from framework.ops.gradient import gradient
from framework.ops.math.elementwise import check_kind
from framework.ops.math.reduce import canon_axes, reduce_cost, reduced_shape
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import INT, INTS, STRING, Arg, TensorSpec

_AXES = [
    Arg("axes", INTS, None, "axes to reduce (default: all)"),
    Arg("keepdims", INT, 1, "1 keeps the reduced axes with size 1, 0 drops them"),
]


def _float(op: Operator, i: int) -> np.ndarray:
    x = op.input(i)
    if x.dtype.kind != "f":
        check_kind(op, i, x, "f")
    return x


def _axes_infer(n_out: int):
    def infer(args: Any, ins: list[TensorSpec]) -> list[TensorSpec]:
        x = ins[0]
        if x.shape is None:
            return [TensorSpec(None, x.dtype)] * n_out
        axes = canon_axes(args.axes, len(x.shape), "")
        return [TensorSpec(reduced_shape(tuple(x.shape), axes, bool(args.keepdims)), x.dtype)] * n_out

    return infer


def _check_like(op: Operator, i: int, arr: np.ndarray, shape: tuple) -> None:
    if arr.size != int(np.prod(shape, dtype=np.int64)):
        raise ShapeError(
            f"{op.describe()}: input {i} ('{op.input_names[i]}') has shape {list(arr.shape)}, "
            f"expected {int(np.prod(shape, dtype=np.int64))} elements (the reduced shape {list(shape)})"
        )


# -- Moments ------------------------------------------------------------------------------------------


@register_op(
    "Moments",
    outputs=2,
    args=_AXES,
    input_docs=[("data", "float tensor")],
    output_docs=[("mean", "mean over `axes`"), ("variance", "population variance over `axes`")],
    infer=_axes_infer(2),
    cost=reduce_cost,
    category="reduction",
)
class Moments(Operator):
    """Mean and (biased, population) variance of the input over `axes` (all by default)."""

    def run(self) -> None:
        x = _float(self, 0)
        axes = canon_axes(self.args.axes, x.ndim, self.describe())
        shape = reduced_shape(x.shape, axes, bool(self.args.keepdims))
        kept = reduced_shape(x.shape, axes, True)
        if x.size == 0:  # an empty reduction: 0 / 0, NaN as in Caffe2
            mean = var = np.full(kept, np.nan, x.dtype)
        else:
            mean = np.mean(x, axis=axes, keepdims=True)
            var = np.mean(np.square(x - mean), axis=axes, keepdims=True)
        self.output(0, shape, x.dtype)[...] = mean.reshape(shape)
        self.output(1, shape, x.dtype)[...] = var.reshape(shape)


@register_op(
    "MomentsGradient",
    inputs=4,
    args=_AXES,
    input_docs=[
        ("dmean", "gradient of mean"),
        ("dvariance", "gradient of variance"),
        ("X", "forward input"),
        ("mean", "forward mean"),
    ],
    output_docs=[("dX", "gradient of X")],
    infer=lambda args, ins: [TensorSpec(ins[2].shape, ins[2].dtype)],
    cost=reduce_cost,
    category="reduction",
    private=True,
)
class MomentsGradient(Operator):
    """dX = (dmean + 2 (X - mean) dvariance) / N, N the number of reduced elements per output."""

    def run(self) -> None:
        dm, dv, x, m = (_float(self, i) for i in range(4))
        axes = canon_axes(self.args.axes, x.ndim, self.describe())
        kept = reduced_shape(x.shape, axes, True)
        for i, a in ((0, dm), (1, dv), (3, m)):
            _check_like(self, i, a, kept)
        n = int(np.prod([x.shape[a] for a in axes], dtype=np.int64)) or 1
        dx = self.output(0, x.shape, x.dtype)
        dx[...] = (dm.reshape(kept) + 2.0 * (x - m.reshape(kept)) * dv.reshape(kept)) / n


@gradient("Moments")
def _moments_grad(g):
    return [g.op("MomentsGradient", [g.GO(0), g.GO(1), g.I(0), g.O(0)], [g.GI(0)])]


# -- BatchMoments -------------------------------------------------------------------------------------

_ORDER = [Arg("order", STRING, "NCHW", "NCHW (channels on axis 1) or NHWC (channels last)")]


def _channel_axis(op: Operator, x: np.ndarray) -> int:
    if op.args.order not in ("NCHW", "NHWC"):
        raise op.arg_error(f"argument 'order' must be NCHW or NHWC, got {op.args.order!r}")
    if x.ndim < 2:
        raise ShapeError(
            f"{op.describe()}: input ('{op.input_names[0]}') must have at least 2 dims, got {list(x.shape)}"
        )
    return 1 if op.args.order == "NCHW" else x.ndim - 1


def _bm_infer(args: Any, ins: list[TensorSpec]) -> list[TensorSpec]:
    x = ins[0]
    if x.shape is None or len(x.shape) < 2:
        return [TensorSpec(None, x.dtype)] * 2
    c = x.shape[1] if args.order == "NCHW" else x.shape[-1]
    return [TensorSpec((c,), x.dtype)] * 2


@register_op(
    "BatchMoments",
    outputs=2,
    args=_ORDER,
    input_docs=[("X", "float tensor, N x C x ... (NCHW) or N x ... x C (NHWC)")],
    output_docs=[("mu", "per-channel mean E[X], shape [C]"), ("var", "per-channel E[X^2], shape [C]")],
    infer=_bm_infer,
    cost=reduce_cost,
    category="reduction",
)
class BatchMoments(Operator):
    """Per-channel first and second raw moments over every axis but the channel one:
    mu = E[X], var = E[X^2] (Caffe2's `var` output is the raw second moment, not the variance)."""

    def run(self) -> None:
        x = _float(self, 0)
        c = _channel_axis(self, x)
        axes = tuple(a for a in range(x.ndim) if a != c)
        mu = self.output(0, (x.shape[c],), x.dtype)
        var = self.output(1, (x.shape[c],), x.dtype)
        if x.size == 0:
            mu.fill(0)
            var.fill(0)
            return
        np.mean(x, axis=axes, out=mu)
        np.mean(np.square(x), axis=axes, out=var)


@register_op(
    "BatchMomentsGradient",
    inputs=3,
    args=_ORDER,
    input_docs=[("dmu", "gradient of mu"), ("dvar", "gradient of var"), ("X", "forward input")],
    output_docs=[("dX", "gradient of X")],
    infer=lambda args, ins: [TensorSpec(ins[2].shape, ins[2].dtype)],
    cost=reduce_cost,
    category="reduction",
    private=True,
)
class BatchMomentsGradient(Operator):
    """dX = (dmu + 2 X dvar) / (N * HxW), per channel."""

    def run(self) -> None:
        dmu, dvar, x = (_float(self, i) for i in range(3))
        c = _channel_axis(self, x)
        for i, a in ((0, dmu), (1, dvar)):
            _check_like(self, i, a, (x.shape[c],))
        shape = [1] * x.ndim
        shape[c] = x.shape[c]
        n = max(x.size // max(x.shape[c], 1), 1)
        dx = self.output(0, x.shape, x.dtype)
        dx[...] = (dmu.reshape(shape) + 2.0 * x * dvar.reshape(shape)) / n


@gradient("BatchMoments")
def _batch_moments_grad(g):
    return [g.op("BatchMomentsGradient", [g.GO(0), g.GO(1), g.I(0)], [g.GI(0)])]


# -- ReduceL1 / ReduceL2 ------------------------------------------------------------------------------

_KEPS = 1e-12  # Caffe2's threshold in both backward passes


class _ReduceNorm(Operator):
    p = 1

    def run(self) -> None:
        x = _float(self, 0)
        axes = canon_axes(self.args.axes, x.ndim, self.describe())
        out = self.output(0, reduced_shape(x.shape, axes, bool(self.args.keepdims)), x.dtype)
        keep = bool(self.args.keepdims)
        if self.p == 1:
            np.sum(np.abs(x), axis=axes, out=out, keepdims=keep)
        else:
            np.sum(np.square(x), axis=axes, out=out, keepdims=keep)
            np.sqrt(out, out=out)


class _ReduceNormGradient(Operator):
    """ReduceL1: dX = sign(X) dY (0 where |X| <= 1e-12); ReduceL2: dX = X / Y dY (dY where Y < 1e-12)."""

    p = 1

    def run(self) -> None:
        dy, x, y = (_float(self, i) for i in range(3))
        axes = canon_axes(self.args.axes, x.ndim, self.describe())
        kept = reduced_shape(x.shape, axes, True)
        _check_like(self, 0, dy, kept)
        _check_like(self, 2, y, kept)
        dyk = dy.reshape(kept)
        dx = self.output(0, x.shape, x.dtype)
        if self.p == 1:
            dx[...] = dyk * ((x > _KEPS).astype(x.dtype) - (x < -_KEPS).astype(x.dtype))
        else:
            yk = y.reshape(kept)
            small = yk < _KEPS
            with np.errstate(divide="ignore", invalid="ignore"):
                dx[...] = np.where(small, dyk, dyk * x / np.where(small, 1, yk))


for _p in (1, 2):
    _name = f"ReduceL{_p}"
    register_op(
        _name,
        args=_AXES,
        doc=f"The L{_p} norm of the input's elements along `axes` (all by default): "
        + ("sum(|X|)." if _p == 1 else "sqrt(sum(X^2))."),
        input_docs=[("data", "float tensor")],
        output_docs=[("reduced", "the norms")],
        infer=_axes_infer(1),
        cost=reduce_cost,
        category="reduction",
    )(type(_name, (_ReduceNorm,), {"p": _p, "__doc__": _name}))
    register_op(
        _name + "Gradient",
        inputs=3,
        args=_AXES,
        doc=_ReduceNormGradient.__doc__,
        input_docs=[("dY", "gradient of the norms"), ("X", "forward input"), ("Y", "forward output")],
        output_docs=[("dX", "gradient of X")],
        infer=lambda args, ins: [TensorSpec(ins[1].shape, ins[1].dtype)],
        cost=reduce_cost,
        category="reduction",
        private=True,
    )(type(_name + "Gradient", (_ReduceNormGradient,), {"p": _p, "__doc__": _ReduceNormGradient.__doc__}))


def _reduce_norm_grad(g):
    return [g.op(g.def_.type + "Gradient", [g.GO(0), g.I(0), g.O(0)], [g.GI(0)])]


gradient("ReduceL1")(_reduce_norm_grad)
gradient("ReduceL2")(_reduce_norm_grad)
