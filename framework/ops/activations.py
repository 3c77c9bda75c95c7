"""Activations: Relu, LeakyRelu, PRelu, Elu, Selu, Sigmoid, Tanh, Softplus,
Softsign, Swish, Gelu, HardSigmoid, with their gradient ops.

Every forward op may run in place (output blob == input blob): kernels read
their input fully (or into a scratch buffer) before writing the output.
Gradient ops follow Caffe2's input conventions: most read the forward
*output* ``Y`` and ``dY`` (so the forward may run in place); Softsign and
Gelu read ``X``; Swish reads ``X`` and ``Y``; PRelu reads ``Y, dY, X, slope``.
"""

from __future__ import annotations

import math
from functools import partial

import numpy as np

from framework.errors import GradientError, ShapeError, TypeMismatchError
from framework.ops.gradient import gradient
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import BOOL, FLOAT, STRING, UNKNOWN, Arg, pointwise_cost, same_as_input

# Caffe2's SELU constants (selu_op.h).
SELU_ALPHA = 1.6732632423543772848170429916717
SELU_SCALE = 1.0507009873554804934193349852946

_X = [("X", "input tensor")]
_Y = [("Y", "output tensor, shaped as X")]
_YDY = [("Y", "output of the forward op"), ("dY", "gradient of Y")]
_DX = [("dX", "gradient of X")]


def scratch(op: Operator, name: str, shape: tuple, dtype: np.dtype) -> np.ndarray:
    """A per-op scratch buffer, reused while shape and dtype stay the same."""
    buf = op.__dict__.get(name)
    if buf is None or buf.shape != shape or buf.dtype != dtype:
        buf = np.empty(shape, dtype)
        op.__dict__[name] = buf
    return buf


def float_input(op: Operator, i: int) -> np.ndarray:
    """Input ``i``; TypeMismatchError naming op and blob unless it holds floats."""
    x = op.input(i)
    if x.dtype.kind != "f":
        raise TypeMismatchError(
            f"{op.describe()}: input {i} ('{op.input_names[i]}') must hold floats, got {x.dtype} {list(x.shape)}"
        )
    return x


def check_same_shape(op: Operator, i: int, j: int, a: np.ndarray, b: np.ndarray) -> None:
    if a.shape != b.shape:
        raise ShapeError(
            f"{op.describe()}: input {i} ('{op.input_names[i]}') has shape {list(a.shape)} but input {j} "
            f"('{op.input_names[j]}') has shape {list(b.shape)}; they must match"
        )


def _unary_grad_op(name: str, doc_inputs: list, doc: str, inplace: set | None = None):
    """Decorator shortcut for gradient ops with one output shaped as the last input."""
    return register_op(
        name,
        inputs=len(doc_inputs),
        input_docs=doc_inputs,
        output_docs=_DX,
        allow_inplace=inplace if inplace is not None else {(len(doc_inputs) - 1, 0)},
        infer=same_as_input(len(doc_inputs) - 1),
        cost=pointwise_cost(2),
        category="activation",
        private=True,
        doc=doc,
    )


