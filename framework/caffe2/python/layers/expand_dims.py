"""``ExpandDims``: insert size-1 dimensions at ``dims`` (counting the batch as dimension 0)."""

from __future__ import annotations

from typing import Any

from framework.caffe2.python import schema
from framework.caffe2.python.layers.layers import LayerError, ModelLayer

__all__ = ["ExpandDims"]


class ExpandDims(ModelLayer):
    def __init__(self, model: Any, input_record: Any, dims: Any, name: str = "expand_dims", **kwargs: Any) -> None:
        super().__init__(model, name, input_record, **kwargs)
        self.dims = dims
        inner = sorted({d - 1 for d in dims})
        if not inner or inner[0] < 0:
            raise LayerError(f"ExpandDims: dims must be >= 1 (0 is the batch), got {dims}")
        if not isinstance(input_record, schema.Scalar):
            raise LayerError(f"ExpandDims: incorrect input type, expected Scalar, got {input_record!r}")
        output_dims = list(input_record.field_type().shape)
        if len(output_dims) + len(inner) < inner[-1] + 1:
            raise LayerError(f"ExpandDims: dims {dims} out of range for shape {output_dims}")
        for d in inner:
            output_dims.insert(d, 1)
        self.output_schema = schema.Scalar(
            (input_record.field_type().base, output_dims), model.net.NextScopedBlob(name + "_output")
        )

    def add_ops(self, net: Any) -> None:
        net.ExpandDims(self.input_record(), self.output_schema(), dims=self.dims)
