"""Caffe2's float ops with a Relu fused on: ConvRelu, SpatialBNRelu, SumRelu.

Caffe2 registers these three CPU float ops next to its DNNLOWP quantized ones
(caffe2/quantization/server/conv_relu_op.cc, spatial_batch_norm_relu_op.cc,
elementwise_sum_relu_op.cc), for nets whose graph rewrites fused the Relu: each runs its base op
(Conv, SpatialBN, Sum, with the same inputs, outputs and arguments) and then
``Y = std::max(0, Y)`` over output 0. That expression maps a NaN to 0 (``std::max(0, NaN)`` returns
its first argument), unlike the separate Relu, which keeps NaN; these ops do as Caffe2 does
(``np.fmax(Y, 0)``). Caffe2 registers no gradient for any of them (they come from inference rewrites): asking for one is
an error here too.

SpatialBNRelu in test mode, float32 NCHW, runs as one compiled scale-shift-Relu pass where numba is
installed (framework/kernels/window_jit.py).
"""

from __future__ import annotations

import numpy as np

from framework.errors import TypeMismatchError
from framework.ops.gradient import should_not_do_gradient
from framework.ops.math.nary import Sum, nary_schema
from framework.ops.nn.batch_norm import SpatialBN, spatial_bn_schema
from framework.ops.nn.conv import Conv, conv_schema
from framework.ops.registry import register_op
from framework.ops.schema import INT, Arg


def relu_as_caffe2(y: np.ndarray) -> None:
    """y = std::max(0, y) in place: negatives and NaN become 0."""
    if y.size:
        np.fmax(y, y.dtype.type(0), out=y)


_SUM_TYPES = (np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.int32))


@register_op("ConvRelu", **conv_schema())
class ConvRelu(Conv):
    """Conv followed by Relu in one op (Caffe2's ConvRelu, caffe2/quantization/server/conv_relu_op.cc):
    every Conv argument, layout and input (X, filter, optional bias); then Y = max(0, Y), NaN -> 0."""

    def run(self) -> None:
        super().run()
        relu_as_caffe2(self.outputs[0].array)

    compile = None  # Conv's closure would skip the Relu


_KEEP_NAN = Arg(
    "keep_nan",
    INT,
    0,
    "(this framework's) 1: NaN stays NaN, as with a separate Relu after SpatialBN; the inference "
    "optimization pass sets it where it fuses SpatialBN + Relu",
)


@register_op("SpatialBNRelu", **spatial_bn_schema([_KEEP_NAN]))
class SpatialBNRelu(SpatialBN):
    """SpatialBN followed by Relu on its output Y (Caffe2's SpatialBNRelu,
    caffe2/quantization/server/spatial_batch_norm_relu_op.cc): test mode (is_test=1, one output)
    and training mode (five outputs: the running statistics updated in place, the saved mean and
    inverse std of the batch, none of them rectified) as SpatialBN; then Y = max(0, Y), NaN -> 0
    (with keep_nan=1: negatives -> 0, NaN stays)."""

    def relu_mode(self) -> int:  # applied by SpatialBN.run (in the compiled pass where it runs one)
        return 2 if self.args.keep_nan else 1


@register_op(
    "SumRelu",
    **nary_schema(
        "Sum followed by Relu (Caffe2's SumRelu, caffe2/quantization/server/elementwise_sum_relu_op.cc): inputs "
        "of one shape and dtype (float32, float64 or int32, as Caffe2), output 0 may be input 0 (in place); "
        "then Y = max(0, Y), NaN -> 0.",
        "max(0, X0 + X1 + ...)",
    ),
)
class SumRelu(Sum):
    """SumRelu (its documentation is the schema's doc above)."""

    def run(self) -> None:
        x0 = self.input(0)
        if x0.dtype not in _SUM_TYPES:  # Caffe2: "Sum operator only supports 32-bit float, 64-bit double and ints"
            raise TypeMismatchError(
                f"{self.describe()}: input 0 ('{self.input_names[0]}') is {x0.dtype}; "
                "SumRelu supports float32, float64 and int32"
            )
        super().run()
        relu_as_caffe2(self.outputs[0].array)

    compile = None  # the Sum fast path would skip the Relu


# Caffe2 registers no gradient maker for them (inference-only rewrites): asking for one is an error
should_not_do_gradient("ConvRelu", "SpatialBNRelu", "SumRelu")
