"""``AddBias``: ``x + b`` with a learned bias ``b`` of the input's inner dimension (UniformFill
in ``+-sqrt(1/dims)`` by default), broadcast over the batch."""

from __future__ import annotations

import math
from typing import Any

from framework.caffe2.python import schema
from framework.caffe2.python.layers.layers import LayerError, ModelLayer

__all__ = ["AddBias"]


class AddBias(ModelLayer):
    def __init__(
        self, model: Any, input_record: Any, bias_init: Any = None, bias_optim: Any = None, name: str = "add_bias"
    ) -> None:
        super().__init__(model, name, input_record)
        if not isinstance(input_record, schema.Scalar):
            raise LayerError(f"AddBias: incorrect input type {input_record!r} (a Scalar expected)")
        shape = input_record.field_type().shape
        if len(shape) == 0:
            raise LayerError("AddBias expects limited dimensions of the input tensor")
        input_dims = shape[0]
        if input_dims <= 0:
            raise LayerError(f"AddBias expects input dimensions > 0, got {input_dims}")
        scale = math.sqrt(1.0 / input_dims)
        self.b = self.create_param(
            param_name="b", shape=[input_dims], initializer=bias_init or ("UniformFill", {"min": -scale, "max": scale}),
            optimizer=bias_optim,
        )  # fmt: skip
        self.output_schema = schema.Scalar(
            (input_record.field_type().base, (input_dims,)), self.get_next_blob_reference("output")
        )

    def add_ops(self, net: Any) -> None:
        net.Add(self.input_record.field_blobs() + [self.b], self.output_schema.field_blobs(), broadcast=1)
