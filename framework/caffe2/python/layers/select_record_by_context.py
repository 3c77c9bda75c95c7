"""``SelectRecordByContext``: let a model follow a different path per instantiation context and
join later. The input Struct has one record per context name (``training``, ``eval``,
``prediction``, ``accumulate_pred``), all of one schema; the output aliases (or copies, with
``use_copy``) the current context's record, or ``default_output_record_field``'s."""

from __future__ import annotations

import logging
from typing import Any

from framework.caffe2.python import schema
from framework.caffe2.python.layers.layers import InstantiationContext, LayerError, ModelLayer

__all__ = ["SelectRecordByContext"]

logger = logging.getLogger(__name__)


class SelectRecordByContext(ModelLayer):
    def __init__(
        self, model: Any, input_record: Any, name: str = "select_record_by_context", check_field_metas: bool = True,
        use_copy: bool = False, default_output_record_field: str | None = None, **kwargs: Any,
    ) -> None:  # fmt: skip
        super().__init__(model, name, input_record, **kwargs)
        if not isinstance(input_record, schema.Struct) or len(input_record) <= 1:
            raise LayerError("SelectRecordByContext: input must be a Struct of at least two records")
        self.use_copy = use_copy
        self.default_output_record = (
            input_record[default_output_record_field] if default_output_record_field is not None else None
        )
        ref_record = input_record[0]
        for record in input_record:
            if not schema.equal_schemas(record, ref_record, check_field_metas=check_field_metas):
                raise LayerError("SelectRecordByContext: all records must have the same schema")
        self.output_schema = schema.NewRecord(model.net, ref_record)

    def _set_output_blobs(self, net: Any, context: str) -> None:
        record = self.input_record.get(context, self.default_output_record)
        if record is None:
            raise LayerError(f"{context} context is not in the input record and no default output was given")
        for in_blob, out_blob in zip(record.field_blobs(), self.output_schema.field_blobs()):
            if self.use_copy:
                net.Copy(in_blob, out_blob)
            else:
                net.Alias(in_blob, out_blob)

    def add_ops(self, net: Any) -> None:
        self._set_output_blobs(net, InstantiationContext.PREDICTION)

    def add_eval_ops(self, net: Any) -> None:
        self._set_output_blobs(net, InstantiationContext.EVAL)

    def add_train_ops(self, net: Any) -> None:
        self._set_output_blobs(net, InstantiationContext.TRAINING)

    def add_ops_to_accumulate_pred(self, net: Any) -> None:
        self._set_output_blobs(net, InstantiationContext.ACCUMULATE_PRED)
