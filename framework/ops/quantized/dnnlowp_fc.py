"""Caffe2's DNNLOWP Int8FCRelu (``quantization/server/fully_connected_dnnlowp_op.cc``, FullyConnectedDNNLowPOp
with a fused Relu): FC on uint8 activations and int8 weights with int32 accumulation and fbgemm's
requantization. The same class without the Relu is what Caffe2 runs for ``FC`` and ``Int8FC`` under its
DNNLOWP / DNNLOWP_ROWWISE engines: those are routed here through the registry's engine table (plain
``Int8FC`` is QNNPACK's). No gradient (Caffe2 registers none)."""

from __future__ import annotations

import math

import numpy as np

from framework.errors import ShapeError, TypeMismatchError
from framework.memory.int8_tensor import Int8TensorCPU
from framework.ops.gradient import should_not_do_gradient
from framework.ops.nn.axes import canonical_axis, coerce_2d
from framework.ops.operator import Operator
from framework.ops.quantized.dnnlowp_common import (
    check_dnnlowp_args,
    dnnlowp_input,
    dynamic_qparams,
    output_spec,
    qfactory,
    static_qparams,
)
from framework.ops.quantized.dnnlowp_pack import column_offsets, packed_fc, quantize_weight
from framework.ops.quantized.dnnlowp_qparams import DNNLOWP_ARGS, QParams, dequantize, quantize
from framework.ops.quantized.int8_common import I32, U8, int8_input, int8_output
from framework.ops.registry import register_engine_type, register_op
from framework.ops.schema import BOOL, INT, Arg, Cost

F32 = np.dtype(np.float32)
f32 = np.float32


def _out_shape(args, x, w):
    if x.shape is None or w.shape is None or any(d is None for d in x.shape + w.shape):
        return None
    ax = canonical_axis(args.axis, len(x.shape), "Int8FCRelu: X")
    n, _ = coerce_2d(tuple(w.shape), args.axis_w, "Int8FCRelu: W")
    return tuple(x.shape[:ax]) + (n,)


def _cost(args, ins, outs):
    shape = _out_shape(args, ins[0], ins[1])
    if shape is None:
        return Cost()
    m, n = math.prod(shape[:-1]), shape[-1]
    k = math.prod(ins[0].shape) // m if m else 0
    return Cost(flops=2.0 * m * n * k, bytes_moved=float(m * k + n * k + m * n), params_bytes=float(n * k + 4 * n))


