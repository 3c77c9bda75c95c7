"""What Caffe2's DNNLOWP server ops share (``dnnlowp_op.h``'s DNNLowPOp, ``caffe2_dnnlowp_utils.cc``): reading
an input that is either an Int8TensorCPU or a float32 Tensor, the output quantization parameters (static
from ``Y_scale``/``Y_zero_point`` or ``followed_by``, else chosen from the float32 result's range) and
writing the output as an Int8TensorCPU or, with ``dequantize_output``, as float32.

- ``qfactory(op)``: the op's QFactory (precision, symmetry... arguments);
- ``dnnlowp_input(op, i, qf)``: ``(qparams, array, is_int8)``: an Int8TensorCPU's uint8 codes with its
  scale/zero point (precision: the activation precision, as GetInputTensorQuantizationParamsOf), or a
  float32 Tensor's values with parameters chosen from its min/max;
- ``input_codes(op, i, qf)``: ``(qparams, uint8 codes)``, quantizing a float input (QuantizeInputIfNeeded);
- ``static_qparams(op, qf)``: ParseDNNLowPOperatorArguments: ``followed_by`` Sigmoid/Tanh fix the output
  parameters to those of Caffe2's fixed-point Sigmoid/Tanh inputs (scale 2*x_sq/127 and 3/127 with
  x_sq = 3, zero point 128); ``Y_scale`` gives static parameters, narrowed to [0, max] when
  ``followed_by`` is Relu; None when the output parameters are dynamic;
- ``dynamic_qparams(op, qf, y)``: OpWrapper::GetOutputQuantizationParams: min/max of the float32 reference
  result ``y`` (clamped at 0 with ``followed_by`` Relu), then ChooseQuantizationParams;
- ``write_output(op, codes, qp)``: output 0 as an Int8TensorCPU (codes, scale, zero point), or float32
  ``scale * (codes - zero_point)`` with ``dequantize_output`` (RunOnDeviceEpilogue_).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from framework.errors import ShapeError, TypeMismatchError
from framework.memory.int8_tensor import Int8TensorCPU
from framework.ops.operator import Operator
from framework.ops.quantized.dnnlowp_qparams import QFactory, QParams, dequantize, quantize
from framework.ops.quantized.int8_common import U8, int8_input, int8_output
from framework.ops.schema import TensorSpec

__all__ = [
    "check_dnnlowp_args",
    "dnnlowp_input",
    "dynamic_qparams",
    "input_codes",
    "output_spec",
    "qfactory",
    "static_qparams",
    "write_output",
]

F32 = np.dtype(np.float32)
f32 = np.float32
_TANH_SCALE = f32(3.0 / 127)  # Tanh<uint8_t>: x_sq = ceil(atanh(1 - 0.02)) = 3 mapped to code 127 + 128
_SIGMOID_SCALE = f32(f32(2 * f32(_TANH_SCALE * f32(255 - 128))) / f32(127))  # 2 * x_sq / 127, x_sq dequantized
UNSUPPORTED_ENGINES = ("DNNLOWP_16", "DNNLOWP_ROWWISE_16", "DNNLOWP_ACC16")


def check_dnnlowp_args(op: Operator) -> None:
    """Setup-time checks: a usable Y_scale / Y_zero_point and an engine with uint8 codes."""
    engine = op.op_def.engine
    if engine in UNSUPPORTED_ENGINES:
        raise op.arg_error(f"engine {engine} (16-bit codes) is not supported: Int8TensorCPU blobs hold uint8 codes")
    scale = getattr(op.args, "Y_scale", None)
    if scale is not None:
        s = f32(scale)
        if not (np.isfinite(s) and s > 0):
            raise op.arg_error(f"Y_scale must be a positive finite number, got {scale}")
        top = (1 << op.args.activation_precision) - 1
        if not 0 <= op.args.Y_zero_point <= top:
            raise op.arg_error(
                f"Y_zero_point {op.args.Y_zero_point} is outside [0, {top}] (activation_precision "
                f"{op.args.activation_precision})"
            )


def qfactory(op: Operator) -> QFactory:
    return QFactory.of(op.args)


def _where(op: Operator, i: int) -> str:
    return f"{op.describe()}: input {i} ('{op.input_names[i]}')"


def dnnlowp_input(op: Operator, i: int, qf: QFactory, is_weight: bool = False) -> tuple[QParams, np.ndarray, bool]:
    """Input ``i`` as (qparams, uint8 codes or float32 values, is_int8)."""
    if isinstance(op.inputs[i].held, Int8TensorCPU):
        q = int8_input(op, i)
        return QParams(q.scale, q.zero_point, qf.activation_precision), q.t.array, True
    x = op.input(i)
    if x.dtype != F32:
        raise TypeMismatchError(f"{_where(op, i)} must be an Int8TensorCPU or a float32 tensor, got {x.dtype}")
    return qf.choose_values(x, _where(op, i), is_weight), x, False


def input_codes(op: Operator, i: int, qf: QFactory) -> tuple[QParams, np.ndarray]:
    """Input ``i``'s parameters and uint8 codes (a float input is quantized with its chosen parameters)."""
    qp, x, is_int8 = dnnlowp_input(op, i, qf)
    if is_int8:
        return qp, x
    return qp, quantize(x, qp, np.empty(x.shape, U8))


def static_qparams(op: Operator, qf: QFactory) -> QParams | None:
    """The output's static parameters (Y_scale and followed_by), or None when they are dynamic."""
    followed_by = op.args.followed_by
    if followed_by == "Sigmoid":
        return QParams(float(_SIGMOID_SCALE), 128, qf.activation_precision)
    if followed_by == "Tanh":
        return QParams(float(_TANH_SCALE), 128, qf.activation_precision)
    if op.args.Y_scale is None:
        return None
    qp = QParams(float(f32(op.args.Y_scale)), op.args.Y_zero_point, qf.activation_precision)
    if followed_by == "Relu":
        qp = qf.choose(0.0, qp.max())
    return qp


def dynamic_qparams(op: Operator, qf: QFactory, y: np.ndarray, relu: bool = False) -> QParams:
    """Parameters chosen from the float32 reference result ``y`` (FindMinMax; Relu clamps at 0)."""
    lo, hi = (float(y.min()), float(y.max())) if y.size else (0.0, 0.0)
    if relu or op.args.followed_by == "Relu":
        lo, hi = max(0.0, lo), max(0.0, hi)
    if not (np.isfinite(lo) and np.isfinite(hi)):
        raise ShapeError(
            f"{op.describe()}: the float32 result holds NaN or infinite values (min {lo}, max {hi}): no output "
            f"quantization parameters can be chosen; give Y_scale"
        )
    return qf.choose(lo, hi)


def write_output(op: Operator, codes: np.ndarray, qp: QParams) -> None:
    """Output 0: an Int8TensorCPU of ``codes`` with ``qp``, or float32 with ``dequantize_output``."""
    if getattr(op.args, "dequantize_output", False):
        dequantize(codes, qp, op.output(0, codes.shape, F32))
    else:
        int8_output(op, 0, codes.shape, qp.scale, qp.zero_point)[...] = codes


def output_spec(args: Any, shape: Any) -> TensorSpec:
    """The inferred spec of output 0: uint8 codes, float32 with ``dequantize_output``."""
    return TensorSpec(shape, F32 if getattr(args, "dequantize_output", False) else U8)
