"""``BatchUnjoinedMSELoss``: MSE for data whose negatives (label 0) are unjoined samples:
per example ``0.5 p^2`` where the label is 0, else ``0.5 (y - p)^2 - 0.5 p^2`` (the error minus the
negative-sample correction), optionally weighted, then AveragedLoss. The prediction is squeezed on
dim 1 and the label cast to its type (no gradient through it). Excluded from prediction."""

from __future__ import annotations

from typing import Any

import numpy as np

from framework import core
from framework.caffe2.python import schema
from framework.caffe2.python.layers._loss_util import require_fields, stopped_float_weight
from framework.caffe2.python.layers.layers import ModelLayer
from framework.caffe2.python.layers.tags import Tags

__all__ = ["BatchUnjoinedMSELoss"]


class BatchUnjoinedMSELoss(ModelLayer):
    def __init__(self, model: Any, input_record: Any, name: str = "batch_unjoined_mse_loss", **kwargs: Any) -> None:
        super().__init__(model, name, input_record, **kwargs)
        require_fields(
            "BatchUnjoinedMSELoss", input_record, ("label", schema.Scalar()), ("prediction", schema.Scalar())
        )
        self.tags.update([Tags.EXCLUDE_FROM_PREDICTION])
        self.output_schema = schema.Scalar(np.float32, self.get_next_blob_reference("output"))

    def add_ops(self, net: Any) -> None:
        record = self.input_record
        prediction = net.Squeeze(record.prediction(), net.NextScopedBlob("squeezed_prediction"), dims=[1])
        label = record.label.field_blobs()
        if record.label.field_type().base != record.prediction.field_type().base:
            to = schema.data_type_for_dtype(record.prediction.field_type())
            label = net.Cast(label, net.NextScopedBlob("cast_label"), to=to)
        label = net.StopGradient(label, net.NextScopedBlob("stopped_label"))
        l2 = net.SquaredL2Distance([label, prediction], net.NextScopedBlob("l2"))
        correction = net.Scale(net.Sqr(prediction), scale=0.5)
        positive = net.Sub([l2, correction], net.NextScopedBlob("pos_sample_error"))
        zero = net.ConstantFill([], net.NextScopedBlob("zero_label"), value=0.0, dtype=core.DataType.FLOAT)
        is_negative = net.EQ([label, zero], broadcast=1)
        loss = net.Conditional([is_negative, correction, positive], net.NextScopedBlob("unjoined_l2"))
        if "weight" in record.fields:
            loss = net.Mul([loss, stopped_float_weight(net, record)], net.NextScopedBlob("weighted_unjoined_l2"))
        net.AveragedLoss(loss, self.output_schema.field_blobs())
