"""``BatchSigmoidCrossEntropyLoss``: AveragedLoss of SigmoidCrossEntropyWithLogits(prediction,
label); both float32 of the same shape. Output: a float32 scalar ``loss``. Excluded from prediction."""

from __future__ import annotations

from typing import Any

import numpy as np

from framework.caffe2.python import schema
from framework.caffe2.python.layers._loss_util import require_fields
from framework.caffe2.python.layers.layers import LayerError, ModelLayer
from framework.caffe2.python.layers.tags import Tags

__all__ = ["BatchSigmoidCrossEntropyLoss"]


class BatchSigmoidCrossEntropyLoss(ModelLayer):
    def __init__(
        self, model: Any, input_record: Any, name: str = "batch_sigmoid_cross_entropy_loss", **kwargs: Any
    ) -> None:
        super().__init__(model, name, input_record, **kwargs)
        require_fields(
            "BatchSigmoidCrossEntropyLoss", input_record, ("label", schema.Scalar(np.float32)),
            ("prediction", schema.Scalar(np.float32)),
        )  # fmt: skip
        if input_record.prediction.field_type().shape != input_record.label.field_type().shape:
            raise LayerError("BatchSigmoidCrossEntropyLoss: prediction and label must have the same shape")
        self.tags.update([Tags.EXCLUDE_FROM_PREDICTION])
        self.output_schema = schema.Scalar((np.float32, ()), self.get_next_blob_reference("loss"))

    def add_ops(self, net: Any) -> None:
        xent = net.SigmoidCrossEntropyWithLogits(
            [self.input_record.prediction(), self.input_record.label()], net.NextScopedBlob("sigmoid_cross_entropy")
        )
        net.AveragedLoss(xent, self.output_schema.field_blobs())
