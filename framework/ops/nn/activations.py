"""The rectifier family: Relu, LeakyRelu, PRelu, Elu, Selu, with their gradient ops.

Every forward op may run in place (output blob == input blob). The gradient ops read the
forward *output* ``Y`` and ``dY`` (so the forward may run in place), except PRelu's, which
reads ``Y, dY, X, slope``. The shared registration machinery is in ``framework.ops.pointwise``;
the smooth activations (Sigmoid, Tanh, ...) are in ``framework.ops.nn.smooth_activations``.
"""

from __future__ import annotations

from functools import partial

import numpy as np

from framework.errors import ShapeError
from framework.kernels import bn_train
from framework.ops.gradient import gradient
from framework.ops.operator import Operator
from framework.ops.pointwise import (
    Y_DY_DOCS,
    Activation,
    PointwiseGradient,
    activation_op,
    check_same_shape,
    float_input,
    pointwise_gradient,
    scratch,
)
from framework.ops.registry import register_op
from framework.ops.schema import FLOAT, STRING, UNKNOWN, Arg, pointwise_cost, same_as_input
from framework.runtime.state import RUNTIME

# Caffe2's SELU constants (selu_op.h).
SELU_ALPHA = 1.6732632423543772848170429916717
SELU_SCALE = 1.0507009873554804934193349852946


# -- Relu ------------------------------------------------------------------------------


@activation_op("Relu", 1, y_doc="max(X, 0), same shape as X")
class Relu(Operator):
    """Rectified linear unit: Y = max(X, 0), elementwise. Float and integer dtypes."""

    def run(self) -> None:
        x = self.input(0)
        y = self.output(0, x.shape, x.dtype)
        if x.dtype.kind == "f" and _CLIP is not None:
            lo, hi = _relu_bounds(x.dtype)
            _CLIP(x, lo, hi, y)
        else:
            np.maximum(x, x.dtype.type(0), out=y)

    def compile(self):
        """run() bound to the current arrays (the net's fast path; see framework.net.program)."""
        x = self.input(0)
        y = self.output(0, x.shape, x.dtype)
        job = bn_train.relu_job(x, y)  # float32 over several intra-op threads: split as a native job
        if job is not None:
            return job
        if x.dtype.kind == "f" and _CLIP is not None:
            # Positional arguments only: partial() then makes a C-level call (no kwargs to merge).
            return partial(_CLIP, x, *_relu_bounds(x.dtype), y)
        zero, maximum = np.zeros((), x.dtype), np.maximum

        def relu() -> None:  # a closure: cheaper than partial() with out= (which merges kwargs per call)
            maximum(x, zero, out=y)

        return relu


# Float Relu is clip(X, 0, +inf) through the ufunc behind np.clip: numpy's maximum against a scalar
# has no SIMD loop, and clip takes ``out`` positionally
# (np.maximum deprecates that). Same values as max(X, 0), NaN propagated; -0.0 stays -0.0 (as C++'s
# std::max(x, 0.f) in Caffe2).
_CLIP = getattr(getattr(getattr(np, "_core", None), "umath", None), "clip", None)
_RELU_BOUNDS: dict[np.dtype, tuple[np.ndarray, np.ndarray]] = RUNTIME.held("ops.nn.relu_bounds", dict)


def _relu_bounds(dtype: np.dtype) -> tuple[np.ndarray, np.ndarray]:
    b = _RELU_BOUNDS.get(dtype)
    if b is None:
        b = (np.zeros((), dtype), np.full((), np.inf, dtype))
        for a in b:
            a.setflags(write=False)
        _RELU_BOUNDS[dtype] = b
    return b


@register_op(
    "ReluGradient",
    inputs=2,
    input_docs=Y_DY_DOCS,
    output_docs=[("dX", "gradient of X")],
    allow_inplace={(1, 0)},
    infer=same_as_input(1),
    category="activation",
    private=True,
    input_types="numeric",
)
class ReluGradient(Operator):
    """dX = dY where Y > 0, else 0."""

    def run(self) -> None:
        y, dy = self.input(0), self.input(1)
        check_same_shape(self, 0, 1, y, dy)
        dx = self.output(0, dy.shape, dy.dtype)
        if bn_train.relu_grad(y, dy, dx):  # float32: one compiled pass
            self._jit_ran = True
            return
        mask = scratch(self, "_mask", y.shape, np.dtype(bool))
        np.greater(y, y.dtype.type(0), out=mask)
        np.multiply(dy, mask, out=dx)

    def compile(self):
        """A closure doing run()'s work on the arrays bound now (see framework.net.program)."""
        y, dy, dx = self.input(0), self.input(1), self.outputs[0].array
        if self.__dict__.get("_jit_ran") and dx is not None and dx.shape == dy.shape == y.shape:
            job = bn_train.relu_grad_job(y, dy, dx)  # run()'s compiled pass, its native job bound to the arrays
            if job is not None:
                return job
        mask = self.__dict__.get("_mask")
        if dx is None or mask is None or mask.shape != y.shape or dx.shape != dy.shape:
            return None
        zero, greater, multiply = np.zeros((), y.dtype), np.greater, np.multiply

        def relu_grad() -> None:
            greater(y, zero, out=mask)
            multiply(dy, mask, out=dx)

        return relu_grad


