"""SqueezeExcite: a squeeze-excitation block in one op (this framework's op; the inference pass writes it in place
of the five ops MobileNetV3, EfficientNet and their kin export, framework/net/fuse_squeeze_excite.py).

Y = X * gate(W2 act(W1 mean(X) + b1) + b2), per image and channel: the channels' means over the spatial
positions, a 1x1 conv reducing them (act: none, Relu, Relu6, Swish or HardSwish), a 1x1 conv back to C channels,
the gate (Sigmoid, or HardSigmoid's clip(alpha v + beta, 0, 1)), and X scaled by it channel by channel. As five
ops (global AveragePool, Conv, Conv, Sigmoid, Mul) the three on one pixel cost more in dispatch than in sums;
here the whole block is one compiled call (window_jit.squeeze_excite: the means, both one-pixel convs, the
activation, the gate and the scale), or, where that does not run, a few numpy calls on (C,) vectors between a
compiled pass for the means and one for the scale (window_jit.channel_means and scale_shift; numpy's where those
do not run).
"""

from __future__ import annotations

import math

import numpy as np

from framework.errors import ShapeError
from framework.kernels import window_jit
from framework.ops.gradient import should_not_do_gradient
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import FLOAT, STRING, Arg, TensorSpec

ACTIVATIONS = ("identity", "Relu", "Relu6", "Swish", "HardSwish")  # in window_jit.squeeze_excite's code order
GATES = ("Sigmoid", "HardSigmoid")


def _infer(args, ins):
    return [TensorSpec(ins[0].shape, ins[0].dtype)]


@register_op(
    "SqueezeExcite",
    inputs=5,
    outputs=1,
    args=[
        Arg("activation", STRING, "identity", "activation of the reducing conv", choices=ACTIVATIONS),
        Arg("gate", STRING, "Sigmoid", "the gate: Sigmoid, or HardSigmoid clip(alpha v + beta, 0, 1)", choices=GATES),
        Arg("alpha", FLOAT, 0.2, "HardSigmoid's slope"),
        Arg("beta", FLOAT, 0.5, "HardSigmoid's offset"),
    ],
    input_docs=[
        ("X", "NCHW (N, C, spatial...) float32 input"),
        ("W1", "(R, C, 1, 1) filter of the reducing conv"),
        ("b1", "(R,) its bias"),
        ("W2", "(C, R, 1, 1) filter of the expanding conv"),
        ("b2", "(C,) its bias"),
    ],
    output_docs=[("Y", "X scaled channel by channel by the gate, X's shape")],
    infer=_infer,
    category="image",
    input_types="float",
    ranks={0: (3, None), 1: 4, 2: 1, 3: 4, 4: 1},
    allow_inplace={(0, 0)},
)
class SqueezeExcite(Operator):
    """Y = X * gate(W2 act(W1 mean(X) + b1) + b2) with the means and gate per image and channel (see the module
    doc; the mean of an image without spatial positions is taken as 0). Written by the inference optimization
    pass."""

    def setup(self) -> None:
        self._key = None

    def run(self) -> None:
        x, w1, b1, w2, b2 = (self.input(i) for i in range(5))
        key = (x.shape, w1.shape, b1.shape, w2.shape, b2.shape)
        if key != self._key:
            self._check(x, w1, b1, w2, b2)
            n, c, r = x.shape[0], x.shape[1], w1.shape[0]
            self._s, self._g = np.empty((n, c), x.dtype), np.empty((n, c), x.dtype)
            self._h, self._t = np.empty((n, r), x.dtype), np.empty((n, r), x.dtype)
            self._zeros = np.zeros(c, x.dtype)  # scale_shift's shift
            a = self.args
            alpha, beta = np.float32(a.alpha), np.float32(a.beta)
            self._codes = (ACTIVATIONS.index(a.activation), GATES.index(a.gate), alpha, beta)
            self._key = key
        n, c, p = x.shape[0], x.shape[1], math.prod(x.shape[2:])
        y = self.output(0, x.shape, x.dtype)
        s, g, h = self._s, self._g, self._h
        w1r, w2r = w1.reshape(w1.shape[0], c), w2.reshape(c, w2.shape[1])
        if window_jit.squeeze_excite(x, w1r, b1, w2r, b2, s[0], h[0], g[0], y, *self._codes):
            return
        x3 = x.reshape(n, c, p)
        if not window_jit.channel_means(x, s):
            np.add.reduce(x3, axis=2, out=s)
            s *= x.dtype.type(1.0 / max(p, 1))
        for i in range(n):
            np.matmul(w1.reshape(w1.shape[0], c), s[i], out=h[i])
        h += b1
        self._activate(h, self._t)
        for i in range(n):
            np.matmul(w2.reshape(c, w2.shape[1]), h[i], out=g[i])
        g += b2
        self._gate(g)
        y3 = y.reshape(n, c, p)
        for i in range(n):
            if not window_jit.scale_shift(x3[i : i + 1], g[i], self._zeros, y3[i : i + 1]):
                np.multiply(x3[i], g[i, :, None], out=y3[i])

    def _activate(self, h: np.ndarray, t: np.ndarray) -> None:
        act = self.args.activation
        if act in ("Relu", "Relu6"):
            np.maximum(h, 0, out=h)
            if act == "Relu6":
                np.minimum(h, 6, out=h)
        elif act == "Swish":  # h * sigmoid(h) = h / (1 + exp(-h))
            np.negative(h, out=t)
            np.exp(t, out=t)
            t += 1
            np.divide(h, t, out=h)
        elif act == "HardSwish":  # h * clip(h / 6 + 1/2, 0, 1)
            np.multiply(h, np.float32(1.0 / 6), out=t)
            t += np.float32(0.5)
            np.clip(t, 0, 1, out=t)
            h *= t

    def _gate(self, g: np.ndarray) -> None:
        if self.args.gate == "HardSigmoid":
            g *= np.float32(self.args.alpha)
            g += np.float32(self.args.beta)
            np.clip(g, 0, 1, out=g)
        else:
            np.negative(g, out=g)
            np.exp(g, out=g)
            g += 1
            np.reciprocal(g, out=g)

    def _check(self, x, w1, b1, w2, b2) -> None:
        c, r = x.shape[1], w1.shape[0]
        want = {1: (r, c, 1, 1), 2: (r,), 3: (c, r, 1, 1), 4: (c,)}
        for i, arr in ((1, w1), (2, b1), (3, w2), (4, b2)):
            if arr.shape != want[i]:
                raise ShapeError(
                    f"{self.describe()}: input {i} '{self.input_names[i]}' is {arr.shape}, expected {want[i]} "
                    f"for X '{self.input_names[0]}' {x.shape} and W1 '{self.input_names[1]}' {w1.shape}"
                )


should_not_do_gradient("SqueezeExcite")  # inference-only rewrite