def _grad_y_dy(op: Operator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    y, dy = float_input(op, 0), float_input(op, 1)
    check_same_shape(op, 0, 1, y, dy)
    return y, dy, op.output(0, dy.shape, dy.dtype)


# -- Relu ------------------------------------------------------------------------------


@register_op(
    "Relu",
    input_docs=_X,
    output_docs=[("Y", "max(X, 0), same shape as X")],
    allow_inplace={(0, 0)},
    infer=same_as_input(0),
    cost=pointwise_cost(1),
    category="activation",
)
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
        if x.dtype.kind == "f" and _CLIP is not None:
            # Positional arguments only: partial() then makes a C-level call (no kwargs to merge).
            return partial(_CLIP, x, *_relu_bounds(x.dtype), y)
        zero, maximum = np.zeros((), x.dtype), np.maximum

        def relu() -> None:  # a closure: cheaper than partial() with out= (which merges kwargs per call)
            maximum(x, zero, out=y)

        return relu


# Float Relu is clip(X, 0, +inf) through the ufunc behind np.clip: numpy's maximum against a scalar
# has no SIMD loop (about 4x slower for 64x512 float32), and clip takes ``out`` positionally
# (np.maximum deprecates that). Same values as max(X, 0), NaN propagated; -0.0 stays -0.0 (as C++'s
# std::max(x, 0.f) in Caffe2).
_CLIP = getattr(getattr(getattr(np, "_core", None), "umath", None), "clip", None)
_RELU_BOUNDS: dict[np.dtype, tuple[np.ndarray, np.ndarray]] = {}


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
    input_docs=_YDY,
    output_docs=_DX,
    allow_inplace={(1, 0)},
    infer=same_as_input(1),
    category="activation",
    private=True,
)
class ReluGradient(Operator):
    """dX = dY where Y > 0, else 0."""

    def run(self) -> None:
        y, dy = self.input(0), self.input(1)
        check_same_shape(self, 0, 1, y, dy)
        dx = self.output(0, dy.shape, dy.dtype)
        mask = scratch(self, "_mask", y.shape, np.dtype(bool))
        np.greater(y, y.dtype.type(0), out=mask)
        np.multiply(dy, mask, out=dx)

    def compile(self):
        """A closure doing run()'s work on the arrays bound now (see framework.net.program)."""
        y, dy, dx = self.input(0), self.input(1), self.outputs[0]._obj._array
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


@register_op(
    "LeakyRelu",
    input_docs=_X,
    output_docs=_Y,
    args=[Arg("alpha", FLOAT, 0.01, "slope for X < 0")],
    allow_inplace={(0, 0)},
    infer=same_as_input(0),
    cost=pointwise_cost(2),
    category="activation",
)
class LeakyRelu(Operator):
    """Leaky rectifier: Y = X if X >= 0 else alpha * X."""

    def setup(self) -> None:
        self._alpha = float(self.args.alpha)
        # max(X, aX) is the leaky relu for a <= 1, min(X, aX) for a > 1.
        self._pick = np.maximum if self._alpha <= 1.0 else np.minimum

    def run(self) -> None:
        x = float_input(self, 0)
        tmp = scratch(self, "_tmp", x.shape, x.dtype)
        np.multiply(x, x.dtype.type(self._alpha), out=tmp)
        self._pick(x, tmp, out=self.output(0, x.shape, x.dtype))


@_unary_grad_op("LeakyReluGradient", _YDY, "dX = dY where Y > 0, else alpha * dY.")
class LeakyReluGradient(Operator):
    def setup(self) -> None:
        self._alpha = float(self.args.get("alpha", 0.01))

    def run(self) -> None:
        y, dy, dx = _grad_y_dy(self)
        mask = scratch(self, "_mask", y.shape, np.dtype(bool))
        np.greater(y, 0, out=mask)
        # dx = dy * (alpha + (1 - alpha) * mask); written so dx may alias dy.
        tmp = scratch(self, "_tmp", y.shape, dy.dtype)
        np.multiply(mask, dy.dtype.type(1.0 - self._alpha), out=tmp)
        tmp += dy.dtype.type(self._alpha)
        np.multiply(dy, tmp, out=dx)


@gradient("LeakyRelu")
def _leaky_relu_grad(g):
    return [g.op("LeakyReluGradient", [g.O(0), g.GO(0)], [g.GI(0)])]


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
    output_docs=_Y,
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


@register_op(
    "Elu",
    input_docs=_X,
    output_docs=_Y,
    args=[Arg("alpha", FLOAT, 1.0, "scale of the negative part")],
    allow_inplace={(0, 0)},
    infer=same_as_input(0),
    cost=pointwise_cost(4),
    category="activation",
)
class Elu(Operator):
    """Exponential linear unit: Y = X if X > 0 else alpha * (exp(X) - 1)."""

    def run(self) -> None:
        x = float_input(self, 0)
        tmp = scratch(self, "_tmp", x.shape, x.dtype)
        np.minimum(x, x.dtype.type(0), out=tmp)
        np.expm1(tmp, out=tmp)
        tmp *= x.dtype.type(self.args.alpha)
        y = self.output(0, x.shape, x.dtype)
        np.maximum(x, x.dtype.type(0), out=y)
        y += tmp


