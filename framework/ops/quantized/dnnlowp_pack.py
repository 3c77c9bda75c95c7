"""Caffe2's DNNLOWP weight pre-packing (``quantization/server/fbgemm_pack_op.cc``, ``fbgemm_pack_blob.h``):
Int8FCPackWeight and Int8ConvPackWeight quantize a weight once (in an init net) into a packed blob the
DNNLOWP ops read, with the column offsets and, given a bias and ``in_scale``, the int32 bias.

There is no fbgemm here: the packed blobs are small Python objects holding what fbgemm's PackBMatrix
packs (the signed int8 weight codes, row-major as given) and what Caffe2 keeps beside it (per-group
``qparams`` with the zero point already shifted to the signed range, ``column_offsets``, ``bias``, the
original shape). Caffe2 registers no serializer for either blob type, so saving one is a
SerializationError here too; shape inference leaves them unknown (Caffe2's reports an int8 tensor of
W's shape). Shared helpers: ``quantize_weight`` (QuantizeWeight), ``column_offsets``
(ComputeColumnOffsets), ``quantize_bias`` (QuantizeConvBias). Neither op has a gradient.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from framework.errors import ShapeError, TypeMismatchError
from framework.memory.int8_tensor import Int8TensorCPU
from framework.ops.gradient import should_not_do_gradient
from framework.ops.nn.axes import coerce_2d
from framework.ops.operator import Operator
from framework.ops.quantized.dnnlowp_common import check_dnnlowp_args
from framework.ops.quantized.dnnlowp_qparams import QFACTORY_ARGS, QFactory, QParams
from framework.ops.quantized.int8_common import I32, int8_input, int8_output
from framework.ops.registry import register_op
from framework.ops.schema import BOOL, FLOAT, INT, UNKNOWN, Arg, TensorSpec

__all__ = [
    "Int8ConvDNNLowPPackedWeightBlob",
    "Int8FCDNNLowPPackedWeightBlob",
    "column_offsets",
    "quantize_bias",
    "quantize_weight",
]

F32, I8 = np.dtype(np.float32), np.dtype(np.int8)
f32 = np.float32


def quantize_signed(x: np.ndarray, qp: QParams) -> np.ndarray:
    """fbgemm's Quantize<int8_t> (LEGACY) with a signed zero point: at precision 8 the AVX2 kernel (one fused
    multiply-add, clamped to [-128, 127]), else ``nearbyint(zp + x * (1/scale))`` clamped to the precision."""
    inv = f32(1) / f32(qp.scale)
    half = 1 << (qp.precision - 1)
    with np.errstate(all="ignore"):
        if qp.precision == 8:
            v = (x.astype(np.float64) * float(inv) + qp.zero_point).astype(F32)
            v = np.where(np.isnan(v), f32(2**31 - 128), v)
        else:
            v = (x.astype(F32) * inv).astype(F32) + f32(qp.zero_point)
            v = np.where(np.isnan(v), f32(-(2.0**31)), v)
        r = np.rint(np.clip(v, -1024.0, 1024.0))
    return np.clip(r, -half, half - 1).astype(I8)


def quantize_weight(
    op: Operator, i: int, qf: QFactory, rows: int, cols: int, groups: int
) -> tuple[list[QParams], np.ndarray]:
    """Caffe2's QuantizeWeight of input ``i`` seen as (``rows`` output channels, ``cols``) in ``groups``
    quantization groups: (qparams per group, zero points shifted by -2^(p-1); int8 codes (rows, cols))."""
    signed_min = -(1 << (qf.weight_precision - 1))
    if isinstance(op.inputs[i].held, Int8TensorCPU):
        q = int8_input(op, i)
        codes = (q.t.array.astype(np.int16) + signed_min).astype(I8)
        return [QParams(q.scale, q.zero_point + signed_min, qf.weight_precision)], codes.reshape(rows, cols)
    w = op.input(i)
    if w.dtype != F32:
        raise TypeMismatchError(
            f"{op.describe()}: input {i} ('{op.input_names[i]}') must be float32 or an Int8TensorCPU, got {w.dtype}"
        )
    flat = w.reshape(rows, cols)
    per = rows // groups
    qparams, out = [], np.empty(flat.shape, I8)
    for g in range(groups):
        block = flat[g * per : (g + 1) * per]
        qp = qf.choose_values(block, f"{op.describe()}: weights ('{op.input_names[i]}')", is_weight=True)
        qp = QParams(qp.scale, qp.zero_point + signed_min, qp.precision)
        out[g * per : (g + 1) * per] = quantize_signed(block, qp)
        qparams.append(qp)
    return qparams, out


def column_offsets(w_q: np.ndarray, qparams: list[QParams]) -> np.ndarray:
    """ComputeColumnOffsets: per output row j of the (N, K) codes, ``sum_k W[j, k] - zero_point * K``."""
    n, k = w_q.shape
    zps = np.repeat([qp.zero_point for qp in qparams], n // len(qparams)) if n else np.zeros(0, np.int64)
    return (w_q.astype(np.int64).sum(axis=1) - zps * k).astype(I32)


def quantize_bias(op: Operator, i: int, in_scale: float, qparams: list[QParams], n: int) -> np.ndarray:
    """QuantizeConvBias (round to nearest even): a float bias to int32 at ``in_scale * w_scale`` of its group;
    an Int8TensorCPU bias (int32 codes, zero point 0, scale within 1e-4 of in_scale * w_scale) copied."""
    if isinstance(op.inputs[i].held, Int8TensorCPU):
        q = int8_input(op, i, I32)
        want = f32(f32(in_scale) * f32(qparams[0].scale))
        if not abs(f32(q.scale) - want) <= 1e-4 or q.zero_point != 0:
            raise ShapeError(
                f"{op.describe()}: bias ('{op.input_names[i]}') has scale {q.scale}, zero point {q.zero_point}; "
                f"expected in_scale * weight scale = {want} (within 1e-4) and 0"
            )
        b = q.t.array.reshape(-1)
    else:
        b = op.input(i)
        if b.dtype != F32:
            raise TypeMismatchError(f"{op.describe()}: bias ('{op.input_names[i]}') must be float32, got {b.dtype}")
        b = b.reshape(-1)
    if b.size != n:
        raise ShapeError(f"{op.describe()}: bias ('{op.input_names[i]}') has {b.size} elements, expected {n}")
    if b.dtype == I32:
        return b.copy()
    per = n // len(qparams) if n else 1
    out = np.empty(n, I32)
    for g, qp in enumerate(qparams):
        s = f32(f32(in_scale) * f32(qp.scale))
        with np.errstate(all="ignore"):
            t = (b[g * per : (g + 1) * per] * (f32(1) / s)).astype(F32)
            out[g * per : (g + 1) * per] = np.clip(np.rint(np.nan_to_num(t, nan=-(2.0**31))), -(2.0**31), 2**31 - 1)
    return out


class _PackedWeights:
    __slots__ = ("qparams", "w_q", "column_offsets", "bias", "shape", "unpacked")

    def __init__(self, qparams, w_q, col, bias, shape, unpacked) -> None:
        self.qparams: list[QParams] = qparams
        self.w_q: np.ndarray = w_q  # int8 codes, the weight's shape (fbgemm would block them)
        self.column_offsets: np.ndarray = col
        self.bias: np.ndarray | None = bias
        self.shape: tuple = shape
        self.unpacked: bool = unpacked  # save_unpacked_weights: Caffe2's original_tensor holds the codes

    @property
    def original_tensor(self) -> np.ndarray | None:
        """Caffe2's ``original_tensor``: the int8 codes with save_unpacked_weights, else shape only (None)."""
        return self.w_q if self.unpacked else None

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(shape={list(self.shape)}, groups={len(self.qparams)}, bias={self.bias is not None})"
        )


