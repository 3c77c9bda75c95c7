"""``LabelSmooth``: replace a label by a smoothed distribution.

``smooth_matrix`` with 2 entries ``[low, high]``: a binary probability label becomes
``StumpFunc(label, threshold=0.5, low, high)`` (output dim 1). With K*K entries: row ``label`` of
the K x K matrix, as ``MatMul(OneHot(label, K), matrix)`` (output dim K)."""

from __future__ import annotations

from typing import Any

import numpy as np

from framework import core
from framework.caffe2.python import schema
from framework.caffe2.python.layers.layers import LayerError, ModelLayer

__all__ = ["LabelSmooth"]


class LabelSmooth(ModelLayer):
    def __init__(self, model: Any, label: Any, smooth_matrix: Any, name: str = "label_smooth", **kwargs: Any) -> None:
        super().__init__(model, name, label, **kwargs)
        self.label = label
        smooth_matrix = np.array(smooth_matrix).astype(np.float32).flatten()
        self.set_dim(smooth_matrix)
        self.set_smooth_matrix(smooth_matrix)
        self.output_schema = schema.Scalar((np.float32, (self.dim,)), self.get_next_blob_reference("smoothed_label"))

    def set_dim(self, smooth_matrix: np.ndarray) -> None:
        n = smooth_matrix.size
        self.binary_prob_label = n == 2
        if self.binary_prob_label:
            self.dim = 1
            return
        dim = int(round(np.sqrt(n)))
        if dim * dim != n:
            raise LayerError(f"LabelSmooth: smooth_matrix must have 2 or K*K entries, got {n}")
        self.dim = dim

    def set_smooth_matrix(self, smooth_matrix: np.ndarray) -> None:
        if self.binary_prob_label:
            self.smooth_matrix = smooth_matrix
            return
        self.smooth_matrix = self.model.add_global_constant(
            f"{self.name}_label_smooth_matrix", array=smooth_matrix.reshape((self.dim, self.dim)),
            dtype=np.dtype(np.float32),
        )  # fmt: skip
        self.len = self.model.add_global_constant(f"{self.name}_label_dim", array=self.dim, dtype=np.dtype(np.int64))

    def add_ops_for_binary_prob_label(self, net: Any) -> None:
        label = self.label()
        if self.label.field_type().base != np.float32:
            label = net.NextScopedBlob("float32_label")
            net.Cast([self.label()], [label], to=core.DataType.FLOAT)
        net.StumpFunc(
            label, self.output_schema(), threshold=0.5, low_value=self.smooth_matrix[0],
            high_value=self.smooth_matrix[1],
        )  # fmt: skip

    def add_ops_for_categorical_label(self, net: Any) -> None:
        label = self.label()
        if self.label.field_type().base != np.int64:
            label = net.NextScopedBlob("int64_label")
            net.Cast([self.label()], [label], to=core.DataType.INT64)
        one_hot = net.NextScopedBlob("one_hot_label")
        net.OneHot([label, self.len], [one_hot])
        net.MatMul([one_hot, self.smooth_matrix], self.output_schema())

    def add_ops(self, net: Any) -> None:
        if self.binary_prob_label:
            self.add_ops_for_binary_prob_label(net)
        else:
            self.add_ops_for_categorical_label(net)
