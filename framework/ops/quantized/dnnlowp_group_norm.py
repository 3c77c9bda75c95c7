"""Caffe2's DNNLOWP Int8GroupNorm (``quantization/server/group_norm_dnnlowp_op.cc`` and its ``_avx2.cc``
kernels): group normalization in integer arithmetic over Int8TensorCPU blobs, step for step as Caffe2 runs
it on an AVX2 machine. No gradient (Caffe2 registers none)."""

from __future__ import annotations

import numpy as np

from framework.errors import ShapeError, TypeMismatchError
from framework.memory.int8_tensor import Int8TensorCPU
from framework.ops.gradient import should_not_do_gradient
from framework.ops.operator import Operator
from framework.ops.quantized.dnnlowp_common import (
    check_dnnlowp_args,
    dnnlowp_input,
    dynamic_qparams,
    output_spec,
    qfactory,
    static_qparams,
    write_output,
)
from framework.ops.quantized.dnnlowp_qparams import (
    DNNLOWP_ARGS,
    QParams,
    dequantize,
    quantize,
    requantize_int32,
    rounding_mul_shift,
)
from framework.ops.quantized.int8_common import I32, U8, int8_input
from framework.ops.registry import register_engine_type, register_op
from framework.ops.schema import BOOL, FLOAT, INT, STRING, UNKNOWN, Arg

F32 = np.dtype(np.float32)
f32 = np.float32


def quantize_int32(x: np.ndarray, scale: float) -> np.ndarray:
    """fbgemm::Quantize<int32_t>(x, zero_point 0, scale, 32): nearbyint(float32(x * (1/scale))), clamped to int32."""
    with np.errstate(all="ignore"):
        t = (x.astype(F32) * (f32(1) / f32(scale))).astype(F32)
        r = np.rint(np.clip(np.nan_to_num(t, nan=-(2.0**31)), -(2.0**31), 2.0**31 - 1))
    return r.astype(np.int64).astype(I32)


def _wrap32(v: np.ndarray) -> np.ndarray:
    """int32 arithmetic's wrap-around (what the C++ int32 products and sums do)."""
    return v.astype(np.int64).astype(np.int32)


def _group_view(a: np.ndarray, n: int, g: int, k: int, nhwc: bool) -> np.ndarray:
    """(N, G, K, HxW) view of an NCHW array, or (N, HxW, G, K) of an NHWC one."""
    return a.reshape(n, -1, g, k) if nhwc else a.reshape(n, g, k, -1)