class Int8FCDNNLowPPackedWeightBlob(_PackedWeights):
    """Int8FCPackWeight's blob: FC weights W (N, K) as int8 codes with per-tensor or per-row qparams."""


class Int8ConvDNNLowPPackedWeightBlob(_PackedWeights):
    """Int8ConvPackWeight's blob: conv filters (M, kernel..., C/group) as int8 codes, per-tensor or per-group."""


_PACK_ARGS = (
    Arg("save_unpacked_weights", BOOL, False, "keep the codes as the blob's original_tensor"),
    Arg(
        "in_scale", FLOAT, None, "scale of the input activation: required with a bias (quantized at in_scale * w_scale)"
    ),
    *QFACTORY_ARGS,
)


def _check_pack(op: Operator) -> None:
    check_dnnlowp_args(op)
    if op.op_def.engine == "DNNLOWP_ACC16":
        raise op.arg_error("engine DNNLOWP_ACC16 (16-bit accumulation with outlier extraction) is not supported")
    if op.args.weight_quantization_kind.lower() not in ("min_max", "min_max_quantization"):
        raise op.arg_error(f"weight_quantization_kind {op.args.weight_quantization_kind!r}: only min_max is ported")
    if len(op.inputs) > 1:
        s = op.args.in_scale
        if s is None:
            raise op.arg_error("in_scale is required when a bias is given")
        if not (np.isfinite(f32(s)) and f32(s) > 0):
            raise op.arg_error(f"in_scale must be positive and finite, got {s}")


