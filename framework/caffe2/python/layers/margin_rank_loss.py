"""``MarginRankLoss``: hinge ranking loss of ``pos_prediction`` (one score per example) against
each of ``neg_prediction`` (a List of scores): ``MarginRankingCriterion(pos tiled per negative,
neg, 1, margin)``, averaged (``average_loss``) or summed. Excluded from prediction."""

from __future__ import annotations

from typing import Any

import numpy as np

from framework import core
from framework.caffe2.python import schema
from framework.caffe2.python.layers._loss_util import require_fields
from framework.caffe2.python.layers.layers import LayerError, ModelLayer
from framework.caffe2.python.layers.tags import Tags

__all__ = ["MarginRankLoss"]


class MarginRankLoss(ModelLayer):
    def __init__(
        self, model: Any, input_record: Any, name: str = "margin_rank_loss", margin: float = 0.1,
        average_loss: bool = False, **kwargs: Any,
    ) -> None:  # fmt: skip
        super().__init__(model, name, input_record, **kwargs)
        if margin < 0:
            raise LayerError(f"MarginRankLoss: for hinge loss, margin should be no less than 0, got {margin}")
        self._margin = margin
        self._average_loss = average_loss
        require_fields(
            "MarginRankLoss", input_record, ("pos_prediction", schema.Scalar()),
            ("neg_prediction", schema.List(np.float32)),
        )  # fmt: skip
        self.tags.update([Tags.EXCLUDE_FROM_PREDICTION])
        self.output_schema = schema.Scalar(np.float32, self.get_next_blob_reference("output"))

    def add_ops(self, net: Any) -> None:
        neg = self.input_record.neg_prediction["values"]()
        pos = net.LengthsTile(
            [self.input_record.pos_prediction(), self.input_record.neg_prediction["lengths"]()],
            net.NextScopedBlob("pos_score_repeated"),
        )
        ones = net.ConstantFill(neg, net.NextScopedBlob("const_1"), value=1, dtype=core.DataType.INT32)
        loss = net.MarginRankingCriterion([pos, neg, ones], net.NextScopedBlob("rank_loss"), margin=self._margin)
        if self._average_loss:
            net.AveragedLoss(loss, self.output_schema.field_blobs())
        else:
            net.ReduceFrontSum(loss, self.output_schema.field_blobs())