@_unary_grad_op("EluGradient", _YDY, "dX = dY where Y > 0, else dY * (Y + alpha).")
class EluGradient(Operator):
    def run(self) -> None:
        y, dy, dx = _grad_y_dy(self)
        alpha = float(self.args.get("alpha", 1.0))
        tmp = scratch(self, "_tmp", y.shape, y.dtype)
        np.add(y, y.dtype.type(alpha), out=tmp)
        np.copyto(tmp, y.dtype.type(1), where=y > 0)
        np.multiply(dy, tmp, out=dx)


@gradient("Elu")
def _elu_grad(g):
    return [g.op("EluGradient", [g.O(0), g.GO(0)], [g.GI(0)])]


@register_op(
    "Selu",
    input_docs=_X,
    output_docs=_Y,
    args=[
        Arg("alpha", FLOAT, SELU_ALPHA, "alpha of SELU (Klambauer et al.)"),
        Arg("scale", FLOAT, SELU_SCALE, "scale of SELU; must be > 1"),
    ],
    allow_inplace={(0, 0)},
    infer=same_as_input(0),
    cost=pointwise_cost(5),
    category="activation",
)
class Selu(Operator):
    """Scaled exponential linear unit: Y = scale * (X if X > 0 else alpha * (exp(X) - 1))."""

    def setup(self) -> None:
        if self.args.scale <= 1.0:
            raise self.arg_error(f"argument 'scale' must be > 1, got {self.args.scale}")

    def run(self) -> None:
        x = float_input(self, 0)
        t = x.dtype.type
        tmp = scratch(self, "_tmp", x.shape, x.dtype)
        np.minimum(x, t(0), out=tmp)
        np.expm1(tmp, out=tmp)
        tmp *= t(self.args.alpha * self.args.scale)
        y = self.output(0, x.shape, x.dtype)
        np.maximum(x, t(0), out=y)
        y *= t(self.args.scale)
        y += tmp


@_unary_grad_op("SeluGradient", _YDY, "dX = scale * dY where Y > 0, else dY * (Y + alpha * scale).")
class SeluGradient(Operator):
    def run(self) -> None:
        y, dy, dx = _grad_y_dy(self)
        t = y.dtype.type
        alpha = float(self.args.get("alpha", SELU_ALPHA))
        scale = float(self.args.get("scale", SELU_SCALE))
        tmp = scratch(self, "_tmp", y.shape, y.dtype)
        np.add(y, t(alpha * scale), out=tmp)
        np.copyto(tmp, t(scale), where=y > 0)
        np.multiply(dy, tmp, out=dx)


@gradient("Selu")
def _selu_grad(g):
    return [g.op("SeluGradient", [g.O(0), g.GO(0)], [g.GI(0)])]


# -- Sigmoid / Tanh / HardSigmoid --------------------------------------------------------------


def sigmoid_into(x: np.ndarray, out: np.ndarray) -> np.ndarray:
    """out = 1 / (1 + exp(-x)), computed as 0.5 * tanh(x / 2) + 0.5: no overflow for any x."""
    t = out.dtype.type
    np.multiply(x, t(0.5), out=out)
    np.tanh(out, out=out)
    out *= t(0.5)
    out += t(0.5)
    return out


@register_op(
    "Sigmoid",
    input_docs=_X,
    output_docs=_Y,
    allow_inplace={(0, 0)},
    infer=same_as_input(0),
    cost=pointwise_cost(4),
    category="activation",
)
class Sigmoid(Operator):
    """Logistic sigmoid: Y = 1 / (1 + exp(-X)), elementwise."""

    def run(self) -> None:
        x = float_input(self, 0)
        sigmoid_into(x, self.output(0, x.shape, x.dtype))


@_unary_grad_op("SigmoidGradient", _YDY, "dX = dY * Y * (1 - Y).")
class SigmoidGradient(Operator):
    def run(self) -> None:
        y, dy, dx = _grad_y_dy(self)
        tmp = scratch(self, "_tmp", y.shape, y.dtype)
        np.subtract(y.dtype.type(1), y, out=tmp)
        tmp *= y
        np.multiply(dy, tmp, out=dx)


@gradient("Sigmoid")
def _sigmoid_grad(g):
    return [g.op("SigmoidGradient", [g.O(0), g.GO(0)], [g.GI(0)])]


