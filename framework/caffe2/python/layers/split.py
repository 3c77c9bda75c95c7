"""``Split``: split a Scalar into ``num_splits`` equal parts along ``axis`` (counting the batch
as dimension 0). Output: a Tuple of Scalars of the input's type."""

from __future__ import annotations

from typing import Any

from framework.caffe2.python import schema
from framework.caffe2.python.layers.layers import LayerError, ModelLayer

__all__ = ["Split"]


class Split(ModelLayer):
    def __init__(
        self, model: Any, input_record: Any, num_splits: int, axis: int = 1, name: str = "split", **kwargs: Any
    ) -> None:
        super().__init__(model, name, input_record, **kwargs)
        self.axis = axis
        inner_axis = axis - 1
        if inner_axis < 0:
            raise LayerError(f"Split: cannot split the batch axis (axis={axis})")
        if not isinstance(input_record, schema.Scalar):
            raise LayerError(f"Split: incorrect input type, expected Scalar, got {input_record!r}")
        input_shape = input_record.field_type().shape
        if len(input_shape) <= inner_axis or input_shape[inner_axis] % num_splits != 0:
            raise LayerError(f"Split: dimension {axis} of {input_shape} does not split into {num_splits}")
        output_shape = list(input_shape)
        output_shape[inner_axis] = output_shape[inner_axis] // num_splits
        dtype = input_record.field_type().base
        self.output_schema = schema.Tuple(
            *[
                schema.Scalar((dtype, output_shape), self.get_next_blob_reference(f"output_{i}"))
                for i in range(num_splits)
            ]
        )

    def add_ops(self, net: Any) -> None:
        net.Split(self.input_record.field_blobs(), self.output_schema.field_blobs(), axis=self.axis)
