"""``BPRLoss``: Bayesian personalized ranking loss (Rendle et al., arXiv:1205.2618):
``sum softplus(neg - pos)`` = ``-sum log sigmoid(pos - neg)`` over each example's negatives
(``neg_prediction``, a List) against its ``pos_prediction``. Excluded from prediction."""

from __future__ import annotations

from typing import Any

import numpy as np

from framework.caffe2.python import schema
from framework.caffe2.python.layers._loss_util import require_fields
from framework.caffe2.python.layers.layers import ModelLayer
from framework.caffe2.python.layers.tags import Tags

__all__ = ["BPRLoss"]


class BPRLoss(ModelLayer):
    def __init__(self, model: Any, input_record: Any, name: str = "bpr_loss", **kwargs: Any) -> None:
        super().__init__(model, name, input_record, **kwargs)
        require_fields(
            "BPRLoss", input_record, ("pos_prediction", schema.Scalar()), ("neg_prediction", schema.List(np.float32))
        )
        self.tags.update([Tags.EXCLUDE_FROM_PREDICTION])
        self.output_schema = schema.Scalar(np.float32, self.get_next_blob_reference("output"))

    def add_ops(self, net: Any) -> None:
        neg = self.input_record.neg_prediction["values"]()
        pos = net.LengthsTile(
            [self.input_record.pos_prediction(), self.input_record.neg_prediction["lengths"]()],
            net.NextScopedBlob("pos_score_repeated"),
        )
        softplus = net.Softplus([net.Sub([neg, pos])])
        net.ReduceFrontSum(softplus, self.output_schema.field_blobs())
