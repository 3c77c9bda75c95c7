"""``SparseFeatureHash``: map the ids of an IdList / IdScoreList into ``[0, modulo)``, by
``IndexHash(seed, modulo)`` or, without ``use_hashing``, ``Mod(divisor=modulo,
sign_follow_divisor=True)``; with ``use_divide_mod`` (Caffe2 2020; not with ``use_hashing``) the ids are
first divided by ``divisor``, an int64 parameter of shape [1] that no optimizer updates (``Div`` then
``Mod``). Lengths (and scores) are copied. ``modulo`` defaults to the ids'
``desired_hash_size``, else their categorical_limit, and becomes the output ids' categorical_limit."""

from __future__ import annotations

from typing import Any

import numpy as np

from framework import core
from framework.caffe2.python import schema
from framework.caffe2.python.layers.layers import IdList, IdScoreList, LayerError, ModelLayer
from framework.caffe2.python.layers.tags import Tags

__all__ = ["SparseFeatureHash"]


class SparseFeatureHash(ModelLayer):
    def __init__(
        self, model: Any, input_record: Any, seed: int = 0, modulo: int | None = None, use_hashing: bool = True,
        use_divide_mod: bool = False, divisor: int | None = None, name: str = "sparse_feature_hash", **kwargs: Any,
    ) -> None:  # fmt: skip
        super().__init__(model, name, input_record, **kwargs)
        if use_hashing and use_divide_mod:
            raise LayerError("SparseFeatureHash: use_hashing and use_divide_mod cannot both be set")
        self.use_divide_mod = use_divide_mod
        if use_divide_mod:
            if divisor is None or divisor < 1:
                raise LayerError(f"SparseFeatureHash: unexpected divisor {divisor} (use_divide_mod needs one >= 1)")
            self.divisor = self.create_param(
                param_name="divisor",
                shape=[1],
                initializer=("GivenTensorInt64Fill", {"values": np.array([divisor], dtype=np.int64)}),
                optimizer=model.NoOptim,
            )
        self.seed = seed
        self.use_hashing = use_hashing
        if schema.equal_schemas(input_record, IdList):
            ids, template, key = input_record.items, IdList, "items"
        elif schema.equal_schemas(input_record, IdScoreList):
            ids, template, key = input_record.keys, IdScoreList, "keys"
        else:
            raise LayerError("SparseFeatureHash: input type must be one of (IdList, IdScoreList)")
        self.modulo = modulo or self.extract_hash_size(ids.metadata)
        metadata = schema.Metadata(
            categorical_limit=self.modulo, feature_specs=ids.metadata.feature_specs,
            expected_value=ids.metadata.expected_value,
        )  # fmt: skip
        with core.NameScope(name):
            self.output_schema = schema.NewRecord(model.net, template)
        getattr(self.output_schema, key).set_metadata(metadata)
        if self.modulo < 1:
            raise LayerError(f"SparseFeatureHash: unexpected modulo {self.modulo}")
        # the hashing ops run on the CPU, where the sparse keys live
        self.tags.update([Tags.CPU_ONLY])

    def extract_hash_size(self, metadata: Any) -> int:
        if metadata is not None and metadata.feature_specs and metadata.feature_specs.desired_hash_size:
            return metadata.feature_specs.desired_hash_size
        if metadata is not None and metadata.categorical_limit is not None:
            return metadata.categorical_limit
        raise LayerError("SparseFeatureHash: desired_hash_size or categorical_limit must be set")

    def add_ops(self, net: Any) -> None:
        net.Copy(self.input_record.lengths(), self.output_schema.lengths())
        if schema.equal_schemas(self.output_schema, IdList):
            in_blob, out_blob = self.input_record.items(), self.output_schema.items()
        else:
            in_blob, out_blob = self.input_record.keys(), self.output_schema.keys()
            net.Copy(self.input_record.values(), self.output_schema.values())
        if self.use_hashing:
            net.IndexHash(in_blob, out_blob, seed=self.seed, modulo=self.modulo)
        elif self.use_divide_mod:
            quotient = net.Div([in_blob, self.divisor], [net.NextScopedBlob("quotient")])
            net.Mod(quotient, out_blob, divisor=self.modulo, sign_follow_divisor=True)
        else:
            net.Mod(in_blob, out_blob, divisor=self.modulo, sign_follow_divisor=True)
