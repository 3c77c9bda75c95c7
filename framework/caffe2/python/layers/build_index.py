"""``MapToRange``: map raw keys to indices in ``[0, max_index)`` with an index (LongIndexCreate):
training grows the mapping (IndexGet), evaluation and prediction freeze it first (IndexFreeze),
so unseen keys get index 0. Output Struct: ``indices`` (int64) and ``handler`` (the index)."""

from __future__ import annotations

from typing import Any

import numpy as np

from framework import core
from framework.caffe2.python import schema
from framework.caffe2.python.layers.layers import LayerError, ModelLayer

__all__ = ["MapToRange"]


class MapToRange(ModelLayer):
    def __init__(
        self, model: Any, input_record: Any, max_index: int, name: str = "map_to_range", **kwargs: Any
    ) -> None:
        super().__init__(model, name, input_record, **kwargs)
        if max_index <= 0:
            raise LayerError(f"MapToRange: max_index must be > 0, got {max_index}")
        if not isinstance(input_record, schema.Scalar):
            raise LayerError(f"MapToRange: expected a Scalar, got {input_record!r}")
        self.max_index = max_index
        self.handler = self.create_param(
            "handler", None, ("LongIndexCreate", {"max_elements": self.max_index}), model.NoOptim
        )
        self.output_schema = schema.Struct(
            ("indices", schema.Scalar(np.int64, self.get_next_blob_reference("indices"))),
            ("handler", schema.Scalar(np.void, self.handler)),
        )

    def add_train_ops(self, net: Any) -> None:
        keys = self.input_record()
        if self.input_record.field_type().base != np.int64:
            keys = net.Cast(keys, net.NextScopedBlob("indices_before_mapping"), to=core.DataType.INT64)
        indices = net.IndexGet([self.handler, keys], self.output_schema.indices())
        net.StopGradient(indices, indices)

    def add_eval_ops(self, net: Any) -> None:
        net.IndexFreeze(self.handler, self.handler)
        self.add_train_ops(net)

    def add_ops(self, net: Any) -> None:
        self.add_eval_ops(net)
