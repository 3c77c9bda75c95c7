"""``BatchHuberLoss``: AveragedLoss of the Huber distance of ``label`` and ``prediction`` (squeezed
on dim 1): ``0.5 min(|e|, delta)^2 + delta (|e| - min(|e|, delta))``, optionally weighted by a
``weight`` field (no gradient through label, delta or weight). Excluded from prediction."""

from __future__ import annotations

from typing import Any

import numpy as np

from framework import core
from framework.caffe2.python import schema
from framework.caffe2.python.layers._loss_util import require_fields, stopped_float_weight
from framework.caffe2.python.layers.layers import LayerError, ModelLayer
from framework.caffe2.python.layers.tags import Tags

__all__ = ["BatchHuberLoss"]


class BatchHuberLoss(ModelLayer):
    def __init__(
        self, model: Any, input_record: Any, name: str = "batch_huber_loss", delta: float = 1.0, **kwargs: Any
    ) -> None:
        super().__init__(model, name, input_record, **kwargs)
        if delta <= 0:
            raise LayerError(f"BatchHuberLoss: delta must be > 0, got {delta}")
        self._delta = delta
        require_fields("BatchHuberLoss", input_record, ("label", schema.Scalar()), ("prediction", schema.Scalar()))
        self.tags.update([Tags.EXCLUDE_FROM_PREDICTION])
        self.output_schema = schema.Scalar(np.float32, self.get_next_blob_reference("output"))

    def add_ops(self, net: Any) -> None:
        record = self.input_record
        prediction = net.Squeeze(record.prediction(), net.NextScopedBlob("squeezed_prediction"), dims=[1])
        label = record.label.field_blobs()
        if record.label.field_type().base != record.prediction.field_type().base:
            to = schema.data_type_for_dtype(record.prediction.field_type())
            label = net.Cast(label, net.NextScopedBlob("cast_label"), to=to)
        delta = net.ConstantFill(label, net.NextScopedBlob("delta"), value=self._delta, dtype=core.DataType.FLOAT)
        label = net.StopGradient(label, net.NextScopedBlob("stopped_label"))
        delta = net.StopGradient(delta, net.NextScopedBlob("stopped_delta"))
        abs_error = net.L1Distance([label, prediction], net.NextScopedBlob("abs_error"))
        min_error = net.Min([abs_error, delta], net.NextScopedBlob("min_error_delta"))
        quadratic = net.Scale(net.Sqr(min_error), scale=0.5)
        linear = net.Mul([net.Sub([abs_error, min_error]), delta], net.NextScopedBlob("huber_linear_term"))
        huber = net.Add([quadratic, linear], net.NextScopedBlob("huber_dist"))
        if "weight" in record.fields:
            huber = net.Mul([huber, stopped_float_weight(net, record)], net.NextScopedBlob("weighted_huber_distance"))
        net.AveragedLoss(huber, self.output_schema.field_blobs())
