"""``ConstantWeight``: ``sum_i w_i x_i`` of scalar inputs with fixed weights (default 1/n each),
held as global constants ``<layer>_weight_<i>``."""

from __future__ import annotations

from typing import Any

import numpy as np

from framework.caffe2.python import schema
from framework.caffe2.python.layers.layers import LayerError, ModelLayer

__all__ = ["ConstantWeight"]


class ConstantWeight(ModelLayer):
    def __init__(
        self, model: Any, input_record: Any, weights: Any = None, name: str = "constant_weight", **kwargs: Any
    ) -> None:
        super().__init__(model, name, input_record, **kwargs)
        self.output_schema = schema.Scalar(np.float32, self.get_next_blob_reference("adaptive_weight"))
        self.data = self.input_record.field_blobs()
        self.num = len(self.data)
        weights = weights if weights is not None else [1.0 / self.num] * self.num
        if len(weights) != self.num:
            raise LayerError(f"ConstantWeight: {len(weights)} weights for {self.num} inputs")
        self.weights = [
            self.model.add_global_constant(f"{self.name}_weight_{i}", float(w)) for i, w in enumerate(weights)
        ]

    def add_ops(self, net: Any) -> None:
        net.WeightedSum([b for pair in zip(self.data, self.weights) for b in pair], self.output_schema())
