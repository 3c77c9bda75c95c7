"""``BatchUnjoinedMSELoss``: MSE for data whose negatives (label 0) are unjoined samples:
per example ``0.5 p^2`` where the label is 0, else ``0.5 (y - p)^2 - 0.5 p^2`` (the error minus the
negative-sample correction), optionally weighted, then AveragedLoss. The prediction is squeezed on
dim 1 and the label cast to its type (no gradient through it). Excluded from prediction."""

from __future__ import annotations

from typing import Any

from framework import core
from framework.caffe2.python.layers.batch_mse_loss import BatchMSELoss

__all__ = ["BatchUnjoinedMSELoss"]


class BatchUnjoinedMSELoss(BatchMSELoss):
    _weighted_name = "weighted_unjoined_l2"

    def __init__(self, model: Any, input_record: Any, name: str = "batch_unjoined_mse_loss", **kwargs: Any) -> None:
        super().__init__(model, input_record, name, **kwargs)

    def _example_loss(self, net: Any, label: Any, prediction: Any) -> Any:
        l2 = net.SquaredL2Distance([label, prediction], net.NextScopedBlob("l2"))
        correction = net.Scale(net.Sqr(prediction), scale=0.5)
        positive = net.Sub([l2, correction], net.NextScopedBlob("pos_sample_error"))
        zero = net.ConstantFill([], net.NextScopedBlob("zero_label"), value=0.0, dtype=core.DataType.FLOAT)
        is_negative = net.EQ([label, zero], broadcast=1)
        return net.Conditional([is_negative, correction, positive], net.NextScopedBlob("unjoined_l2"))
