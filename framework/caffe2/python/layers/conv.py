"""``Conv``: a 2-D convolution layer. The input Scalar's inner shape must give the channels
(last dimension for ``order="NHWC"``, the default; first for NCHW). ``kernel_h/w`` and
``stride_h/w`` are positive ints; padding left as None is "same" padding ``(k - 1) // 2`` when
the stride is 1, else 0. Kernel: XavierFill ``[out, kh, kw, C]`` (NHWC) or ``[out, C, kh, kw]``;
bias ConstantFill 0. The output schema records only the output channels ``(output_dim,)``."""

from __future__ import annotations

from typing import Any

import numpy as np

from framework.caffe2.python import schema
from framework.caffe2.python.layers.layers import LayerError, ModelLayer

__all__ = ["Conv"]


def _positive_int(name: str, value: Any) -> int:
    if not isinstance(value, int) or value <= 0:
        raise LayerError(f"Conv: {name} should be a positive integer, got {value!r}")
    return value


def _pad(name: str, value: Any, kernel: int, stride: int) -> int:
    if value is None:
        value = (kernel - 1) // 2 if stride == 1 else 0
    if not isinstance(value, int) or value < 0:
        raise LayerError(f"Conv: {name} should be an int >= 0, got {value!r}")
    return value


class Conv(ModelLayer):
    def __init__(
        self, model: Any, input_record: Any, output_dim: int, kernel_h: int, kernel_w: int, stride_h: int,
        stride_w: int, pad_b: int | None = None, pad_l: int | None = None, pad_r: int | None = None,
        pad_t: int | None = None, order: str = "NHWC", kernel_init: Any = None, bias_init: Any = None,
        kernel_optim: Any = None, bias_optim: Any = None, name: str = "conv", **kwargs: Any,
    ) -> None:  # fmt: skip
        super().__init__(model, name, input_record, **kwargs)
        if not isinstance(input_record, schema.Scalar):
            raise LayerError(f"Conv: incorrect input type {input_record!r} (a Scalar expected)")
        input_dims = input_record.field_type().shape
        self.kernel_h = _positive_int("kernel_h", kernel_h)
        self.kernel_w = _positive_int("kernel_w", kernel_w)
        self.stride_h = _positive_int("stride_h", stride_h)
        self.stride_w = _positive_int("stride_w", stride_w)
        self.pad_t = _pad("pad_t", pad_t, kernel_h, stride_h)
        self.pad_b = _pad("pad_b", pad_b, kernel_h, stride_h)
        self.pad_r = _pad("pad_r", pad_r, kernel_w, stride_w)
        self.pad_l = _pad("pad_l", pad_l, kernel_w, stride_w)
        if order not in ("NHWC", "NCHW"):
            raise LayerError(f"Conv: order should be either 'NHWC' or 'NCHW', got {order!r}")
        self.order = order
        if not input_dims:
            raise LayerError("Conv: the input's inner shape must give the number of channels")
        if order == "NHWC":
            input_c = input_dims[-1]
            kernel_shape = [output_dim, kernel_h, kernel_w, input_c]
        else:
            input_c = input_dims[0]
            kernel_shape = [output_dim, input_c, kernel_h, kernel_w]
        if input_c <= 0:
            raise LayerError("Conv: the number of input channels should be positive")
        self.kernel = self.create_param("conv_kernel", kernel_shape, kernel_init or ("XavierFill", {}), kernel_optim)
        self.bias = self.create_param(
            "conv_bias", [output_dim], bias_init or ("ConstantFill", {"value": 0.0}), bias_optim
        )
        self.output_schema = schema.Scalar((np.float32, (output_dim,)), self.get_next_blob_reference("output"))

    def add_ops(self, net: Any) -> None:
        net.Conv(
            self.input_record.field_blobs() + [self.kernel, self.bias], self.output_schema.field_blobs(),
            kernel_h=self.kernel_h, kernel_w=self.kernel_w, stride_h=self.stride_h, stride_w=self.stride_w,
            pad_t=self.pad_t, pad_l=self.pad_l, pad_b=self.pad_b, pad_r=self.pad_r, order=self.order,
        )  # fmt: skip