@register_op(
    "Tanh",
    input_docs=_X,
    output_docs=_Y,
    allow_inplace={(0, 0)},
    infer=same_as_input(0),
    cost=pointwise_cost(4),
    category="activation",
)
class Tanh(Operator):
    """Hyperbolic tangent, elementwise."""

    def run(self) -> None:
        x = float_input(self, 0)
        np.tanh(x, out=self.output(0, x.shape, x.dtype))


@_unary_grad_op("TanhGradient", _YDY, "dX = dY * (1 - Y^2).")
class TanhGradient(Operator):
    def run(self) -> None:
        y, dy, dx = _grad_y_dy(self)
        tmp = scratch(self, "_tmp", y.shape, y.dtype)
        np.multiply(y, y, out=tmp)
        np.subtract(y.dtype.type(1), tmp, out=tmp)
        np.multiply(dy, tmp, out=dx)


@gradient("Tanh")
def _tanh_grad(g):
    return [g.op("TanhGradient", [g.O(0), g.GO(0)], [g.GI(0)])]


@register_op(
    "HardSigmoid",
    input_docs=_X,
    output_docs=_Y,
    args=[Arg("alpha", FLOAT, 0.2, "slope"), Arg("beta", FLOAT, 0.5, "offset")],
    allow_inplace={(0, 0)},
    infer=same_as_input(0),
    cost=pointwise_cost(4),
    category="activation",
)
class HardSigmoid(Operator):
    """Y = clip(alpha * X + beta, 0, 1), elementwise."""

    def run(self) -> None:
        x = float_input(self, 0)
        t = x.dtype.type
        y = self.output(0, x.shape, x.dtype)
        np.multiply(x, t(self.args.alpha), out=y)
        y += t(self.args.beta)
        np.clip(y, t(0), t(1), out=y)


@_unary_grad_op("HardSigmoidGradient", _YDY, "dX = alpha * dY where 0 < Y < 1, else 0.")
class HardSigmoidGradient(Operator):
    def run(self) -> None:
        y, dy, dx = _grad_y_dy(self)
        alpha = float(self.args.get("alpha", 0.2))
        mask = scratch(self, "_mask", y.shape, np.dtype(bool))
        inner = scratch(self, "_inner", y.shape, np.dtype(bool))
        np.greater(y, 0, out=mask)
        np.less(y, 1, out=inner)
        mask &= inner
        np.multiply(dy, mask, out=dx)
        dx *= dy.dtype.type(alpha)


@gradient("HardSigmoid")
def _hard_sigmoid_grad(g):
    return [g.op("HardSigmoidGradient", [g.O(0), g.GO(0)], [g.GI(0)])]


# -- Softplus / Softsign -------------------------------------------------------------------------


@register_op(
    "Softplus",
    input_docs=_X,
    output_docs=_Y,
    allow_inplace={(0, 0)},
    infer=same_as_input(0),
    cost=pointwise_cost(4),
    category="activation",
)
class Softplus(Operator):
    """Y = log(1 + exp(X)), computed as max(X, 0) + log1p(exp(-|X|)) (no overflow)."""

    def run(self) -> None:
        x = float_input(self, 0)
        tmp = scratch(self, "_tmp", x.shape, x.dtype)
        np.abs(x, out=tmp)
        np.negative(tmp, out=tmp)
        np.exp(tmp, out=tmp)
        np.log1p(tmp, out=tmp)
        y = self.output(0, x.shape, x.dtype)
        np.maximum(x, x.dtype.type(0), out=y)
        y += tmp


@_unary_grad_op("SoftplusGradient", _YDY, "dX = dY * (1 - exp(-Y)).")
class SoftplusGradient(Operator):
    def run(self) -> None:
        y, dy, dx = _grad_y_dy(self)
        tmp = scratch(self, "_tmp", y.shape, y.dtype)
        np.negative(y, out=tmp)
        np.expm1(tmp, out=tmp)
        np.negative(tmp, out=tmp)
        np.multiply(dy, tmp, out=dx)


@gradient("Softplus")
def _softplus_grad(g):
    return [g.op("SoftplusGradient", [g.O(0), g.GO(0)], [g.GI(0)])]


