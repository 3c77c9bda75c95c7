"""``Dropout``: Dropout op with ``ratio`` (0 <= ratio < 1) in training, ``is_test=1`` (identity)
in evaluation and prediction, unless ``dropout_for_eval`` (Caffe2 2020), which drops there too. The
output has the input's type."""

from __future__ import annotations

from typing import Any

from framework.caffe2.python import schema
from framework.caffe2.python.layers.layers import LayerError, ModelLayer

__all__ = ["Dropout"]


class Dropout(ModelLayer):
    def __init__(
        self, model: Any, input_record: Any, name: str = "dropout", ratio: float = 0.5, dropout_for_eval: bool = False,
        **kwargs: Any,
    ) -> None:  # fmt: skip
        super().__init__(model, name, input_record, **kwargs)
        if not isinstance(input_record, schema.Scalar):
            raise LayerError(f"Dropout: incorrect input type {input_record!r} (a Scalar expected)")
        if not 0 <= ratio < 1.0:
            raise LayerError(f"Dropout: expected 0 <= ratio < 1, got {ratio}")
        self.output_schema = input_record.clone_schema()
        self.output_schema.set_value(self.get_next_blob_reference("output"))
        self.ratio = ratio
        self.dropout_for_eval = dropout_for_eval

    def _add_ops(self, net: Any, is_test: bool) -> None:
        outputs = self.output_schema.field_blobs() + [net.NextScopedBlob("d_mask")]
        net.Dropout(self.input_record.field_blobs(), outputs, ratio=self.ratio, is_test=is_test)

    def add_train_ops(self, net: Any) -> None:
        self._add_ops(net, is_test=False)

    def add_eval_ops(self, net: Any) -> None:
        self._add_ops(net, is_test=not self.dropout_for_eval)

    def add_ops(self, net: Any) -> None:
        self.add_eval_ops(net)
