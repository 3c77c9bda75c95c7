"""``PositionWeighted``: a learned weight per position in an IdList (``pos_w``, ConstantFill 1.0,
as many as the lengths' categorical_limit, else the ids' one). Output Struct
``position_weights``: ``Gather(pos_w, LengthsRangeFill(lengths))``, one weight per id, to pair with
the ids as an IdScoreList for ``SparseLookup(..., "PositionWeighted")``."""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from framework.caffe2.python import schema
from framework.caffe2.python.layers.layers import LayerError, ModelLayer, get_categorical_limit
from framework.caffe2.python.layers.tags import Tags

__all__ = ["PositionWeighted"]

logger = logging.getLogger(__name__)


class PositionWeighted(ModelLayer):
    def __init__(self, model: Any, input_record: Any, weight_optim: Any = None, name: str = "position_weights") -> None:
        super().__init__(model, name, input_record)
        if not isinstance(input_record, schema.List):
            raise LayerError(f"PositionWeighted: incorrect input type {input_record!r} (a List expected)")
        length_meta = input_record.lengths.metadata
        max_length = length_meta.categorical_limit if length_meta is not None else None
        if max_length is not None:
            self.shape = max_length
        else:
            self.shape = get_categorical_limit(input_record)
            logger.warning(
                "%s: categorical_limit of lengths is not available, using the keys' one: %s",
                input_record.lengths(), self.shape,
            )  # fmt: skip
        self.pos_w = self.create_param(
            param_name="pos_w", shape=[self.shape], initializer=("ConstantFill", {"value": 1.0}),
            optimizer=weight_optim,
        )  # fmt: skip
        self.output_schema = schema.Struct(
            ("position_weights", schema.Scalar((np.float32, self.shape), self.get_next_blob_reference("pos_w_gather")))
        )
        self.tags.update({Tags.HANDLE_AS_SPARSE_LAYER, Tags.GRADIENT_FROM_PS})

    def get_memory_usage(self) -> int:
        return self.shape

    def add_ops(self, net: Any) -> None:
        positions = net.LengthsRangeFill([self.input_record.lengths()], self.input_record.lengths() + "_pos_w_seq")
        net.Gather([self.pos_w, positions], self.output_schema.position_weights.field_blobs())
