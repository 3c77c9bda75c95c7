"""``BlobWeightedSum``: ``sum_i w_i x_i`` of two or more inputs of one shape with learned scalar
weights ``w_<i>`` (ConstantFill ``init_weights``, default 1), via WeightedSum with ``grad_on_w``."""

from __future__ import annotations

from typing import Any

from framework.caffe2.python import schema
from framework.caffe2.python.layers.layers import LayerError, ModelLayer

__all__ = ["BlobWeightedSum"]


class BlobWeightedSum(ModelLayer):
    def __init__(
        self, model: Any, input_record: Any, init_weights: Any = None, weight_optim: Any = None,
        name: str = "blob_weighted_sum", **kwargs: Any,
    ) -> None:  # fmt: skip
        super().__init__(model, name, input_record, **kwargs)
        self.blobs = self.input_record.field_blobs()
        self.num_weights = len(self.blobs)
        if self.num_weights <= 1:
            raise LayerError("BlobWeightedSum expects more than one input blob")
        types = input_record.field_types()
        if len(types[0].shape) == 0:
            raise LayerError("BlobWeightedSum expects limited dimensions of the input tensor")
        if any(t.shape != types[0].shape for t in types[1:]):
            raise LayerError(f"BlobWeightedSum: input blobs should all have shape {types[0].shape}")
        if init_weights:
            if len(init_weights) != self.num_weights:
                raise LayerError(f"BlobWeightedSum: {len(init_weights)} init_weights for {self.num_weights} inputs")
        else:
            init_weights = [1.0] * self.num_weights
        self.weights = [
            self.create_param(f"w_{i}", [1], ("ConstantFill", {"value": float(w)}), weight_optim)
            for i, w in enumerate(init_weights)
        ]
        self.output_schema = schema.Scalar(types[0], self.get_next_blob_reference("blob_weighted_sum_out"))

    def add_ops(self, net: Any) -> None:
        net.WeightedSum(
            [x for pair in zip(self.blobs, self.weights) for x in pair], self.output_schema(), grad_on_w=True
        )
