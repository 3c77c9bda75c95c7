"""``BucketWeighted``: a learned weight per bucket of a List's values (``bucket_w``, ConstantFill 1).
Buckets: Bucketize by ``bucket_boundaries`` (len + 1 buckets), else the values cast to int32
(``max_score`` buckets, else the categorical_limit); with ``hash_buckets`` hashed into range
(IndexHash). Output Struct ``bucket_weights``: the gathered weight of each value."""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from framework import core
from framework.caffe2.python import schema
from framework.caffe2.python.layers.layers import LayerError, ModelLayer, get_categorical_limit
from framework.caffe2.python.layers.tags import Tags

__all__ = ["BucketWeighted"]

logger = logging.getLogger(__name__)


class BucketWeighted(ModelLayer):
    def __init__(
        self, model: Any, input_record: Any, max_score: int = 0, bucket_boundaries: Any = None,
        hash_buckets: bool = True, weight_optim: Any = None, name: str = "bucket_weighted",
    ) -> None:  # fmt: skip
        super().__init__(model, name, input_record)
        if not isinstance(input_record, schema.List):
            raise LayerError(f"BucketWeighted: incorrect input type {input_record!r} (a List expected)")
        self.bucket_boundaries = bucket_boundaries
        self.hash_buckets = hash_buckets
        if bucket_boundaries is not None:
            self.shape = len(bucket_boundaries) + 1
        elif max_score > 0:
            self.shape = max_score
        else:
            self.shape = get_categorical_limit(input_record)
        self.bucket_w = self.create_param("bucket_w", [self.shape], ("ConstantFill", {"value": 1.0}), weight_optim)
        self.output_schema = schema.Struct(
            ("bucket_weights", schema.Scalar((np.float32, self.shape), self.get_next_blob_reference("bucket_w_gather")))
        )
        self.tags.update({Tags.HANDLE_AS_SPARSE_LAYER})

    def get_memory_usage(self) -> int:
        return self.shape

    def add_ops(self, net: Any) -> None:
        values = self.input_record.values()
        if self.bucket_boundaries is not None:
            buckets = net.Bucketize(values, "buckets_int", boundaries=self.bucket_boundaries)
        else:
            buckets = net.Cast(values, "buckets_int", to=core.DataType.INT32)
        if self.hash_buckets:
            buckets = net.IndexHash(buckets, "hashed_buckets_int", seed=0, modulo=self.shape)
        net.Gather([self.bucket_w, buckets], self.output_schema.bucket_weights.field_blobs())