@register_op(
    "Softsign",
    input_docs=_X,
    output_docs=[("Y", "X / (1 + |X|), shaped as X")],
    allow_inplace={(0, 0)},
    infer=same_as_input(0),
    cost=pointwise_cost(3),
    category="activation",
)
class Softsign(Operator):
    """Y = X / (1 + |X|), elementwise."""

    def run(self) -> None:
        x = float_input(self, 0)
        tmp = scratch(self, "_tmp", x.shape, x.dtype)
        np.abs(x, out=tmp)
        tmp += x.dtype.type(1)
        np.divide(x, tmp, out=self.output(0, x.shape, x.dtype))


@_unary_grad_op(
    "SoftsignGradient",
    [("X", "input of Softsign"), ("dY", "gradient of Y")],
    "dX = dY / (1 + |X|)^2.",
)
class SoftsignGradient(Operator):
    def run(self) -> None:
        x, dy = float_input(self, 0), float_input(self, 1)
        check_same_shape(self, 0, 1, x, dy)
        tmp = scratch(self, "_tmp", x.shape, x.dtype)
        np.abs(x, out=tmp)
        tmp += x.dtype.type(1)
        np.multiply(tmp, tmp, out=tmp)
        np.divide(dy, tmp, out=self.output(0, dy.shape, dy.dtype))


@gradient("Softsign")
def _softsign_grad(g):
    if g.I(0) == g.O(0):
        raise GradientError(
            f"{g._where()}: cannot compute the softsign gradient of an in-place Softsign "
            f"('{g.I(0)}' is both input and output): the gradient needs X"
        )
    return [g.op("SoftsignGradient", [g.I(0), g.GO(0)], [g.GI(0)])]


# -- Swish / Gelu --------------------------------------------------------------------------------


@register_op(
    "Swish",
    input_docs=_X,
    output_docs=_Y,
    allow_inplace={(0, 0)},
    infer=same_as_input(0),
    cost=pointwise_cost(5),
    category="activation",
)
class Swish(Operator):
    """Y = X * sigmoid(X) = X / (1 + exp(-X)), elementwise."""

    def run(self) -> None:
        x = float_input(self, 0)
        tmp = sigmoid_into(x, scratch(self, "_tmp", x.shape, x.dtype))
        np.multiply(x, tmp, out=self.output(0, x.shape, x.dtype))


@_unary_grad_op(
    "SwishGradient",
    [("X", "input of Swish"), ("Y", "output of Swish"), ("dY", "gradient of Y")],
    "dX = dY * (Y + sigmoid(X) * (1 - Y)).",
)
class SwishGradient(Operator):
    def run(self) -> None:
        x, y, dy = float_input(self, 0), float_input(self, 1), float_input(self, 2)
        check_same_shape(self, 0, 1, x, y)
        check_same_shape(self, 0, 2, x, dy)
        t = x.dtype.type
        s = sigmoid_into(x, scratch(self, "_sig", x.shape, x.dtype))
        tmp = scratch(self, "_tmp", x.shape, x.dtype)
        np.subtract(t(1), y, out=tmp)
        tmp *= s
        tmp += y
        np.multiply(dy, tmp, out=self.output(0, dy.shape, dy.dtype))


@gradient("Swish")
def _swish_grad(g):
    return [g.op("SwishGradient", [g.I(0), g.O(0), g.GO(0)], [g.GI(0)])]


try:  # exact erf when scipy is installed; otherwise a 1.5e-7-accurate rational approximation
    from scipy.special import erf as _scipy_erf
except ImportError:  # pragma: no cover - exercised through erf_approx in tests
    _scipy_erf = None


def erf_approx(x: np.ndarray, out: np.ndarray) -> np.ndarray:
    """erf(x) by Abramowitz & Stegun 7.1.26 (max abs error 1.5e-7), written into ``out`` (may alias x)."""
    t = out.dtype.type
    sign = np.sign(x)
    ax = np.abs(x)
    k = 1.0 / (1.0 + 0.3275911 * ax)
    poly = ((((1.061405429 * k - 1.453152027) * k + 1.421413741) * k - 0.284496736) * k + 0.254829592) * k
    np.multiply(sign, 1.0 - poly * np.exp(-ax * ax), out=out, casting="unsafe")
    return out.astype(t, copy=False)