def _fc_pack_infer(args, ins):
    if args.num_outputs < 2:
        return [UNKNOWN]
    b = ins[1] if len(ins) > 1 else UNKNOWN
    return [UNKNOWN, TensorSpec(None if b.shape is None else (math.prod(b.shape),), I32)]


@register_op(
    "Int8FCPackWeight",
    inputs=(1, 2),
    outputs=(1, 2),
    args=[
        Arg("axis_w", INT, 1, "W is flattened to (N, K) at this axis"),
        Arg("quantize_channelwise", BOOL, False, "one scale / zero point per output row"),
        *_PACK_ARGS,
    ],
    input_docs=[("W", "float32 (or Int8TensorCPU) FC weights (N, K)"), ("b", "optional bias: float32 or Int8 int32")],
    output_docs=[
        ("W_q", "an Int8FCDNNLowPPackedWeightBlob (int8 codes, qparams, column offsets, int32 bias)"),
        ("B_q", "optional: the int32 bias as an Int8TensorCPU (scale in_scale * w_scale, zero point 0)"),
    ],
    infer=_fc_pack_infer,
    category="quantized",
)
class Int8FCPackWeight(Operator):
    """Quantize FC weights for Int8FCRelu (and Caffe2's DNNLOWP FC): W flattened at ``axis_w`` to (N, K) is
    quantized with min/max parameters (per tensor, or per output row with ``quantize_channelwise`` or the
    DNNLOWP_ROWWISE engine; ``weight_precision`` bits, ``preserve_weight_sparsity``), the zero point shifted
    by -2^(p-1) so the codes are int8 (an Int8TensorCPU W keeps its parameters: codes - 128). The blob also
    holds the column offsets (row sums minus zero point * K) and, given b, the bias quantized to int32 at
    scale ``in_scale * w_scale`` (round to nearest even); a second output gets that bias as an Int8TensorCPU
    (per-tensor quantization only, as in Caffe2).

    Departures: the DNNLOWP_ACC16 engine and weight kinds other than min_max are refused; an Int8 bias's
    size is checked. No gradient."""

    def setup(self) -> None:
        _check_pack(self)
        self.qf = QFactory.of(self.args)
        self.channelwise = bool(self.args.quantize_channelwise) or self.op_def.engine == "DNNLOWP_ROWWISE"
        if len(self.outputs) > 1 and (len(self.inputs) < 2 or self.channelwise):
            raise self.arg_error("the B_q output needs a bias input and per-tensor quantization")

    def run(self) -> None:
        obj = self.inputs[0].held
        shape = obj.shape if isinstance(obj, Int8TensorCPU) else self.input(0).shape
        n, k = coerce_2d(shape, self.args.axis_w, f"{self.describe()}: W '{self.input_names[0]}'")
        qparams, w2 = quantize_weight(self, 0, self.qf, n, k, n if self.channelwise and n else 1)
        bias = quantize_bias(self, 1, self.args.in_scale, qparams, n) if len(self.inputs) > 1 else None
        if len(self.outputs) > 1:
            scale = float(f32(f32(self.args.in_scale) * f32(qparams[0].scale)))
            int8_output(self, 1, bias.shape, scale, 0, I32)[...] = bias
        blob = Int8FCDNNLowPPackedWeightBlob(
            qparams, w2, column_offsets(w2, qparams), bias, tuple(shape), bool(self.args.save_unpacked_weights)
        )
        self.outputs[0].reset(blob)


