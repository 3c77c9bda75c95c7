"""``SparseDropoutWithReplacement``: drop whole id lists of an IdList with a probability per
context (``dropout_prob_train`` / ``_eval`` / ``_predict``), replacing a dropped list by the single
id ``replacement_value`` (its length becomes 1). A feature missing at serving time can so be
trained with predict probability 1.0 and a fixed replacement.

>>> # ids [1, 2, 3, 4, 5], lengths [2, 3], the second list dropped, replacement -1:
>>> # ids [1, 2, -1], lengths [2, 1]
"""

from __future__ import annotations

from typing import Any

from framework.caffe2.python import schema
from framework.caffe2.python.layers.layers import IdList, LayerError, ModelLayer

__all__ = ["SparseDropoutWithReplacement"]


class SparseDropoutWithReplacement(ModelLayer):
    def __init__(
        self, model: Any, input_record: Any, dropout_prob_train: float, dropout_prob_eval: float,
        dropout_prob_predict: float, replacement_value: int, name: str = "sparse_dropout", **kwargs: Any,
    ) -> None:  # fmt: skip
        super().__init__(model, name, input_record, **kwargs)
        if not schema.equal_schemas(input_record, IdList):
            raise LayerError(f"SparseDropoutWithReplacement: incorrect input type {input_record!r} (an IdList)")
        self.dropout_prob_train = float(dropout_prob_train)
        self.dropout_prob_eval = float(dropout_prob_eval)
        self.dropout_prob_predict = float(dropout_prob_predict)
        self.replacement_value = int(replacement_value)
        probs = {"train": self.dropout_prob_train, "eval": self.dropout_prob_eval, "predict": self.dropout_prob_predict}
        for ctx, p in probs.items():
            if not 0 <= p <= 1.0:
                raise LayerError(f"expected 0 <= dropout_prob_{ctx} <= 1, got {p}")
        if not any(probs.values()):
            raise LayerError(
                "SparseDropoutWithReplacement: dropout probabilities are all 0 for train, eval and predict"
            )
        self.output_schema = schema.NewRecord(model.net, IdList)
        if input_record.lengths.metadata:
            self.output_schema.lengths.set_metadata(input_record.lengths.metadata)
        if input_record.items.metadata:
            self.output_schema.items.set_metadata(input_record.items.metadata)

    def _add_ops(self, net: Any, ratio: float) -> None:
        net.SparseDropoutWithReplacement(
            [self.input_record.items(), self.input_record.lengths()],
            [self.output_schema.items(), self.output_schema.lengths()],
            ratio=ratio, replacement_value=self.replacement_value,
        )  # fmt: skip

    def add_train_ops(self, net: Any) -> None:
        self._add_ops(net, self.dropout_prob_train)

    def add_eval_ops(self, net: Any) -> None:
        self._add_ops(net, self.dropout_prob_eval)

    def add_ops(self, net: Any) -> None:
        self._add_ops(net, self.dropout_prob_predict)
