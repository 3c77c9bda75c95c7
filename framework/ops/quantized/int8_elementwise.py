"""Caffe2's elementwise int8 ops, with QNNPACK's arithmetic (the last Caffe2 runs them on QNNPACK):
Int8Relu (clamp), Int8LeakyRelu and Int8Sigmoid (QNNPACK's 256-entry lookup tables), Int8Add / Int8AddRelu
(and their aliases Int8Sum / Int8SumRelu: QNNPACK's fixed-point add), Int8Softmax (QNNPACK's soft-argmax).

Caffe2: ``caffe2/operators/quantized/int8_{relu,leaky_relu,sigmoid,add}_op.h``; QNNPACK: ``clamp.c``,
``leaky-relu.c``, ``sigmoid.c``, ``add.c`` and ``requantization.h`` (``compute_add_quantization_params``).
None has a gradient.
"""

from __future__ import annotations

import numpy as np

from framework.errors import ArgumentError, ShapeError
from framework.ops.gradient import no_gradient
from framework.ops.operator import Operator
from framework.ops.quantized.int8_common import (
    U8,
    Y_ARGS,
    check_y_scale,
    int8_input,
    int8_output,
    int8_spec,
    same_params,
)
from framework.ops.quantized.int8_kernels import add_into
from framework.ops.registry import register_op
from framework.ops.schema import FLOAT, INT, Arg

F32 = np.float32
_SAME = dict(infer=lambda args, ins: [int8_spec(args, ins)], category="quantized")


def _f32_bits(v: np.float32) -> int:
    return int(np.array(v, F32).view(np.uint32))


@register_op(
    "Int8Relu",
    args=list(Y_ARGS),
    allow_inplace={(0, 0)},
    input_docs=[("X", "Int8TensorCPU input")],
    output_docs=[("Y", "Int8TensorCPU, same shape and quantization as X")],
    **_SAME,
)
class Int8Relu(Operator):
    """``y = max(0, x)`` on quantized values: codes below X's zero point become the zero point (QNNPACK's clamp
    to [X.zero_point, 255]). ``Y_scale``/``Y_zero_point`` must equal X's scale and zero point, as Caffe2
    checks. No gradient."""

    def run(self) -> None:
        q = int8_input(self, 0)
        same_params(self, q, self.args.Y_scale, self.args.Y_zero_point)
        x = q.t.array
        zp = q.zero_point
        np.maximum(x, np.uint8(zp), out=int8_output(self, 0, x.shape, q.scale, zp))


class _Lut(Operator):
    """An elementwise op through a 256-entry table built from the input's and the output's quantization."""

    def table(self, x_scale: float, x_zp: int) -> np.ndarray:
        raise NotImplementedError

    def out_params(self) -> tuple[float, int]:
        return check_y_scale(self), self.args.Y_zero_point

    def run(self) -> None:
        q = int8_input(self, 0)
        scale, zp = self.out_params()
        lut = self.table(q.scale, q.zero_point)
        x = q.t.array
        np.take(lut, x, out=int8_output(self, 0, x.shape, scale, zp))


@register_op(
    "Int8Sigmoid",
    args=list(Y_ARGS),
    input_docs=[("input", "Int8TensorCPU input")],
    output_docs=[("output", "Int8TensorCPU sigmoid values: scale 1/256, zero point 0")],
    **_SAME,
)
class Int8Sigmoid(_Lut):
    """``Sigmoid(x) = 1 / (1 + exp(-x))`` on quantized values, through QNNPACK's table: for each code ``i``,
    ``lrintf(clamp(256 / (1 + expf(-X.scale * (i - X.zero_point))), 0, 255))`` in float32. As Caffe2 (and
    QNNPACK), ``Y_scale`` must be 1/256 and ``Y_zero_point`` 0. ``expf`` is the correctly rounded float32 exp
    here (glibc's is within half an ulp too; a code whose value sits on a rounding tie could still differ).
    No gradient."""

    def out_params(self) -> tuple[float, int]:
        scale, zp = check_y_scale(self), self.args.Y_zero_point
        if scale != 1.0 / 256 or zp != 0:
            raise self.arg_error(f"Y_scale must be 1/256 and Y_zero_point 0 (QNNPACK's only output), got {scale}, {zp}")
        return scale, zp

    def table(self, x_scale: float, x_zp: int) -> np.ndarray:
        i = np.arange(256, dtype=np.int32) - np.int32(x_zp)
        x = F32(x_scale) * i.astype(F32)
        with np.errstate(over="ignore"):
            e = np.exp(-x.astype(np.float64)).astype(F32)  # expf, correctly rounded
            s = F32(256.0) / (F32(1.0) + e)
        return np.rint(np.clip(s, F32(0), F32(255))).astype(U8)


