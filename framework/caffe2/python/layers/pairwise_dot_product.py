"""``PairwiseDotProduct``: the dot products of every pair of embeddings of an example.

Input Struct: ``all_embeddings`` (``(batch, n, d)``) or both ``x_embeddings`` and
``y_embeddings``; optionally ``indices_to_gather``. Output ``(dtype, (output_dim,))``:
``Flatten(BatchMatMul(x, y, trans_b=1))``, or its columns picked by BatchGather of the indices."""

from __future__ import annotations

from typing import Any

from framework.caffe2.python import schema
from framework.caffe2.python.layers.layers import LayerError, ModelLayer

__all__ = ["PairwiseDotProduct"]


class PairwiseDotProduct(ModelLayer):
    def __init__(
        self, model: Any, input_record: Any, output_dim: int, name: str = "pairwise_dot_product", **kwargs: Any
    ) -> None:
        super().__init__(model, name, input_record, **kwargs)
        if not isinstance(input_record, schema.Struct):
            raise LayerError(f"PairwiseDotProduct: incorrect input type, expected Struct, got {input_record!r}")
        has_all = "all_embeddings" in input_record
        has_xy = "x_embeddings" in input_record and "y_embeddings" in input_record
        if has_all == has_xy:
            raise LayerError("PairwiseDotProduct: either (all_embeddings) xor (x_embeddings and y_embeddings)")
        x = input_record["all_embeddings" if has_all else "x_embeddings"]
        y = input_record["all_embeddings" if has_all else "y_embeddings"]
        for label, field in (("x", x), ("y", y)):
            if not isinstance(field, schema.Scalar):
                raise LayerError(f"PairwiseDotProduct: incorrect input type for {label}, expected Scalar: {field!r}")
        self.indices_to_gather = None
        if "indices_to_gather" in input_record:
            indices = input_record["indices_to_gather"]
            if not isinstance(indices, schema.Scalar):
                raise LayerError(f"PairwiseDotProduct: indices_to_gather must be a Scalar, got {indices!r}")
            self.indices_to_gather = indices
        self.x_embeddings = x
        self.y_embeddings = y
        dtype = x.field_types()[0].base
        self.output_schema = schema.Scalar((dtype, (output_dim,)), self.get_next_blob_reference("output"))

    def add_ops(self, net: Any) -> None:
        y = net.BatchMatMul([self.x_embeddings(), self.y_embeddings()], [self.x_embeddings() + "_matmul"], trans_b=1)
        if self.indices_to_gather:
            flat = net.Flatten(y, y + "_flatten")
            net.BatchGather([flat, self.indices_to_gather()], self.output_schema())
        else:
            net.Flatten(y, self.output_schema())
