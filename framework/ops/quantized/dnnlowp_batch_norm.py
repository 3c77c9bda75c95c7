"""Caffe2's DNNLOWP Int8SpatialBN / Int8SpatialBNRelu (``quantization/server/spatial_batch_norm_dnnlowp_op.cc``)
and Int8BatchPermutation (``batch_permutation_dnnlowp_op.cc``) over Int8TensorCPU blobs. None has a gradient
(Caffe2 registers none)."""

from __future__ import annotations

import numpy as np

from framework.errors import ShapeError
from framework.ops.gradient import should_not_do_gradient
from framework.ops.operator import Operator
from framework.ops.quantized.dnnlowp_common import (
    check_dnnlowp_args,
    dnnlowp_input,
    dynamic_qparams,
    input_codes,
    output_spec,
    qfactory,
    static_qparams,
    write_output,
)
from framework.ops.quantized.dnnlowp_qparams import DNNLOWP_ARGS, QParams, dequantize
from framework.ops.quantized.int8_common import U8, int8_input, int8_output
from framework.ops.registry import register_engine_type, register_op
from framework.ops.schema import BOOL, FLOAT, STRING, Arg, TensorSpec
from framework.ops.validation import check_indices, expect_size

F32, I32 = np.dtype(np.float32), np.dtype(np.int32)
f32 = np.float32


def _bn_infer(args, ins):
    return [output_spec(args, ins[0].shape)]


_BN_DOC = """Inference batch normalization on quantized activations{relu}: per channel c,
    ``alpha = scale / sqrt(var + epsilon)``, ``beta = bias - alpha * mean`` (float32), rescaled to the codes
    (``alpha *= X.scale / Y.scale``, ``beta /= Y.scale``), then
    ``Y = clamp(Y.zero_point + nearbyint(alpha * (X - X.zero_point) + beta), 0, 255)``{relu_q}.

    X is an Int8TensorCPU, or a float32 tensor quantized first with parameters chosen from its min/max;
    scale, bias, mean and var are float32 with C elements (C: dim 1 for NCHW, the last for NHWC, X of rank
    >= 3). Y's parameters: ``Y_scale``/``Y_zero_point`` (or ``followed_by``){relu_s}, else chosen from the
    range of the float32 SpatialBN of the dequantized X{relu_d}. ``dequantize_output`` writes float32 Y.
    ``is_test`` must be 1 (Caffe2: "SpatialBN DNNLOWP op only works for inference").

    Departures: ``1 / sqrt`` is numpy's float32 (Eigen's vectorized rsqrt may differ by an ulp, so a code
    exactly at a rounding boundary may differ by one); an empty batch still gets Y's parameters (Caffe2
    leaves the blob's old ones); engines with 16-bit codes are refused. No gradient.{alias}"""


_ALIAS_DOC = "\n\n    ``SpatialBN`` with engine DNNLOWP runs this op (the registry's engine table), as in Caffe2."