@register_op(
    "Int8LeakyRelu",
    args=[Arg("alpha", FLOAT, 0.01, "coefficient of leakage, in (0, 1)"), *Y_ARGS],
    allow_inplace={(0, 0)},
    input_docs=[("X", "Int8TensorCPU input")],
    output_docs=[("Y", "Int8TensorCPU output")],
    **_SAME,
)
class Int8LeakyRelu(_Lut):
    """``f(x) = alpha * x`` for ``x < 0``, ``x`` otherwise, through QNNPACK's table (float32): with
    ``r = X.scale / Y_scale`` (must lie in [2**-8, 2**8)) and ``v = r * (i - X.zero_point)``, code ``i`` maps to
    ``lrintf(clamp(v < 0 ? v * alpha : v, -Y_zero_point, 255 - Y_zero_point)) + Y_zero_point``. ``alpha`` must
    lie in (0, 1), as Caffe2 enforces. No gradient."""

    def setup(self) -> None:
        alpha = self.args.alpha
        if not 0.0 < alpha < 1.0:
            raise self.arg_error(f"alpha must lie in (0, 1), got {alpha}")
        self.alpha = F32(alpha)

    def table(self, x_scale: float, x_zp: int) -> np.ndarray:
        y_scale, y_zp = self.out_params()
        ratio = F32(F32(x_scale) / F32(y_scale))
        if not 2.0**-8 <= ratio < 2.0**8:
            raise ArgumentError(
                f"{self.describe()}: input/output scale ratio {ratio} must lie in [2**-8, 2**8) (QNNPACK)"
            )
        v = ratio * (np.arange(256, dtype=np.int32) - np.int32(x_zp)).astype(F32)
        y = np.where(v < 0, v * self.alpha, v)
        y = np.clip(y, F32(-y_zp), F32(255 - y_zp))
        return (np.rint(y).astype(np.int32) + y_zp).astype(U8)


