"""Caffe2's DNNLOWP Quantize and Dequantize (``quantization/server/quantize_dnnlowp_op.cc``,
``dequantize_dnnlowp_op.cc``): float32 <-> Int8TensorCPU with fbgemm's rounding and parameter choice
(``dnnlowp_qparams``). Neither has a gradient (Caffe2 registers none)."""

from __future__ import annotations

import numpy as np

from framework.errors import ShapeError, TypeMismatchError
from framework.ops.gradient import should_not_do_gradient
from framework.ops.object_blobs import held
from framework.ops.operator import Operator
from framework.ops.quantized.dnnlowp_common import check_dnnlowp_args, qfactory, static_qparams
from framework.ops.quantized.dnnlowp_qparams import DNNLOWP_ARGS, QParams, dequantize, quantize
from framework.ops.quantized.dnnlowp_quant_scheme import Int8QuantParamsBlob
from framework.ops.quantized.int8_common import U8, int8_input, int8_output
from framework.ops.registry import register_engine_type, register_op
from framework.ops.schema import TensorSpec

F32, I32 = np.dtype(np.float32), np.dtype(np.int32)


@register_op(
    "Quantize",
    inputs=frozenset({1, 2, 3}),
    args=list(DNNLOWP_ARGS),
    input_docs=[
        ("X", "float32 tensor"),
        ("scale", "optional float32 tensor of one element: the scale (with zero_point); alone: an Int8QuantParamsBlob"),
        ("zero_point", "optional int32 tensor of one element: the zero point (with scale)"),
    ],
    output_docs=[("Y", "Int8TensorCPU of X's shape: uint8 codes, scale and zero point")],
    input_types={0: (F32,), 2: (I32,)},
    infer=lambda args, ins: [TensorSpec(ins[0].shape, U8)],
    category="quantized",
)
class Quantize(Operator):
    """Quantize a float32 tensor into an Int8TensorCPU (the DNNLOWP engine's Quantize, also its
    Int8Quantize): ``Y = clamp(nearbyint(X * (1 / scale) + zero_point), 0, 2^activation_precision - 1)``
    with fbgemm's fused multiply-add at precision 8 (see ``dnnlowp_qparams.quantize``).

    The parameters, first that applies: the ``scale`` and ``zero_point`` inputs, or with two inputs the
    Int8QuantParamsBlob of Int8GenQuantParams (Caffe2's versions differ: one takes the pair of tensors, an
    earlier one the params blob; both are accepted); ``followed_by``
    Sigmoid/Tanh (the fixed-point Sigmoid/Tanh input range); ``Y_scale``/``Y_zero_point`` (with
    ``followed_by`` Relu narrowed to [0, max]); else chosen from X's min/max (fbgemm's
    ChooseQuantizationParams with ``activation_precision``, ``preserve_activation_sparsity`` and
    ``force_scale_power_of_two``). Empty X gives an empty Y with the parameters of [0, 0] (scale 0.1).

    Departures: engines with 16-bit codes (DNNLOWP_16...) are refused (Int8TensorCPU holds uint8);
    ``activation_precision`` is 1..8; ``Y_scale`` and the ``scale`` input must be positive and finite,
    and choosing parameters from NaN or infinite X is an error (Caffe2 computes garbage);
    ``dequantize_output`` and ``measure_quantization_error`` are accepted and not read, as in Caffe2.
    ``Int8Quantize`` with a DNNLOWP engine runs this op (the registry's engine table), as in Caffe2."""

    def setup(self) -> None:
        check_dnnlowp_args(self)
        self.qf = qfactory(self)
        self.static = static_qparams(self, self.qf)

    def _qparams(self, x: np.ndarray) -> QParams:
        if len(self.inputs) == 2:
            p = held(self, 1, Int8QuantParamsBlob, "Int8GenQuantParams")
            return QParams(p.scale, p.zero_point, self.qf.activation_precision)
        if len(self.inputs) == 3:
            s, z = self.input(1), self.input(2)
            if s.dtype != F32:
                raise TypeMismatchError(
                    f"{self.describe()}: scale ('{self.input_names[1]}') must be float32, got {s.dtype}"
                )
            for k, t in ((1, s), (2, z)):
                if t.size != 1:
                    raise ShapeError(
                        f"{self.describe()}: input {k} ('{self.input_names[k]}') must hold one element, "
                        f"got shape {list(t.shape)}"
                    )
            scale = np.float32(s.reshape(-1)[0])
            if not (np.isfinite(scale) and scale > 0):
                raise ShapeError(
                    f"{self.describe()}: scale ('{self.input_names[1]}') must be positive and finite, got {scale}"
                )
            return QParams(float(scale), int(z.reshape(-1)[0]), self.qf.activation_precision)
        if self.static is not None:
            return self.static
        return self.qf.choose_values(x, f"{self.describe()}: X ('{self.input_names[0]}')")

    def run(self) -> None:
        x = self.input(0)
        qp = self._qparams(x)
        quantize(x, qp, int8_output(self, 0, x.shape, qp.scale, qp.zero_point))


@register_op(
    "Dequantize",
    args=list(DNNLOWP_ARGS),
    input_docs=[("qX", "Int8TensorCPU of uint8 codes")],
    output_docs=[("Y", "float32 tensor of qX's shape: scale * (qX - zero_point)")],
    infer=lambda args, ins: [TensorSpec(ins[0].shape, F32)],
    category="quantized",
)
class Dequantize(Operator):
    """The real values of an Int8TensorCPU (the DNNLOWP engine's Dequantize, also its Int8Dequantize):
    ``Y = scale * (qX - zero_point)`` in float32 (fbgemm's Dequantize). A plain tensor input is an error
    (Caffe2 fails on it too: its type check wants uint8 codes after choosing parameters for a float).
    Engines with 16-bit codes are refused; the DNNLOWP arguments are accepted and not read.
    ``Int8Dequantize`` with a DNNLOWP engine runs this op (the registry's engine table), as in Caffe2."""

    def setup(self) -> None:
        check_dnnlowp_args(self)

    def run(self) -> None:
        q = int8_input(self, 0)
        codes = q.t.array
        if codes.dtype != U8:
            raise TypeMismatchError(f"{self.describe()}: qX ('{self.input_names[0]}') must hold uint8 codes")
        dequantize(codes, QParams(q.scale, q.zero_point), self.output(0, codes.shape, F32))


should_not_do_gradient("Quantize", "Dequantize")
# Caffe2 also registers these classes for the int8 names under its DNNLOWP engines
register_engine_type("Int8Quantize", ("DNNLOWP", "DNNLOWP_ROWWISE"), "Quantize")
register_engine_type("Int8Dequantize", ("DNNLOWP", "DNNLOWP_ROWWISE"), "Dequantize")
