"""``MergeIdLists``: merge a Struct of IdLists into one IdList per example (op MergeIdLists); the
output ids' categorical_limit is the largest of the inputs'."""

from __future__ import annotations

from typing import Any

import numpy as np

from framework.caffe2.python import schema
from framework.caffe2.python.layers.layers import IdList, LayerError, ModelLayer, get_categorical_limit

__all__ = ["MergeIdLists"]


class MergeIdLists(ModelLayer):
    def __init__(self, model: Any, input_record: Any, name: str = "merged") -> None:
        super().__init__(model, name, input_record)
        if not all(schema.equal_schemas(x, IdList) for x in input_record):
            raise LayerError("inputs to MergeIdLists should all be IdLists")
        if not all(record.items.metadata is not None for record in self.input_record):
            raise LayerError("MergeIdLists: features without metadata are not supported")
        merge_dim = max(get_categorical_limit(record) for record in self.input_record)
        if merge_dim is None:
            raise LayerError("MergeIdLists: unbounded features are not supported")
        ids = schema.Scalar(
            np.int64, blob=model.net.NextBlob(name), metadata=schema.Metadata(categorical_limit=merge_dim)
        )
        self.output_schema = schema.NewRecord(model.net, schema.List(ids))

    def add_ops(self, net: Any) -> Any:
        return net.MergeIdLists(self.input_record.field_blobs(), self.output_schema.field_blobs())
