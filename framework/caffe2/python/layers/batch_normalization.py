"""``BatchNormalization``: SpatialBN over a Scalar of shape ``(C,)`` (expanded to ``(N, C, 1, 1)``
and squeezed back) or ``(C, H, W)`` / ``(H, W, C)`` per ``order``. Learned ``scale`` (1) and
``bias`` (0); ``running_mean`` (0) and ``running_inv_var`` (1) are updated in training with
``momentum`` and used as-is (``is_test``) in evaluation and prediction."""

from __future__ import annotations

from typing import Any

import numpy as np

from framework.caffe2.python import schema
from framework.caffe2.python.layers.layers import LayerError, ModelLayer

__all__ = ["BatchNormalization"]


class BatchNormalization(ModelLayer):
    def __init__(
        self, model: Any, input_record: Any, name: str = "batch_normalization", scale_optim: Any = None,
        bias_optim: Any = None, momentum: float = 0.9, order: str = "NCHW", **kwargs: Any,
    ) -> None:  # fmt: skip
        super().__init__(model, name, input_record, **kwargs)
        if not isinstance(input_record, schema.Scalar):
            raise LayerError(f"BatchNormalization: incorrect input type {input_record!r} (a Scalar expected)")
        self.input_shape = input_record.field_type().shape
        if len(self.input_shape) == 3:
            if order not in ("NCHW", "NHWC"):
                raise LayerError(f"BatchNormalization: order must be NCHW or NHWC, got {order!r}")
            input_dims = self.input_shape[0] if order == "NCHW" else self.input_shape[2]
        elif len(self.input_shape) == 1:
            input_dims = self.input_shape[0]
        else:
            raise LayerError(f"BatchNormalization supports only 4-D or 2-D tensors, got inner shape {self.input_shape}")
        self.output_schema = schema.Scalar((np.float32, self.input_shape), self.get_next_blob_reference("output"))
        self.momentum = momentum
        self.order = order

        def fill(value: float) -> tuple[str, dict[str, float]]:
            return ("ConstantFill", {"value": value})

        self.scale = self.create_param("scale", [input_dims], fill(1.0), scale_optim)
        self.bias = self.create_param("bias", [input_dims], fill(0.0), bias_optim)
        self.rm = self.create_param("running_mean", [input_dims], fill(0.0), model.NoOptim)
        self.riv = self.create_param("running_inv_var", [input_dims], fill(1.0), model.NoOptim)

    def _add_ops(self, net: Any, is_test: bool, out_blob: Any = None) -> None:
        original = self.input_record.field_blobs()
        if len(self.input_shape) == 1:
            input_blob = net.ExpandDims(original, dims=[2, 3])
        else:
            input_blob = original[0]
        bn_output = self.output_schema.field_blobs() if out_blob is None else out_blob
        outputs = bn_output
        if not is_test:
            outputs = bn_output + [
                self.rm, self.riv, net.NextScopedBlob("bn_saved_mean"), net.NextScopedBlob("bn_saved_iv"),
            ]  # fmt: skip
        net.SpatialBN(
            [input_blob, self.scale, self.bias, self.rm, self.riv], outputs, momentum=self.momentum,
            is_test=is_test, order=self.order,
        )  # fmt: skip
        if len(self.input_shape) == 1:
            net.Squeeze(bn_output, bn_output, dims=[2, 3])

    def add_train_ops(self, net: Any) -> None:
        self._add_ops(net, is_test=False)

    def add_eval_ops(self, net: Any) -> None:
        self._add_ops(net, is_test=True)

    def add_ops(self, net: Any) -> None:
        self.add_eval_ops(net)