def _erf_into(x: np.ndarray, out: np.ndarray) -> np.ndarray:
    if _scipy_erf is not None:
        return _scipy_erf(x, out=out)
    return erf_approx(x, out)


_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_INV_SQRT_2 = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_GELU_FAST_COEFF = 0.044715


def _fast_gelu_tanh(x: np.ndarray, out: np.ndarray) -> np.ndarray:
    """out = tanh(sqrt(2/pi) * (x + 0.044715 x^3))."""
    t = x.dtype.type
    np.multiply(x, x, out=out)
    out *= x
    out *= t(_GELU_FAST_COEFF)
    out += x
    out *= t(_SQRT_2_OVER_PI)
    np.tanh(out, out=out)
    return out


@register_op(
    "Gelu",
    input_docs=_X,
    output_docs=_Y,
    args=[
        Arg(
            "fast_gelu",
            BOOL,
            False,
            "use y = 0.5x * (1 + tanh(sqrt(2/pi) * (x + 0.044715x^3))) instead of the exact x * Phi(x)",
        )
    ],
    allow_inplace={(0, 0)},
    infer=same_as_input(0),
    cost=pointwise_cost(2),
    category="activation",
)
class Gelu(Operator):
    """Gaussian error linear unit: Y = X * Phi(X), Phi the standard normal CDF (or the tanh form)."""

    def run(self) -> None:
        x = float_input(self, 0)
        t = x.dtype.type
        tmp = scratch(self, "_tmp", x.shape, x.dtype)
        if self.args.fast_gelu:
            _fast_gelu_tanh(x, tmp)
        else:
            np.multiply(x, t(_INV_SQRT_2), out=tmp)
            _erf_into(tmp, tmp)
        tmp += t(1)
        tmp *= t(0.5)
        np.multiply(x, tmp, out=self.output(0, x.shape, x.dtype))


@_unary_grad_op(
    "GeluGradient",
    [("dY", "gradient of Y"), ("X", "input of Gelu")],
    "dX = dY * (Phi(X) + X * phi(X)) (or the derivative of the tanh form when fast_gelu).",
    inplace={(0, 0)},
)
class GeluGradient(Operator):
    def run(self) -> None:
        dy, x = float_input(self, 0), float_input(self, 1)
        check_same_shape(self, 0, 1, dy, x)
        t = x.dtype.type
        a = scratch(self, "_a", x.shape, x.dtype)
        b = scratch(self, "_b", x.shape, x.dtype)
        if self.args.get("fast_gelu", False):
            th = _fast_gelu_tanh(x, a)  # tanh(u)
            # d/dx [0.5 x (1 + tanh u)] = 0.5 (1 + tanh u) + 0.5 x (1 - tanh^2 u) u'
            # with u' = sqrt(2/pi) (1 + 3 * 0.044715 x^2)
            np.multiply(x, x, out=b)
            b *= t(3 * _GELU_FAST_COEFF * _SQRT_2_OVER_PI)
            b += t(_SQRT_2_OVER_PI)
            b *= x
            c = scratch(self, "_c", x.shape, x.dtype)
            np.multiply(th, th, out=c)
            np.subtract(t(1), c, out=c)
            b *= c
            b += th
            b += t(1)
            b *= t(0.5)
        else:
            np.multiply(x, t(_INV_SQRT_2), out=a)
            _erf_into(a, a)
            a += t(1)
            a *= t(0.5)  # Phi(x)
            np.multiply(x, x, out=b)
            b *= t(-0.5)
            np.exp(b, out=b)
            b *= x
            b *= t(_INV_SQRT_2PI)  # x * phi(x)
            b += a
        np.multiply(dy, b, out=self.output(0, x.shape, x.dtype))


GeluGradient.schema.args = Gelu.schema.args


@gradient("Gelu")
def _gelu_grad(g):
    return [g.op("GeluGradient", [g.GO(0), g.I(0)], [g.GI(0)])]


# Gradient ops read the forward op's arguments (copied by the makers); declare them so
# they parse without "unknown argument" warnings.
for _grad_cls, _fwd_cls in (
    (LeakyReluGradient, LeakyRelu),
    (EluGradient, Elu),
    (SeluGradient, Selu),
    (HardSigmoidGradient, HardSigmoid),
):
    _grad_cls.schema.args = dict(_fwd_cls.schema.args)