@register_op(
    "Int8ConvPackWeight",
    inputs=(1, 2),
    args=[
        Arg("group", INT, 1, "convolution groups (output channels M must be a multiple)", low=1),
        Arg("quantize_groupwise", BOOL, False, "one scale / zero point per group"),
        *_PACK_ARGS,
    ],
    input_docs=[
        ("W", "float32 (or Int8TensorCPU) filters in KRSC layout: (M, kernel dims..., C / group)"),
        ("b", "optional bias: float32 or Int8 int32, M elements"),
    ],
    output_docs=[("W_q", "an Int8ConvDNNLowPPackedWeightBlob (int8 codes, qparams, column offsets, int32 bias)")],
    infer=lambda args, ins: [UNKNOWN],
    category="quantized",
)
class Int8ConvPackWeight(Operator):
    """Quantize convolution filters for Caffe2's DNNLOWP Int8Conv: the M output channels of the KRSC filter
    (each row ``kernel dims * C / group`` values) are quantized with min/max parameters per tensor, or per
    group with ``quantize_groupwise``, into int8 codes (zero point shifted by -2^(p-1)), with the column
    offsets per output channel and, given b, the int32 bias at ``in_scale * w_scale``. Caffe2 also picks
    a packed layout (depthwise 3x3, grouped conv, plain GEMM) from the conv arguments (kernel, stride,
    pads...); the layout changes no value, so those arguments are accepted and not read.

    Departures: the DNNLOWP_ACC16 engine (outlier extraction) and weight kinds other than min_max are
    refused. No DNNLOWP Int8Conv is registered here to consume the blob. No gradient."""

    def setup(self) -> None:
        _check_pack(self)
        self.qf = QFactory.of(self.args)

    def run(self) -> None:
        obj = self.inputs[0].held
        shape = obj.shape if isinstance(obj, Int8TensorCPU) else self.input(0).shape
        if len(shape) < 2:
            raise ShapeError(f"{self.describe()}: W ('{self.input_names[0]}') must have rank >= 2, got {list(shape)}")
        m, g = shape[0], self.args.group
        if m % g:
            raise ShapeError(
                f"{self.describe()}: {m} output channels of W ('{self.input_names[0]}') are not a multiple of group {g}"
            )
        qparams, w2 = quantize_weight(
            self, 0, self.qf, m, math.prod(shape[1:]), g if self.args.quantize_groupwise else 1
        )
        bias = quantize_bias(self, 1, self.args.in_scale, qparams, m) if len(self.inputs) > 1 else None
        blob = Int8ConvDNNLowPPackedWeightBlob(
            qparams, w2, column_offsets(w2, qparams), bias, tuple(shape), bool(self.args.save_unpacked_weights)
        )
        self.outputs[0].reset(blob)


def packed_fc(op: Operator, i: int) -> Any:
    """The Int8FCDNNLowPPackedWeightBlob of input ``i``, or None when it holds something else."""
    obj = op.inputs[i].held
    return obj if isinstance(obj, Int8FCDNNLowPPackedWeightBlob) else None


should_not_do_gradient("Int8FCPackWeight", "Int8ConvPackWeight")
