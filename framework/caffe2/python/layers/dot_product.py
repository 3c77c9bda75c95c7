"""``DotProduct``: the per-example dot product of the two Scalars of a Struct (same type)."""

from __future__ import annotations

from typing import Any

from framework.caffe2.python import schema
from framework.caffe2.python.layers.layers import LayerError, ModelLayer

__all__ = ["DotProduct"]


class DotProduct(ModelLayer):
    def __init__(self, model: Any, input_record: Any, name: str = "dot_product", **kwargs: Any) -> None:
        super().__init__(model, name, input_record, **kwargs)
        if not isinstance(input_record, schema.Struct):
            raise LayerError(f"DotProduct: incorrect input type, expected Struct, got {input_record!r}")
        if len(input_record.get_children()) != 2:
            raise LayerError("DotProduct accepts 2 inputs")
        if len(set(input_record.field_types())) != 1:
            raise LayerError("DotProduct: inputs should be of the same field type")
        for field_name, field in input_record.fields.items():
            if not isinstance(field, schema.Scalar):
                raise LayerError(f"DotProduct: incorrect input type for {field_name}, expected Scalar")
        self.output_schema = schema.Scalar(
            (input_record.field_types()[0].base, ()), model.net.NextScopedBlob(name + "_output")
        )

    def add_ops(self, net: Any) -> None:
        net.DotProduct(self.input_record.field_blobs(), self.output_schema())