@gradient("Relu")
def _relu_grad(g):
    return [g.op("ReluGradient", [g.O(0), g.GO(0)], [g.GI(0)])]


# -- LeakyRelu -------------------------------------------------------------------------------


@activation_op("LeakyRelu", 2, args=[Arg("alpha", FLOAT, 0.01, "slope for X < 0")])
class LeakyRelu(Activation):
    """Leaky rectifier: Y = X if X >= 0 else alpha * X."""

    def setup(self) -> None:
        self._alpha = float(self.args.alpha)
        # max(X, aX) is the leaky relu for a <= 1, min(X, aX) for a > 1.
        self._pick = np.maximum if self._alpha <= 1.0 else np.minimum

    def forward(self, x: np.ndarray, y: np.ndarray) -> None:
        tmp = scratch(self, "_tmp", x.shape, x.dtype)
        np.multiply(x, x.dtype.type(self._alpha), out=tmp)
        self._pick(x, tmp, out=y)


@pointwise_gradient(LeakyRelu)
class LeakyReluGradient(PointwiseGradient):
    """dX = dY where Y > 0, else alpha * dY."""

    def grad(self, y: np.ndarray, dy: np.ndarray, dx: np.ndarray) -> None:
        alpha = float(self.args.alpha)
        mask = scratch(self, "_mask", y.shape, np.dtype(bool))
        np.greater(y, 0, out=mask)
        # dx = dy * (alpha + (1 - alpha) * mask); written so dx may alias dy.
        tmp = scratch(self, "_tmp", y.shape, dy.dtype)
        np.multiply(mask, dy.dtype.type(1.0 - alpha), out=tmp)
        tmp += dy.dtype.type(alpha)
        np.multiply(dy, tmp, out=dx)


# -- PRelu -------------------------------------------------------------------------------------


def _prelu_slope_view(op: Operator, x: np.ndarray, w: np.ndarray, nchw: bool) -> np.ndarray:
    """The slope reshaped to broadcast over X (shared: size 1; else one per channel)."""
    if w.size == 1:
        return w.reshape(())
    if x.ndim < 2 and nchw:
        raise ShapeError(f"{op.describe()}: per-channel PRelu needs X with a channel dimension, got {list(x.shape)}")
    c = x.shape[1] if nchw else x.shape[-1]
    if w.size != c:
        raise ShapeError(
            f"{op.describe()}: slope '{op.input_names[1]}' has {w.size} values, but X '{op.input_names[0]}' "
            f"{list(x.shape)} has {c} channels ({'NCHW' if nchw else 'NHWC'}); give 1 or {c} values"
        )
    if nchw:
        return w.reshape((c,) + (1,) * (x.ndim - 2))
    return w.reshape((c,))


def _check_order(op: Operator) -> bool:
    order = op.args.order
    if order not in ("NCHW", "NHWC"):
        raise op.arg_error(f"argument 'order' must be NCHW or NHWC, got {order!r}")
    return order == "NCHW"


@register_op(
    "PRelu",
    inputs=2,
    input_docs=[("X", "input tensor"), ("Slope", "slope: 1 value (shared) or one per channel")],
    output_docs=[("Y", "output tensor, shaped as X")],
    args=[Arg("order", STRING, "NCHW", "where the channel dimension is: NCHW (dim 1) or NHWC (last)")],
    allow_inplace={(0, 0)},
    infer=same_as_input(0),
    cost=pointwise_cost(3),
    category="activation",
)
class PRelu(Operator):
    """Parametric relu: Y = X if X > 0 else slope * X, slope shared or per channel."""

    def setup(self) -> None:
        self._nchw = _check_order(self)

    def run(self) -> None:
        x, w = float_input(self, 0), float_input(self, 1)
        slope = _prelu_slope_view(self, x, w, self._nchw)
        tmp = scratch(self, "_tmp", x.shape, x.dtype)
        np.minimum(x, x.dtype.type(0), out=tmp)
        tmp *= slope
        y = self.output(0, x.shape, x.dtype)
        np.maximum(x, x.dtype.type(0), out=y)
        y += tmp


def _infer_prelu_grad(args, ins):
    x = ins[2] if len(ins) > 2 else None
    w = ins[3] if len(ins) > 3 else None
    return [x if x is not None else UNKNOWN, w if w is not None else UNKNOWN]