def _register_bn(op_type: str, relu: bool) -> type:
    class _BN(Operator):
        def setup(self) -> None:
            check_dnnlowp_args(self)
            if not self.args.is_test:
                raise self.arg_error("SpatialBN DNNLOWP op only works for inference: is_test must be 1")
            if not self.args.epsilon > 0:
                raise self.arg_error(f"epsilon must be positive, got {self.args.epsilon}")
            self.qf = qfactory(self)
            self.static = static_qparams(self, self.qf)
            if relu and self.static is not None:  # AdjustOutputTensorQuantizationParamsWithFollowedBy(Relu)
                self.static = self.qf.choose(0.0, self.static.max())

        def run(self) -> None:
            in_qp, x, is_int8 = dnnlowp_input(self, 0, self.qf)
            if x.ndim < 3:
                raise ShapeError(
                    f"{self.describe()}: X ('{self.input_names[0]}') must have rank >= 3, got {list(x.shape)}"
                )
            nhwc = self.args.order == "NHWC"
            c = x.shape[-1] if nhwc else x.shape[1]
            params = []
            for i in range(1, 5):
                p = self.input(i)
                expect_size(self, i, p, c, f"C = {c} elements")
                params.append(p.reshape(-1))
            scale, bias, mean, var = params
            with np.errstate(all="ignore"):
                alpha = (scale * (f32(1) / np.sqrt(var + f32(self.args.epsilon)))).astype(F32)
                beta = (bias - alpha * mean).astype(F32)
            shape = (1, c) + (1,) * (x.ndim - 2) if not nhwc else (1,) * (x.ndim - 1) + (c,)
            qp = self.static
            if qp is None:  # the float32 SpatialBN of the dequantized input
                xf = dequantize(x, in_qp) if is_int8 else x
                with np.errstate(all="ignore"):
                    y = xf * alpha.reshape(shape) + beta.reshape(shape)
                qp = dynamic_qparams(self, self.qf, y, relu)
            codes = x if is_int8 else input_codes(self, 0, self.qf)[1]
            a = alpha * f32(f32(in_qp.scale) / f32(qp.scale))
            b = beta / f32(qp.scale)
            with np.errstate(all="ignore"):
                v = a.reshape(shape) * (codes.astype(np.int32) - in_qp.zero_point).astype(F32) + b.reshape(shape)
                q = np.rint(np.clip(v, -(2.0**40), 2.0**40)) + qp.zero_point
            if relu:
                q = np.maximum(q, qp.zero_point)
            write_output(self, np.clip(q, 0, 255).astype(U8), qp)

    _BN.__doc__ = _BN_DOC.format(
        relu=" with a fused Relu" if relu else "",
        relu_q=", then ``max(Y, Y.zero_point)`` (the Relu)" if relu else "",
        relu_s=" narrowed to [0, max] for the Relu" if relu else "",
        relu_d=" clamped at 0" if relu else "",
        alias=""
        if relu
        else "\n\n    ``SpatialBN`` with engine DNNLOWP runs this op (the registry's engine table), as in Caffe2.",
    )
    _BN.__name__ = _BN.__qualname__ = op_type
    register_op(
        op_type,
        inputs=5,
        args=[
            Arg("is_test", BOOL, False, "must be 1: the DNNLOWP op only does inference"),
            Arg("epsilon", FLOAT, 1e-5, "added to the variance (> 0)"),
            Arg("order", STRING, "NCHW", "storage order of X", choices=("NCHW", "NHWC")),
            *DNNLOWP_ARGS,
        ],
        input_docs=[
            ("X", "Int8TensorCPU (or float32 tensor) of rank >= 3"),
            ("scale", "float32, C elements"),
            ("bias", "float32, C elements"),
            ("mean", "float32, C elements: the estimated mean"),
            ("var", "float32, C elements: the estimated variance"),
        ],
        output_docs=[("Y", "Int8TensorCPU of X's shape (float32 with dequantize_output)")],
        input_types={1: (F32,), 2: (F32,), 3: (F32,), 4: (F32,)},
        infer=_bn_infer,
        category="quantized",
    )(_BN)
    return _BN


Int8SpatialBN = _register_bn("Int8SpatialBN", relu=False)
Int8SpatialBNRelu = _register_bn("Int8SpatialBNRelu", relu=True)


@register_op(
    "Int8BatchPermutation",
    inputs=2,
    args=list(DNNLOWP_ARGS),
    input_docs=[
        ("X", "Int8TensorCPU of N >= 1 rows (its first dimension)"),
        ("indices", "int32 1-D tensor of N row indices"),
    ],
    output_docs=[("Y", "Int8TensorCPU: Y[i] = X[indices[i]], with X's scale and zero point")],
    input_types={1: (I32,)},
    ranks={1: 1},
    infer=lambda args, ins: [TensorSpec(ins[0].shape, U8)],
    category="quantized",
)
class Int8BatchPermutation(Operator):
    """Permute the rows of a quantized batch: ``Y[i] = X[indices[i]]`` (codes copied), Y keeping X's scale
    and zero point (Caffe2 ignores ``Y_scale``: "batch permutation output quantization should be same as
    the input"). X must have at least one row (Caffe2 enforces N > 0).

    Departures: indices outside [0, N) are an error (Caffe2 reads out of bounds); ``dequantize_output``
    is refused (Caffe2 then writes the raw codes into a plain uint8 tensor). No gradient.

    ``BatchPermutation`` with engine DNNLOWP runs this op (the registry's engine table), as in Caffe2."""

    def setup(self) -> None:
        check_dnnlowp_args(self)
        if self.args.dequantize_output:
            raise self.arg_error("dequantize_output is not supported (Caffe2 writes raw codes into a plain tensor)")

    def run(self) -> None:
        q = int8_input(self, 0)
        x, idx = q.t.array, self.input(1)
        if x.ndim == 0 or x.shape[0] == 0:
            raise ShapeError(
                f"{self.describe()}: X ('{self.input_names[0]}') must have N > 0 rows, got {list(x.shape)}"
            )
        if idx.shape[0] != x.shape[0]:
            raise ShapeError(
                f"{self.describe()}: indices ('{self.input_names[1]}') has {idx.shape[0]} entries, X "
                f"('{self.input_names[0]}') has {x.shape[0]} rows"
            )
        check_indices(self, 1, idx, x.shape[0])
        qp = QParams(q.scale, q.zero_point)
        np.take(x, idx, axis=0, out=int8_output(self, 0, x.shape, qp.scale, qp.zero_point))


should_not_do_gradient("Int8SpatialBN", "Int8SpatialBNRelu", "Int8BatchPermutation")
# Caffe2's DNNLOWP engine of the float op types (REGISTER_CPU_OPERATOR_WITH_ENGINE(SpatialBN, DNNLOWP, ...))
register_engine_type("SpatialBN", ("DNNLOWP",), "Int8SpatialBN")
register_engine_type("BatchPermutation", ("DNNLOWP",), "Int8BatchPermutation")
