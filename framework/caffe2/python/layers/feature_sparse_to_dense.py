"""``FeatureSparseToDense``: densify sparse feature maps by their feature ids.

``input_specs``: ``[(field, FeatureSpec)]``; each spec's ``feature_type`` decides the output:

===============  =====================================================================
FLOAT            a Map id -> float becomes ``(float32, (len(ids),))``: SparseToDenseMask
                 with the spec's ``feature_ids`` as mask, missing ids 0 (global ``ZERO``)
ID_LIST          a Map id -> id list becomes ``ranges`` ``(int32, (len(ids), 2))`` (each
                 feature's [offset, length] in ``values``, missing ones ``ZERO_RANGE``) and
                 ``values`` (the ids, aliased)
ID_SCORE_LIST    the same with ``ids`` and ``scores``
EMBEDDING        the same as ID_LIST with float ``values``
===============  =====================================================================

Every output scalar carries the spec as metadata (``feature_specs``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from framework.caffe2.python import schema
from framework.caffe2.python.layers.layers import AccessedFeatures, LayerError, ModelLayer

__all__ = ["FeatureSparseToDense"]

# feature type -> the (name, dtype) of the value fields that follow ``ranges``
_LIST_VALUES = {
    "ID_LIST": [("values", np.int64)],
    "ID_SCORE_LIST": [("ids", np.int64), ("scores", np.float32)],
    "EMBEDDING": [("values", np.float32)],
}


class FeatureSparseToDense(ModelLayer):
    def __init__(
        self, model: Any, input_record: Any, input_specs: Any, name: str = "feature_sparse_to_dense", **kwargs: Any
    ) -> None:
        super().__init__(model, name, input_record, **kwargs)
        self.input_specs = input_specs
        outputs = []
        for field, spec in input_specs:
            if len(spec.feature_names) != len(spec.feature_ids):
                raise LayerError(f"FeatureSparseToDense {field}: {len(spec.feature_names)} names for "
                                 f"{len(spec.feature_ids)} ids")  # fmt: skip
            n = len(spec.feature_ids)
            if spec.feature_type == "FLOAT":
                out = schema.Scalar((np.float32, (n,)), self.get_next_blob_reference(field + "_output"))
            elif spec.feature_type in _LIST_VALUES:
                ranges = ("ranges", schema.Scalar((np.int32, (n, 2)), self.get_next_blob_reference(field + "_ranges")))
                values = [
                    (part, schema.Scalar(dtype, self.get_next_blob_reference(f"{field}_{part}")))
                    for part, dtype in _LIST_VALUES[spec.feature_type]
                ]
                out = schema.Struct(ranges, *values)
            else:
                raise LayerError(f"FeatureSparseToDense: unsupported input type {spec.feature_type}")
            outputs.append((field, out))
        self.output_schema = schema.Struct(*outputs)
        for field, spec in input_specs:
            schema.attach_metadata_to_scalars(self.output_schema[field], schema.Metadata(feature_specs=spec))
        self.zero = model.global_constants["ZERO"]
        self.zero_range = model.global_constants["ZERO_RANGE"]

    def get_accessed_features(self) -> dict[str, list[AccessedFeatures]]:
        """Each input field with the type and ids of its spec (the features the layer reads)."""
        accessed: dict[str, list[AccessedFeatures]] = {}
        for field, spec in self.input_specs:
            accessed.setdefault(field, []).append(AccessedFeatures(spec.feature_type, set(spec.feature_ids)))
        return accessed

    def add_ops(self, net: Any) -> None:
        record = self.input_record
        for field, spec in self.input_specs:
            sparse, out = record[field], self.output_schema[field]
            if spec.feature_type == "FLOAT":
                net.SparseToDenseMask(
                    [sparse.keys(), sparse.values(), self.zero, sparse.lengths()], [out()], mask=spec.feature_ids
                )
                continue
            ranges = net.LengthsToRanges(
                sparse.values.lengths(), net.NextScopedBlob(f"{spec.feature_type.lower()}_ranges")
            )
            net.SparseToDenseMask(
                [sparse.keys(), ranges, self.zero_range, sparse.lengths()], out.ranges(), mask=spec.feature_ids
            )
            # aliases keep every output a blob of this layer's own
            if spec.feature_type == "ID_SCORE_LIST":
                net.Alias(sparse.values.keys(), out.ids())
                net.Alias(sparse.values.values(), out.scores())
            else:
                net.Alias(sparse.values.items(), out.values())

    def get_metadata(self) -> list[tuple[dict, list, list]]:
        """Per field: its type, names, ids (and ``cardinality`` 1 for FLOAT), blobs and types."""
        metadata = []
        for field, spec in self.input_specs:
            info = {"type": spec.feature_type, "names": spec.feature_names, "ids": spec.feature_ids}
            if spec.feature_type == "FLOAT":
                info["cardinality"] = 1
            out = self.output_schema[field]
            metadata.append((info, out.field_blobs(), out.field_types()))
        return metadata
