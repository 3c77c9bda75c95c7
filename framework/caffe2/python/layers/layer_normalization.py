"""``LayerNormalization``: normalize each example over its features, then ``* scale + bias``
(learned, shape ``[input_dims]``, scale starting at ``scale_init_value``). With
``use_layer_norm_op`` the LayerNorm op does the normalization (``axis``, ``epsilon``); otherwise
(2-D inputs only) it is spelled out: ``(x - mean) / sqrt(mean((x - mean)^2) + epsilon)``, epsilon
a global constant."""

from __future__ import annotations

from typing import Any

import numpy as np

from framework.caffe2.python import schema
from framework.caffe2.python.layers.layers import LayerError, ModelLayer

__all__ = ["LayerNormalization"]


class LayerNormalization(ModelLayer):
    def __init__(
        self, model: Any, input_record: Any, name: str = "layer_normalization", scale_optim: Any = None,
        bias_optim: Any = None, epsilon: float = 1e-4, axis: int = 1, use_layer_norm_op: bool = True,
        scale_init_value: float = 1.0, **kwargs: Any,
    ) -> None:  # fmt: skip
        super().__init__(model, name, input_record, **kwargs)
        if not isinstance(input_record, schema.Scalar):
            raise LayerError(f"LayerNormalization: incorrect input type {input_record!r}")
        self.input_shape = input_record.field_type().shape
        self.axis = axis
        if len(self.input_shape) < 1:
            raise LayerError("LayerNormalization supports only >= 2-D tensors")
        input_dims = self.input_shape[0]
        self.output_schema = schema.Scalar((np.float32, self.input_shape), self.get_next_blob_reference("output"))
        self.scale = self.create_param(
            "scale", [input_dims], ("ConstantFill", {"value": scale_init_value}), scale_optim
        )
        self.bias = self.create_param("bias", [input_dims], ("ConstantFill", {"value": 0.0}), bias_optim)
        self.use_layer_norm_op = use_layer_norm_op
        if use_layer_norm_op:
            self.epsilon = epsilon
        else:
            if len(self.input_shape) != 1:
                raise LayerError("LayerNormalization without the LayerNorm op takes 2-D inputs only")
            self.epsilon = model.maybe_add_global_constant(f"{self.name}_epsilon", float(epsilon))

    def add_ops_with_layer_norm_op(self, net: Any) -> None:
        outputs = [net.NextScopedBlob("ln_output"), net.NextScopedBlob("ln_mean"), net.NextScopedBlob("ln_stdev")]
        normalized, _, _ = net.LayerNorm(self.input_record.field_blobs(), outputs, axis=self.axis, epsilon=self.epsilon)
        scaled = net.Mul([normalized, self.scale], [net.NextScopedBlob("ln_scaled")], broadcast=1, axis=self.axis)
        net.Add([scaled, self.bias], self.output_schema.field_blobs(), broadcast=1, axis=self.axis)

    def add_ops_without_layer_norm_op(self, net: Any) -> None:
        x = self.input_record.field_blobs()
        names = ["ln_output", "ln_mean", "ln_stdev", "ln_mean_arr", "ln_centered", "ln_sqr", "ln_sqr_mean", "ln_var",
                 "ln_std_arr", "ln_scaled"]  # fmt: skip
        b = {n: net.NextScopedBlob(n) for n in names}
        net.ReduceBackMean(x, [b["ln_mean_arr"]])
        net.ExpandDims([b["ln_mean_arr"]], [b["ln_mean"]], dims=[1])
        net.Sub(x + [b["ln_mean"]], [b["ln_centered"]])
        net.Sqr([b["ln_centered"]], [b["ln_sqr"]])
        net.ReduceBackMean([b["ln_sqr"]], [b["ln_sqr_mean"]])
        net.Add([b["ln_sqr_mean"], self.epsilon], b["ln_var"])
        net.Pow([b["ln_var"]], [b["ln_std_arr"]], exponent=0.5)
        net.ExpandDims([b["ln_std_arr"]], [b["ln_stdev"]], dims=[1])
        net.Div([b["ln_centered"], b["ln_stdev"]], [b["ln_output"]])
        net.Mul([b["ln_output"], self.scale], [b["ln_scaled"]])
        net.Add([b["ln_scaled"], self.bias], self.output_schema.field_blobs())

    def add_ops(self, net: Any) -> None:
        if self.use_layer_norm_op:
            self.add_ops_with_layer_norm_op(net)
        else:
            self.add_ops_without_layer_norm_op(net)
