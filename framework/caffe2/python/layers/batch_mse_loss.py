"""``BatchMSELoss``: AveragedLoss of ``SquaredL2Distance(label, Squeeze(prediction, dims=[1]))``
(half the squared error); the label is cast to the prediction's type and gets no gradient; an
optional ``weight`` field scales each example. Excluded from prediction."""

from __future__ import annotations

from typing import Any

import numpy as np

from framework.caffe2.python import schema
from framework.caffe2.python.layers._loss_util import require_fields, stopped_float_weight
from framework.caffe2.python.layers.layers import ModelLayer
from framework.caffe2.python.layers.tags import Tags

__all__ = ["BatchMSELoss"]


class BatchMSELoss(ModelLayer):
    _weighted_name = "weighted_l2_distance"

    def __init__(self, model: Any, input_record: Any, name: str = "batch_mse_loss", **kwargs: Any) -> None:
        super().__init__(model, name, input_record, **kwargs)
        fields = ("label", schema.Scalar()), ("prediction", schema.Scalar())
        require_fields(type(self).__name__, input_record, *fields)
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
        loss = self._example_loss(net, label, prediction)
        if "weight" in record.fields:
            loss = net.Mul([loss, stopped_float_weight(net, record)], net.NextScopedBlob(self._weighted_name))
        net.AveragedLoss(loss, self.output_schema.field_blobs())

    def _example_loss(self, net: Any, label: Any, prediction: Any) -> Any:
        """Each example's loss: half the squared error."""
        return net.SquaredL2Distance([label, prediction], net.NextScopedBlob("l2"))