@register_op(
    "Int8Softmax",
    args=[Arg("axis", INT, 1, "the axis the input is coerced to 2-D at: only 1, what Caffe2's op computes"), *Y_ARGS],
    input_docs=[("input", "Int8TensorCPU, coerced to 2-D (N, D) at axis 1")],
    output_docs=[("output", "Int8TensorCPU softmax values: scale 1/256, zero point 0")],
    **_SAME,
)
class Int8Softmax(Operator):
    """Softmax over each row of the input coerced to (N, D) with N = dim 0, through QNNPACK's soft-argmax: a
    table ``t[i] = lrint(q * exp((i - 255) * X.scale))`` (float64, ``q = min((2**32 - 1) / D, 2**23 - 1)``);
    for a row with maximum ``m``, ``e(x) = t[x + 255 - m]``, ``S = sum(e)`` (uint32) and
    ``y = min((e(x) * 256 + S // 2) // S, 255)``. As Caffe2 (and QNNPACK), ``Y_scale`` must be 1/256 and
    ``Y_zero_point`` 0. Departures: ``axis`` other than 1 is refused (Caffe2 documents it but its op always
    splits at dim 0); a batch of 0 rows gives an empty output (Caffe2 divides by it); rows of 0 elements are
    refused (QNNPACK refuses 0 channels). No gradient."""

    def setup(self) -> None:
        if self.args.axis != 1:
            raise self.arg_error(f"only axis 1 is supported (what Caffe2's Int8Softmax computes), got {self.args.axis}")
        self.scale = check_y_scale(self)
        if self.scale != 1.0 / 256 or self.args.Y_zero_point != 0:
            raise self.arg_error("Y_scale must be 1/256 and Y_zero_point 0 (QNNPACK's only softmax output)")

    def run(self) -> None:
        q = int8_input(self, 0)
        x = q.t.array
        if x.ndim < 1:
            raise ShapeError(f"{self.describe()}: '{self.input_names[0]}' must have at least 1 dimension")
        n = x.shape[0]
        d = x.size // n if n else int(np.prod(x.shape[1:]))
        if d == 0 and n:
            raise ShapeError(f"{self.describe()}: rows of '{self.input_names[0]}' {list(x.shape)} are empty")
        y = int8_output(self, 0, x.shape, self.scale, 0)
        if not x.size:
            return
        qscale = min(float(2**32 - 1) / d, 8388607.0)
        table = np.rint(qscale * np.exp((np.arange(256, dtype=np.float64) - 255) * float(q.scale))).astype(np.int64)
        rows = x.reshape(n, d).astype(np.int64)
        e = table[rows + (255 - rows.max(axis=1, keepdims=True))]
        total = e.sum(axis=1, keepdims=True) & 0xFFFFFFFF  # uint32 arithmetic
        y.reshape(n, d)[...] = np.minimum((e * 256 + (total >> 1)) // total, 255)


def add_params(a_scale: float, b_scale: float, y_scale: float, where: str) -> tuple[int, int, int]:
    """QNNPACK's add requantization: (a_multiplier, b_multiplier, shift) from the scale ratios."""
    a_os, b_os = F32(F32(a_scale) / F32(y_scale)), F32(F32(b_scale) / F32(y_scale))
    for name, v in (("A", a_os), ("B", b_os)):
        if not 2.0**-14 <= v < 2.0**8:
            raise ArgumentError(
                f"{where}: {name}'s scale / Y_scale = {v} must lie in [2**-14, 2**8) (QNNPACK's add supports no more)"
            )
    exponent = (_f32_bits(max(a_os, b_os)) >> 23) - 127
    shift = 21 - exponent
    mult = F32(2.0**shift)
    return int(np.rint(a_os * mult)), int(np.rint(b_os * mult)), shift


def add_quantized(
    a: np.ndarray, a_zp: int, b: np.ndarray, b_zp: int, params: tuple, y_zp: int, lo: int, out: np.ndarray
) -> None:
    """QNNPACK's q8 add kernel: multiply-accumulate, a rounding right shift (ties away from zero), clamp."""
    am, bm, shift = params
    acc = np.asarray(a, np.int64) * am + np.asarray(b, np.int64) * bm - (am * a_zp + bm * b_zp)
    mask = (1 << shift) - 1
    rem = (acc & mask) - (acc < 0)
    out[...] = np.clip((acc >> shift) + (rem > (mask >> 1)) + y_zp, lo, 255)


class _Add(Operator):
    relu = False

    def setup(self) -> None:
        if len(self.inputs) != 2:
            raise self.arg_error(f"takes exactly 2 inputs (Caffe2 enforces it), got {len(self.inputs)}")
        self.scale = check_y_scale(self)

    def run(self) -> None:
        a, b = int8_input(self, 0), int8_input(self, 1)
        xa, xb = a.t.array, b.t.array
        if xa.shape != xb.shape:
            raise ShapeError(
                f"{self.describe()}: inputs must have the same shape (broadcast semantics is not supported), got "
                f"'{self.input_names[0]}' {list(xa.shape)} and '{self.input_names[1]}' {list(xb.shape)}"
            )
        params = add_params(a.scale, b.scale, self.scale, self.describe())
        y_zp = self.args.Y_zero_point
        lo = y_zp if self.relu else 0
        a_zp, b_zp = a.zero_point, b.zero_point
        out = int8_output(self, 0, xa.shape, self.scale, y_zp)
        if not add_into(xa, a_zp, xb, b_zp, params, y_zp, lo, out):
            acc = np.empty(xa.shape, np.int64)
            add_quantized(xa, a_zp, xb, b_zp, params, y_zp, lo, acc)
            out[...] = acc


_ADD_DOC = """{summary} of two Int8TensorCPU of the same shape (no broadcast, as the last Caffe2), requantized to
``Y_scale``/``Y_zero_point`` with QNNPACK's fixed-point add: with ``ra = A.scale / Y_scale`` and ``rb`` likewise
(float32, each in [2**-14, 2**8)), ``shift = 21 - exponent(max(ra, rb))``, multipliers ``ma = lrintf(ra * 2**shift)``
and ``mb``; ``acc = ma * (a - A.zero_point) + mb * (b - B.zero_point)``, shifted right by ``shift`` rounding ties
away from zero, plus ``Y_zero_point``, clamped to [{low}, 255]. {extra}No gradient."""


def _register_add(name: str, relu: bool, inputs, extra: str) -> None:
    summary = "Elementwise sum followed by Relu" if relu else "Elementwise sum"
    doc = _ADD_DOC.format(summary=summary, low="Y_zero_point" if relu else "0", extra=extra)
    cls = type(name, (_Add,), {"relu": relu, "__doc__": doc, "__module__": __name__})
    register_op(
        name,
        inputs=inputs,
        args=list(Y_ARGS),
        allow_inplace={(0, 0), (1, 0)},
        input_docs=[("A", "first Int8TensorCPU operand"), ("B", "second operand, the same shape as A")],
        output_docs=[("C", "Int8TensorCPU result, the shape of A")],
        **_SAME,
    )(cls)


_SUM_NOTE = "Caffe2 registers it as an alias of {0} (its schema accepts 1 or more inputs, the op exactly 2; so here). "
_register_add("Int8Add", False, 2, "")
_register_add("Int8AddRelu", True, 2, "")
_register_add("Int8Sum", False, (1, float("inf")), _SUM_NOTE.format("Int8Add"))
_register_add("Int8SumRelu", True, (1, float("inf")), _SUM_NOTE.format("Int8AddRelu"))

no_gradient("Int8Softmax")
no_gradient("Int8Relu", "Int8Sigmoid", "Int8LeakyRelu", "Int8Add", "Int8AddRelu", "Int8Sum", "Int8SumRelu")