@register_op(
    "Int8FCRelu",
    inputs=3,
    args=[
        Arg("axis", INT, 1, "X is flattened to (M, K) at this axis"),
        Arg("axis_w", INT, 1, "W is flattened to (N, K) at this axis"),
        Arg("quantize_channelwise", BOOL, False, "one weight scale / zero point per output column"),
        Arg("constant_weight", BOOL, True, "accepted: the weights are quantized on every run here"),
        *DNNLOWP_ARGS,
    ],
    input_docs=[
        ("X", "Int8TensorCPU (or float32 tensor), flattened to (M, K) at `axis`"),
        ("W", "float32, Int8TensorCPU, or Int8FCDNNLowPPackedWeightBlob weights (N, K)"),
        ("b", "float32 or Int8TensorCPU (int32 codes, zero point 0) bias of N values"),
    ],
    output_docs=[("Y", "Int8TensorCPU, X's dims before `axis` then N (float32 with dequantize_output)")],
    infer=lambda args, ins: [output_spec(args, _out_shape(args, ins[0], ins[1]))],
    cost=_cost,
    category="quantized",
)
class Int8FCRelu(Operator):
    """``Y = Relu(X W^T + b)`` in DNNLOWP's integer arithmetic. X (uint8 codes; a float X is quantized with
    parameters from its min/max), W as int8 codes ``w - 128`` with zero point ``z_w - 128`` (quantized with
    min/max parameters per tensor, per output column with ``quantize_channelwise`` or the DNNLOWP_ROWWISE
    engine; or taken from an Int8TensorCPU or an Int8FCPackWeight blob), b as int32 at scale
    ``X.scale * W.scale`` of the first group (Caffe2's FC does so even per row, then requantizes each
    column at its own row's scale: kept, so a per-row bias is off by that ratio as in Caffe2). With
    ``acc = sum_k X[i, k] W[j, k]`` (int32):
    ``raw = acc - X.zero_point * col_offset[j] - rowsum(X[i]) * z_w + b_q[j]`` and
    ``Y = max(Y.zero_point, clamp(Y.zero_point + nearbyint(raw * X.scale * W.scale / Y.scale), 0, 255))``
    (the float multiplier of fbgemm's ReQuantizeOutput). A packed blob's own bias (quantized with its
    ``in_scale``) replaces b, as in Caffe2.

    Y's parameters: ``Y_scale``/``Y_zero_point`` (or ``followed_by``) narrowed to [0, max] for the Relu;
    else chosen from the range, clamped at 0, of the float32 FC of the dequantized X with the float
    weights and bias, on the op's first run only: Caffe2 keeps them for later runs (here too, per op
    instance). ``dequantize_output`` gives float32 ``max(0, raw' * (X.scale * W.scale) + b)`` (raw' without
    the bias), fbgemm's ReQuantizeForFloat.

    Departures: weights and bias are quantized on every run (Caffe2 caches them with ``constant_weight``:
    the same results unless they change between runs); the float32 reference for dynamic parameters also
    works with an Int8 bias or a packed W (Caffe2 fails there); an Int8 bias with ``dequantize_output`` is
    dequantized at its own scale (Caffe2 reads an unset one); sizes (K, N) are checked; engines with 16-bit
    codes or 16-bit accumulation are refused. No gradient.

    ``FC`` / ``Int8FC`` ops with a DNNLOWP or DNNLOWP_ROWWISE engine run this op without the Relu (no
    narrowing, no clamp at 0 or at Y.zero_point), as Caffe2's FullyConnectedDNNLowPOp<uint8_t, false>."""

    def setup(self) -> None:
        check_dnnlowp_args(self)
        self.relu = self.op_def.type == "Int8FCRelu"  # FC / Int8FC under a DNNLOWP engine: no Relu
        if self.op_def.engine == "DNNLOWP_ACC16":
            raise self.arg_error("engine DNNLOWP_ACC16 (16-bit accumulation) is not supported")
        if self.args.weight_quantization_kind.lower() not in ("min_max", "min_max_quantization"):
            raise self.arg_error(
                f"weight_quantization_kind {self.args.weight_quantization_kind!r}: only min_max is ported"
            )
        self.qf = qfactory(self)
        self.channelwise = bool(self.args.quantize_channelwise) or self.op_def.engine == "DNNLOWP_ROWWISE"
        self.static = static_qparams(self, self.qf)
        if self.static is not None and self.relu:  # AdjustOutputTensorQuantizationParamsWithFollowedBy(Relu)
            self.static = self.qf.choose(0.0, self.static.max())
        self.chosen: QParams | None = None  # dynamic output parameters, chosen on the first run

    def _weights(self, k: int):
        packed = packed_fc(self, 1)
        if packed is not None:
            w2 = packed.w_q
            n = w2.shape[0]
            if w2.shape[1] != k:
                raise ShapeError(
                    f"{self.describe()}: the packed W ('{self.input_names[1]}') is ({n}, {w2.shape[1]}); X has K = {k}"
                )
            if len(packed.qparams) != (n if self.channelwise else 1):
                raise ShapeError(
                    f"{self.describe()}: W ('{self.input_names[1]}') was packed with {len(packed.qparams)} "
                    f"quantization groups, this op needs {n if self.channelwise else 1}"
                )
            return packed.qparams, w2, packed.column_offsets, packed.bias
        obj = self.inputs[1].held
        shape = obj.shape if isinstance(obj, Int8TensorCPU) else self.input(1).shape
        n, wk = coerce_2d(shape, self.args.axis_w, f"{self.describe()}: W '{self.input_names[1]}'")
        if wk != k:
            raise ShapeError(
                f"{self.describe()}: W ('{self.input_names[1]}') {list(shape)} flattened at axis_w is ({n}, {wk}); "
                f"X has K = {k}"
            )
        if self.channelwise and isinstance(obj, Int8TensorCPU) and n != 1:
            raise ShapeError(
                f"{self.describe()}: a pre-quantized W ('{self.input_names[1]}') has one scale: no channelwise"
            )
        qparams, w2 = quantize_weight(self, 1, self.qf, n, k, n if self.channelwise and n else 1)
        return qparams, w2, column_offsets(w2, qparams), None

    def _bias(self, n: int, scale: float):
        """(int32 codes at ``scale`` or None, float32 values) of input 2."""
        if isinstance(self.inputs[2].held, Int8TensorCPU):
            q = int8_input(self, 2, I32)
            codes = q.t.array.reshape(-1)
            if codes.size != n:
                raise ShapeError(
                    f"{self.describe()}: b ('{self.input_names[2]}') has {codes.size} values, expected {n}"
                )
            if q.zero_point != 0:
                raise ShapeError(
                    f"{self.describe()}: b ('{self.input_names[2]}') must have zero point 0, got {q.zero_point}"
                )
            return codes, q.scale, dequantize(codes, QParams(q.scale, 0))
        b = self.input(2)
        if b.dtype != F32:
            raise TypeMismatchError(f"{self.describe()}: b ('{self.input_names[2]}') must be float32, got {b.dtype}")
        if b.size != n:
            raise ShapeError(f"{self.describe()}: b ('{self.input_names[2]}') has {b.size} values, expected {n}")
        b = b.reshape(-1)
        with np.errstate(all="ignore"):
            t = (b * (f32(1) / f32(scale))).astype(F32)
            codes = np.clip(np.rint(np.nan_to_num(t, nan=-(2.0**31))), -(2.0**31), 2**31 - 1).astype(I32)
        return codes, None, b

    def run(self) -> None:
        in_qp, x, is_int8 = dnnlowp_input(self, 0, self.qf)
        m, k = coerce_2d(x.shape, self.args.axis, f"{self.describe()}: X '{self.input_names[0]}'")
        qparams, w2, col, packed_bias = self._weights(k)
        n = w2.shape[0]
        bias_scale = float(f32(f32(in_qp.scale) * f32(qparams[0].scale)))
        b_q, b_scale, b_f = self._bias(n, bias_scale)
        if b_scale is not None and m > 0 and not abs(f32(b_scale) - f32(bias_scale)) <= 1e-4:
            raise ShapeError(
                f"{self.describe()}: b ('{self.input_names[2]}') has scale {b_scale}, expected X.scale * W.scale = "
                f"{bias_scale} (within 1e-4)"
            )
        if packed_bias is not None:
            if self.args.dequantize_output:
                raise self.arg_error("dequantize_output cannot be used with a packed W holding a bias")
            b_q = packed_bias
        out_shape = x.shape[: canonical_axis(self.args.axis, x.ndim, "X")] + (n,)
        codes = (x if is_int8 else quantize(x, in_qp, np.empty(x.shape, U8))).reshape(m, k).astype(np.int64)
        groups = np.repeat(np.arange(len(qparams)), n // len(qparams)) if n else np.zeros(0, np.int64)
        w_zp = np.array([qp.zero_point for qp in qparams], np.int64)[groups]
        w_scale = np.array([qp.scale for qp in qparams], F32)[groups]
        # int32 accumulation, exact: float64 holds every partial sum (|term| < 2^15, K < 2^38)
        acc = np.rint(codes.astype(np.float64) @ w2.astype(np.float64).T).astype(np.int64)
        raw = acc - in_qp.zero_point * col.astype(np.int64) - codes.sum(axis=1, keepdims=True) * w_zp
        if self.args.dequantize_output:
            with np.errstate(all="ignore"):
                mult = (f32(in_qp.scale) * w_scale).astype(F32)
                y = ((raw.astype(np.int32).astype(F32) * mult).astype(F32) + b_f).astype(F32)
            self.output(0, out_shape, F32)[...] = (np.maximum(y, f32(0)) if self.relu else y).reshape(out_shape)
            return
        qp = self.static or self.chosen
        if qp is None:
            obj = self.inputs[1].held  # the float32 FC reads a float W as is, an Int8 or packed one dequantized
            w_f = (
                self.input(1).reshape(n, k)
                if type(obj).__name__ == "Tensor"
                else self._dequant_rows(w2, qparams, groups)
            )
            xf = dequantize(x, in_qp) if is_int8 else x
            with np.errstate(all="ignore"):
                y = xf.reshape(m, k) @ w_f.T + b_f
            qp = dynamic_qparams(self, self.qf, y.astype(F32), relu=self.relu)
        raw32 = (raw + b_q.astype(np.int64)).astype(np.int32)
        with np.errstate(all="ignore"):
            mult = ((f32(in_qp.scale) * w_scale).astype(F32) / f32(qp.scale)).astype(F32)
            v = np.rint(np.clip((raw32.astype(F32) * mult).astype(F32), -(2.0**40), 2.0**40)) + qp.zero_point
        y8 = np.clip(np.maximum(v, qp.zero_point) if self.relu else v, 0, 255).astype(U8).reshape(out_shape)
        int8_output(self, 0, out_shape, qp.scale, qp.zero_point)[...] = y8
        self.chosen = qp if self.static is None else None

    @staticmethod
    def _dequant_rows(w2, qparams, groups):
        scales = np.array([qp.scale for qp in qparams], F32)[groups][:, None]
        zps = np.array([qp.zero_point for qp in qparams], np.int64)[groups][:, None]
        return ((w2.astype(np.int64) - zps).astype(F32) * scales).astype(F32)


should_not_do_gradient("Int8FCRelu")
# Caffe2: REGISTER_CPU_OPERATOR_WITH_ENGINE(FC / Int8FC, DNNLOWP(_ROWWISE), FullyConnectedDNNLowPOp<uint8_t>)
register_engine_type("FC", ("DNNLOWP", "DNNLOWP_ROWWISE"), "Int8FCRelu")
register_engine_type("Int8FC", ("DNNLOWP", "DNNLOWP_ROWWISE"), "Int8FCRelu")
