"""``BatchDistillLRLoss``: distillation loss ``(1 - w) * mean(xent(logit, label)) +
w * mean(xent(logit, teacher_label))`` with ``w = teacherWeight`` in [0, 1]; labels are cast to
float32 and expanded to ``(batch, 1)``. Excluded from prediction."""

from __future__ import annotations

from typing import Any

import numpy as np

from framework import core
from framework.caffe2.python import schema
from framework.caffe2.python.layers._loss_util import require_fields
from framework.caffe2.python.layers.layers import LayerError, ModelLayer
from framework.caffe2.python.layers.tags import Tags

__all__ = ["BatchDistillLRLoss"]


class BatchDistillLRLoss(ModelLayer):
    def __init__(
        self, model: Any, input_record: Any, name: str = "batch_distill_lr_loss", teacherWeight: float = 0.0,
        **kwargs: Any,
    ) -> None:  # fmt: skip
        super().__init__(model, name, input_record, **kwargs)
        if not 0 <= teacherWeight <= 1:
            raise LayerError(f"teacherWeight={teacherWeight:.2f} should be in [0, 1]")
        self._teacherWeight = teacherWeight
        require_fields(
            "BatchDistillLRLoss", input_record, ("teacher_label", schema.Scalar()), ("label", schema.Scalar()),
            ("logit", schema.Scalar()),
        )  # fmt: skip
        self.tags.update([Tags.EXCLUDE_FROM_PREDICTION])
        self.output_schema = schema.Scalar(np.float32, self.get_next_blob_reference("output"))

    def _expanded_float(self, net: Any, field: Any, name: str) -> Any:
        blob = field()
        if field.field_type() != np.float32:
            blob = net.Cast(blob, net.NextScopedBlob(f"float_{name}"), to=core.DataType.FLOAT)
        return net.ExpandDims(blob, net.NextScopedBlob(f"expanded_{name}"), dims=[1])

    def add_ops(self, net: Any) -> None:
        label = self._expanded_float(net, self.input_record.label, "label")
        teacher = self._expanded_float(net, self.input_record.teacher_label, "teacher_label")
        logit = self.input_record.logit()
        true_xent = net.SigmoidCrossEntropyWithLogits([logit, label], net.NextScopedBlob("cross_entropy"))
        teacher_xent = net.SigmoidCrossEntropyWithLogits([logit, teacher], net.NextScopedBlob("teacher_cross_entropy"))
        scaled_true = net.Scale(true_xent, net.NextScopedBlob("scaled_cross_entropy"), scale=1.0 - self._teacherWeight)
        scaled_teacher = net.Scale(
            teacher_xent, net.NextScopedBlob("scaled_teacher_cross_entropy"), scale=self._teacherWeight
        )
        true_loss = net.AveragedLoss(scaled_true, net.NextScopedBlob("true_loss"))
        teacher_loss = net.AveragedLoss(scaled_teacher, net.NextScopedBlob("teacher_loss"))
        net.Add([true_loss, teacher_loss], self.output_schema.field_blobs())
