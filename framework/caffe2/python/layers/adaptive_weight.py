"""``AdaptiveWeight``: combine several scalar losses with learned uncertainty weights (Kendall et
al., arXiv:1705.07115): ``sum_i x_i / (2 exp(mu_i)) + mu_i`` with ``mu_i = log(sigma_i^2)`` learned.
``mu`` starts at ``log(n / 2)`` (every weight 1/n) or, given ``weights``, at ``log(1 / (2 w_i))``."""

from __future__ import annotations

from typing import Any

import numpy as np

from framework import core
from framework.caffe2.python import schema
from framework.caffe2.python.layers.layers import LayerError, ModelLayer

__all__ = ["AdaptiveWeight"]


class AdaptiveWeight(ModelLayer):
    def __init__(
        self, model: Any, input_record: Any, name: str = "adaptive_weight", optimizer: Any = None,
        weights: Any = None, **kwargs: Any,
    ) -> None:  # fmt: skip
        super().__init__(model, name, input_record, **kwargs)
        self.output_schema = schema.Scalar(np.float32, self.get_next_blob_reference("adaptive_weight"))
        self.data = self.input_record.field_blobs()
        self.num = len(self.data)
        if weights is None:
            initializer = ("ConstantFill", {"value": np.log(self.num / 2.0)})
        else:
            if len(weights) != self.num:
                raise LayerError(f"AdaptiveWeight: {len(weights)} weights for {self.num} inputs")
            values = np.log(1.0 / 2.0 / np.array(weights).astype(np.float32))
            initializer = ("GivenTensorFill", {"values": values, "dtype": core.DataType.FLOAT})
        self.mu = self.create_param(param_name="mu", shape=[self.num], initializer=initializer, optimizer=optimizer)

    def concat_data(self, net: Any) -> Any:
        """The inputs reshaped to ``[1]`` and concatenated into one vector."""
        reshaped = [net.NextScopedBlob(f"reshaped_data_{i}") for i in range(self.num)]
        for i in range(self.num):
            net.Reshape([self.data[i]], [reshaped[i], net.NextScopedBlob(f"new_shape_{i}")], shape=[1])
        concated = net.NextScopedBlob("concated_data")
        net.Concat(reshaped, [concated, net.NextScopedBlob("concated_new_shape")], axis=0)
        return concated

    def compute_adaptive_sum(self, x: Any, net: Any) -> None:
        mu_exp = net.NextScopedBlob("mu_exp")
        net.Exp(self.mu, mu_exp)
        mu_exp_double = net.NextScopedBlob("mu_exp_double")
        net.Scale(mu_exp, mu_exp_double, scale=2.0)
        weighted_x = net.NextScopedBlob("weighted_x")
        net.Div([x, mu_exp_double], weighted_x)
        weighted = net.NextScopedBlob("weighted_elements")
        net.Add([weighted_x, self.mu], weighted)
        net.SumElements(weighted, self.output_schema())

    def add_ops(self, net: Any) -> None:
        self.compute_adaptive_sum(self.concat_data(net), net)