@register_op(
    "Int8GroupNorm",
    inputs=3,
    outputs=frozenset({1, 3}),
    args=[
        Arg("group", INT, 32, "number of channel groups (C must be a multiple)", low=1),
        Arg("epsilon", FLOAT, 1e-5, "added to each group's variance"),
        Arg("order", STRING, "NCHW", "storage order of X", choices=("NCHW", "NHWC")),
        Arg("is_test", BOOL, True, "accepted (the DNNLOWP op only does inference)"),
        Arg("is_param_constant", BOOL, True, "accepted: gamma/beta are quantized on every run here"),
        *DNNLOWP_ARGS,
    ],
    input_docs=[
        ("X", "Int8TensorCPU (or float32 tensor) of rank >= 2: N, C, spatial dims (NCHW) or N, spatial, C (NHWC)"),
        ("gamma", "float32 (or Int8TensorCPU of uint8 codes) with C elements"),
        ("beta", "float32 (or Int8TensorCPU of int32 codes, zero point 0, scale X.scale * gamma.scale), C elements"),
    ],
    output_docs=[
        ("Y", "Int8TensorCPU of X's shape (float32 with dequantize_output)"),
        ("mean", "left untouched (Caffe2's DNNLOWP op never writes it)"),
        ("inv_std", "left untouched (Caffe2's DNNLOWP op never writes it)"),
    ],
    infer=lambda args, ins: [output_spec(args, ins[0].shape)] + [UNKNOWN] * (args.num_outputs - 1),
    category="quantized",
)
class Int8GroupNorm(Operator):
    """Group normalization of quantized activations, in Caffe2's integer arithmetic: gamma quantized to
    int32 with its own min/max scale (``weight_precision``, zero point 0), beta to int32 with scale
    ``X.scale * gamma.scale``; per (sample, group) the code sum and sum of squares give
    ``mu = round(mean) - X.zero_point`` and the variance (float32, scaled by ``X.scale^2``), whose inverse
    standard deviations ``1/sqrt(var + epsilon)`` are quantized to int32 together (min/max scale, zero point
    0); then ``scale = gamma_q * rsig_q`` and ``bias = beta' - scale * round(mean)`` (int32, beta' beta
    requantized by ``1 / rsig.scale`` in fixed point) and ``Y = requantize(X * scale + bias)`` with the
    multiplier ``X.scale * gamma.scale * rsig.scale / Y.scale``: fixed point for each run of 8 codes along
    the innermost axis (HxW for NCHW, C for NHWC), float32 for the remainder (Caffe2's AVX2 kernels).

    Y's parameters: ``Y_scale``/``Y_zero_point`` (or ``followed_by``), else chosen from the range of the
    float32 GroupNorm of the dequantized inputs. With ``dequantize_output`` Y is computed in float32 from
    the dequantized codes (moments, ``1/sqrt``, affine) and no output parameters are chosen.

    Departures: gamma/beta are not cached between runs (``is_param_constant`` is read and has no effect:
    a changed gamma is used at once, Caffe2 keeps its first quantization); an Int8 beta is dequantized for
    the float32 reference (Caffe2 fails there); sizes of gamma/beta are checked (C elements); an empty X
    gives an empty Y (Caffe2 divides by zero); float32 sums and ``1/sqrt`` use numpy's order (a code at a
    rounding boundary may differ by one from Caffe2's Eigen). The optional outputs mean / inv_std are
    left untouched, as Caffe2's DNNLOWP op leaves them. No gradient.

    ``GroupNorm`` with engine DNNLOWP runs this op (the registry's engine table), as in Caffe2."""

    def setup(self) -> None:
        check_dnnlowp_args(self)
        self.qf = qfactory(self)
        self.static = static_qparams(self, self.qf)

    def _shape(self, x: np.ndarray) -> tuple[int, int, int, int, bool]:
        if x.ndim < 2:
            raise ShapeError(f"{self.describe()}: X ('{self.input_names[0]}') must have rank >= 2, got {list(x.shape)}")
        nhwc = self.args.order == "NHWC"
        n, c, g = x.shape[0], (x.shape[-1] if nhwc else x.shape[1]), self.args.group
        if c % g:
            raise ShapeError(
                f"{self.describe()}: C = {c} of X ('{self.input_names[0]}') is not a multiple of group {g}"
            )
        return n, c, g, c // g, nhwc

    def _gamma(self, c: int) -> tuple[float, np.ndarray, np.ndarray]:
        """(scale, int32 codes with zero point 0, float32 values) of gamma."""
        if isinstance(self.inputs[1].held, Int8TensorCPU):
            q = int8_input(self, 1)
            self._size(1, q.t.array, c)
            codes = _wrap32(q.t.array.reshape(-1).astype(np.int64) - q.zero_point)
            return q.scale, codes, dequantize(codes, QParams(q.scale, 0))
        g = self._float(1, c)
        qp = self.qf.choose_values(g, f"{self.describe()}: gamma ('{self.input_names[1]}')", is_weight=True)
        return qp.scale, quantize_int32(g, qp.scale), g

    def _beta(self, c: int, x_scale: float, gamma_scale: float) -> tuple[np.ndarray, np.ndarray]:
        """(int32 codes at scale X.scale * gamma.scale, float32 values) of beta."""
        scale = f32(f32(x_scale) * f32(gamma_scale))
        if isinstance(self.inputs[2].held, Int8TensorCPU):
            q = int8_input(self, 2, I32)
            self._size(2, q.t.array, c)
            if not abs(f32(q.scale) - scale) <= 1e-4 or q.zero_point != 0:
                raise ShapeError(
                    f"{self.describe()}: beta ('{self.input_names[2]}') has scale {q.scale} and zero point "
                    f"{q.zero_point}; expected X.scale * gamma.scale = {scale} (within 1e-4) and 0"
                )
            codes = q.t.array.reshape(-1)
            return codes, dequantize(codes, QParams(q.scale, 0))
        b = self._float(2, c)
        return quantize_int32(b, float(scale)), b

    def _size(self, i: int, a: np.ndarray, c: int) -> None:
        if a.size != c:
            raise ShapeError(
                f"{self.describe()}: input {i} ('{self.input_names[i]}') must have C = {c} elements, got {a.size}"
            )

    def _float(self, i: int, c: int) -> np.ndarray:
        a = self.input(i)
        if a.dtype != F32:
            raise TypeMismatchError(
                f"{self.describe()}: input {i} ('{self.input_names[i]}') must be float32, got {a.dtype}"
            )
        self._size(i, a, c)
        return a.reshape(-1)

    def run(self) -> None:
        in_qp, x, is_int8 = dnnlowp_input(self, 0, self.qf)
        n, c, g, k, nhwc = self._shape(x)
        gamma_scale, gamma_q, gamma_f = self._gamma(c)
        beta_q, beta_f = self._beta(c, in_qp.scale, gamma_scale)
        codes = x if is_int8 else quantize(x, in_qp, np.empty(x.shape, U8))
        if self.args.dequantize_output:
            write_output_float(self, self._float_norm(dequantize(codes, in_qp), n, g, k, nhwc, gamma_f, beta_f))
            return
        qp = self.static
        if qp is None:
            y = self._float_norm(dequantize(x, in_qp) if is_int8 else x, n, g, k, nhwc, gamma_f, beta_f)
            qp = dynamic_qparams(self, self.qf, y)
        if x.size == 0:
            write_output(self, np.empty(x.shape, U8), qp)
            return
        write_output(self, self._int_norm(codes, in_qp, qp, n, g, k, nhwc, gamma_scale, gamma_q, beta_q), qp)

    def _float_norm(self, xf, n, g, k, nhwc, gamma, beta) -> np.ndarray:
        """The float32 group norm (Caffe2's GroupNormOp, and the dequantize_output path)."""
        if xf.size == 0:
            return xf.astype(F32)
        v = _group_view(xf, n, g, k, nhwc)
        axes = (1, 3) if nhwc else (2, 3)
        with np.errstate(all="ignore"):
            mu = v.mean(axis=axes, dtype=F32, keepdims=True)
            var = (np.square(v).mean(axis=axes, dtype=F32, keepdims=True) - mu * mu).astype(F32)
            rsig = (f32(1) / np.sqrt(var + f32(self.args.epsilon))).astype(F32)
            gs = (1, 1, g, k) if nhwc else (1, g, k, 1)
            scale = gamma.reshape(gs) * rsig
            bias = beta.reshape(gs) - scale * mu
            return (v * scale + bias).astype(F32).reshape(xf.shape)

    def _int_norm(self, codes, in_qp, qp, n, g, k, nhwc, gamma_scale, gamma_q, beta_q) -> np.ndarray:
        v = _group_view(codes, n, g, k, nhwc).astype(np.int64)
        axes = (1, 3) if nhwc else (2, 3)
        inner = v.size // (n * g)
        s, ss = v.sum(axis=axes), np.square(v).sum(axis=axes)  # (N, G), exact
        with np.errstate(all="ignore"):
            mean = (s.astype(F32) / f32(inner)).astype(F32)
            rounded = np.where(mean >= 0, np.floor(mean + 0.5), np.ceil(mean - 0.5)).astype(np.int64)  # std::round
            var = ((ss.astype(F32) / f32(inner)).astype(F32) - (mean * mean).astype(F32)).astype(F32)
            var = (f32(f32(in_qp.scale) * f32(in_qp.scale)) * var).astype(F32)
            rsig = (f32(1) / np.sqrt(var + f32(self.args.epsilon))).astype(F32)
        rsig_qp = self.qf.choose_values(rsig, f"{self.describe()}: the groups' inverse std", is_weight=True)
        rsig_q = quantize_int32(rsig, rsig_qp.scale)
        internal = f32(f32(f32(rsig_qp.scale) * f32(gamma_scale)) * f32(in_qp.scale))
        mult, shift = self.qf.requantization(float(f32(1) / f32(rsig_qp.scale)))
        bias_c = requantize_int32(beta_q, mult, shift).reshape(g, k)
        scale = _wrap32(gamma_q.reshape(1, g, k).astype(np.int64) * rsig_q.reshape(n, g, 1))  # (N, G, K)
        bias = _wrap32(bias_c.astype(np.int64) - scale.astype(np.int64) * rounded.reshape(n, g, 1))
        if nhwc:
            acc = v * scale.reshape(n, 1, g, k) + bias.reshape(n, 1, g, k)
            acc = _wrap32(acc).reshape(n, -1, g * k)
        else:
            acc = _wrap32(v * scale.reshape(n, g, k, 1) + bias.reshape(n, g, k, 1)).reshape(n, g * k, -1)
        real = float(f32(internal / f32(qp.scale)))
        out_mult, out_shift = self.qf.requantization(real)
        width = acc.shape[-1]
        fixed = width // 8 * 8  # the AVX2 kernels: fixed point on runs of 8, fbgemm's float Requantize after
        out = np.empty(acc.shape, np.int64)
        out[..., :fixed] = rounding_mul_shift(acc[..., :fixed], out_mult, out_shift) + qp.zero_point
        with np.errstate(all="ignore"):
            tail = np.multiply(acc[..., fixed:].astype(F32), f32(real), dtype=F32)
            out[..., fixed:] = np.rint(np.clip(tail, -(2.0**40), 2.0**40)).astype(np.int64) + qp.zero_point
        return np.clip(out, 0, 255).astype(U8).reshape(codes.shape)


def write_output_float(op: Operator, y: np.ndarray) -> None:
    op.output(0, y.shape, F32)[...] = y


should_not_do_gradient("Int8GroupNorm")
register_engine_type("GroupNorm", ("DNNLOWP",), "Int8GroupNorm")  # Caffe2's DNNLOWP engine of GroupNorm
