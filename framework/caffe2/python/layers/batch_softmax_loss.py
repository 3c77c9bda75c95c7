"""``BatchSoftmaxLoss``: SoftmaxWithLoss of ``prediction`` against ``label`` (int32 class ids, or
probabilities with ``label_prob``), weighted by an optional ``weight`` field. Output Struct
``softmax`` (prediction's type) and ``loss`` (float32).

``label_smoothing_matrix`` (K x K, row i = the distribution label i is smoothed to) makes the label
``MatMul(OneHot(label, K), matrix)``, a probability label; the matrix and K are global constants."""

from __future__ import annotations

from typing import Any

import numpy as np

from framework import core
from framework.caffe2.python import schema
from framework.caffe2.python.layers._loss_util import require_fields
from framework.caffe2.python.layers.layers import LayerError, ModelLayer

__all__ = ["BatchSoftmaxLoss"]


class BatchSoftmaxLoss(ModelLayer):
    def __init__(
        self, model: Any, input_record: Any, name: str = "batch_softmax_loss", label_smoothing_matrix: Any = None,
        label_prob: bool = False, **kwargs: Any,
    ) -> None:  # fmt: skip
        super().__init__(model, name, input_record, **kwargs)
        require_fields("BatchSoftmaxLoss", input_record, ("label", schema.Scalar()), ("prediction", schema.Scalar()))
        self.label_prob = label_prob
        self.label_smoothing_matrix = label_smoothing_matrix
        if label_smoothing_matrix is not None:
            self.initialize_label_smoothing_constants()
        self.output_schema = schema.Struct(
            ("softmax", schema.Scalar(input_record.prediction.field_type(), self.get_next_blob_reference("softmax"))),
            ("loss", schema.Scalar(np.float32, self.get_next_blob_reference("loss"))),
        )

    def initialize_label_smoothing_constants(self) -> None:
        matrix = np.array(self.label_smoothing_matrix).astype(np.float32)
        if matrix.ndim != 2 or matrix.shape[0] != matrix.shape[1]:
            raise LayerError(f"BatchSoftmaxLoss: label_smoothing_matrix must be square 2-D, got {matrix.shape}")
        label_dim = matrix.shape[0]
        self.label_smoothing_matrix = self.model.add_global_constant(
            f"{self.name}_label_smoothing_matrix", array=matrix, dtype=np.dtype(np.float32)
        )
        self.label_dim = self.model.add_global_constant(
            f"{self.name}_label_dim", array=label_dim, dtype=np.dtype(np.int64)
        )
        # a smoothed label is a distribution
        self.label_prob = True

    def compute_smoothed_label(self, net: Any) -> Any:
        label = self.input_record.label()
        if self.input_record.label.field_type().base != np.int64:
            int64_label = net.NextScopedBlob("int64_label")
            net.Cast([label], [int64_label], to=core.DataType.INT64)
        else:
            int64_label = label
        one_hot = net.NextScopedBlob("one_hot_label")
        smoothed = net.NextScopedBlob("smoothed_label")
        net.OneHot([int64_label, self.label_dim], [one_hot])
        net.MatMul([one_hot, self.label_smoothing_matrix], smoothed)
        return smoothed

    def add_ops(self, net: Any) -> None:
        label = self.input_record.label.field_blobs()
        if self.label_smoothing_matrix is not None:
            label = [self.compute_smoothed_label(net)]
        elif not self.label_prob and self.input_record.label.field_types()[0].base != np.int32:
            label = [net.Cast(label, net.NextScopedBlob("int32_label"), to=core.DataType.INT32)]
        inputs = self.input_record.prediction.field_blobs() + label
        if "weight" in self.input_record:
            weight = self.input_record.weight()
            if self.input_record.weight.field_type().base != np.float32:
                weight = net.Cast(weight, weight + "_float32", to=core.DataType.FLOAT)
            inputs += [weight]
        net.SoftmaxWithLoss(inputs, self.output_schema.field_blobs(), label_prob=self.label_prob)
