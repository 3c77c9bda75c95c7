"""``Concat``: concatenate the Scalars of a Struct along ``axis`` (the batch is dimension 0, so
``axis`` counts it); ``add_axis=1`` stacks them along a new axis instead. ``axis=0`` concatenates
batches and keeps the first field's type. Output: float32 with the summed (or stacked) dimension."""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from framework.caffe2.python import schema
from framework.caffe2.python.layers.layers import LayerError, ModelLayer

__all__ = ["Concat"]

logger = logging.getLogger(__name__)


class Concat(ModelLayer):
    def __init__(
        self, model: Any, input_record: Any, axis: int = 1, add_axis: int = 0, name: str = "concat", **kwargs: Any
    ) -> None:
        super().__init__(model, name, input_record, **kwargs)
        self.axis = axis
        self.add_axis = add_axis
        if axis == 0 and add_axis == 1:
            raise LayerError("Concat: adding axis 0 is not allowed")
        if not isinstance(input_record, schema.Struct):
            raise LayerError(f"Concat: incorrect input type, expected Struct, got {input_record!r}")
        shapes = []
        for field_name, field in input_record.fields.items():
            if not isinstance(field, schema.Scalar):
                raise LayerError(f"Concat: incorrect input type for {field_name}, expected Scalar, got {field!r}")
            shape = list(field.field_type().shape)
            if add_axis:
                shape.insert(axis - 1, 1)
            if len(shape) < axis:
                raise LayerError(f"Concat expects limited dimensions of the input tensor {field_name}: {shape}")
            shapes.append(shape)
        logger.info("Concat layer input shapes: %s", shapes)
        if axis == 0:
            self.output_schema = schema.from_blob_list(input_record[0], [self.get_next_blob_reference("output")])
            return
        concat_dim = 0
        for shape in shapes:
            concat_dim += shape[axis - 1]
            shape[axis - 1] = 0
            if shape != shapes[0]:
                raise LayerError(f"Concat: shapes {shape} and {shapes[0]} are not compatible")
        output_dims = shapes[0]
        output_dims[axis - 1] = concat_dim
        self.output_schema = schema.Scalar((np.float32, output_dims), self.get_next_blob_reference("output"))

    def add_ops(self, net: Any) -> None:
        out = self.output_schema.field_blobs()[0]
        net.Concat(self.input_record.field_blobs(), [out, out + "_concat_dims"], axis=self.axis, add_axis=self.add_axis)