@register_op(
    "PReluGradient",
    inputs=4,
    outputs=2,
    input_docs=[("Y", "forward output"), ("dY", "gradient of Y"), ("X", "forward input"), ("Slope", "slope")],
    output_docs=[("dX", "gradient of X"), ("dSlope", "gradient of the slope")],
    args=[Arg("order", STRING, "NCHW", "NCHW or NHWC")],
    infer=_infer_prelu_grad,
    category="activation",
    private=True,
)
class PReluGradient(Operator):
    """dX = dY where X > 0 else slope * dY; dSlope = sum of dY * X over X <= 0 (per channel)."""

    def setup(self) -> None:
        self._nchw = _check_order(self)

    def run(self) -> None:
        dy, x, w = float_input(self, 1), float_input(self, 2), float_input(self, 3)
        check_same_shape(self, 1, 2, dy, x)
        slope = _prelu_slope_view(self, x, w, self._nchw)
        neg = scratch(self, "_neg", x.shape, x.dtype)
        np.minimum(x, x.dtype.type(0), out=neg)  # X where X <= 0, else 0
        neg *= dy
        dw = self.output(1, w.shape, w.dtype)
        if w.size == 1:
            dw.reshape(-1)[0] = neg.sum()
        elif self._nchw:
            axes = (0,) + tuple(range(2, x.ndim))
            np.sum(neg, axis=axes, out=dw.reshape(-1))
        else:
            np.sum(neg.reshape(-1, w.size), axis=0, out=dw.reshape(-1))
        mask = scratch(self, "_mask", x.shape, np.dtype(bool))
        np.greater(x, 0, out=mask)
        factor = scratch(self, "_factor", x.shape, x.dtype)
        factor[...] = slope
        np.copyto(factor, x.dtype.type(1), where=mask)
        np.multiply(dy, factor, out=self.output(0, x.shape, x.dtype))


@gradient("PRelu")
def _prelu_grad(g):
    return [g.op("PReluGradient", [g.O(0), g.GO(0), g.I(0), g.I(1)], [g.GI(0), g.GI(1)])]


# -- Elu / Selu ------------------------------------------------------------------------------


def _exp_linear(x: np.ndarray, y: np.ndarray, tmp: np.ndarray, neg_scale: float, pos_scale: float | None) -> None:
    """y = pos_scale * max(x, 0) + neg_scale * expm1(min(x, 0)) (pos_scale None: 1); y may alias x."""
    t = x.dtype.type
    np.minimum(x, t(0), out=tmp)
    np.expm1(tmp, out=tmp)
    tmp *= t(neg_scale)
    np.maximum(x, t(0), out=y)
    if pos_scale is not None:
        y *= t(pos_scale)
    y += tmp


def _exp_linear_grad(y: np.ndarray, dy: np.ndarray, dx: np.ndarray, tmp: np.ndarray, offset: float, pos: float):
    """dx = dy * (pos where y > 0, else y + offset): the derivative of _exp_linear from its output."""
    t = y.dtype.type
    np.add(y, t(offset), out=tmp)
    np.copyto(tmp, t(pos), where=y > 0)
    np.multiply(dy, tmp, out=dx)


@activation_op("Elu", 4, args=[Arg("alpha", FLOAT, 1.0, "scale of the negative part")])
class Elu(Activation):
    """Exponential linear unit: Y = X if X > 0 else alpha * (exp(X) - 1)."""

    def forward(self, x: np.ndarray, y: np.ndarray) -> None:
        _exp_linear(x, y, scratch(self, "_tmp", x.shape, x.dtype), self.args.alpha, None)


@pointwise_gradient(Elu)
class EluGradient(PointwiseGradient):
    """dX = dY where Y > 0, else dY * (Y + alpha)."""

    def grad(self, y: np.ndarray, dy: np.ndarray, dx: np.ndarray) -> None:
        _exp_linear_grad(y, dy, dx, scratch(self, "_tmp", y.shape, y.dtype), float(self.args.alpha), 1)


@activation_op(
    "Selu",
    5,
    args=[
        Arg("alpha", FLOAT, SELU_ALPHA, "alpha of SELU (Klambauer et al.)"),
        Arg("scale", FLOAT, SELU_SCALE, "scale of SELU; must be > 1"),
    ],
)
class Selu(Activation):
    """Scaled exponential linear unit: Y = scale * (X if X > 0 else alpha * (exp(X) - 1))."""

    def setup(self) -> None:
        if self.args.scale <= 1.0:
            raise self.arg_error(f"argument 'scale' must be > 1, got {self.args.scale}")

    def forward(self, x: np.ndarray, y: np.ndarray) -> None:
        a = self.args
        _exp_linear(x, y, scratch(self, "_tmp", x.shape, x.dtype), a.alpha * a.scale, a.scale)


@pointwise_gradient(Selu, same_size=True)
class SeluGradient(PointwiseGradient):
    """dX = scale * dY where Y > 0, else dY * (Y + alpha * scale); dY needs only Y's size, dX takes Y's shape."""

    def grad(self, y: np.ndarray, dy: np.ndarray, dx: np.ndarray) -> None:
        alpha, scale = float(self.args.alpha), float(self.args.scale)
        _exp_linear_grad(y, dy, dx, scratch(self, "_tmp", y.shape, y.dtype), alpha * scale, scale)
