"""``GatherRecord``: the examples at ``indices`` of every blob of ``record`` (Struct fields
``indices``, ``record``). Scalars use Gather; a list's values use LengthsGather with the list's
lengths, so all of an example's items come along; nested lists sum the inner lengths per outer
example (LengthsSum over a float cast, as Caffe2 does for want of an integer LengthsSum).

>>> # indices [0, 2], a = [[0,1],[2,3],[4,5],[6,7]], b:lengths [0,1,2,3], b:items [0..5]
>>> # -> a = [[0,1],[4,5]], b:lengths [0,2], b:items [1,2]
"""

from __future__ import annotations

from typing import Any

from framework import core
from framework.caffe2.python import schema
from framework.caffe2.python.layers.layers import LayerError, ModelLayer

__all__ = ["GatherRecord"]


class GatherRecord(ModelLayer):
    def __init__(self, model: Any, input_record: Any, name: str = "gather_record", **kwargs: Any) -> None:
        super().__init__(model, name, input_record, **kwargs)
        if "indices" not in input_record or "record" not in input_record:
            raise LayerError("GatherRecord: input needs fields indices and record")
        self.output_schema = schema.NewRecord(model.net, input_record.record.clone_schema())
        self._indices = self.input_record.indices()

    def _gather_scalar(self, net: Any, record: Any, lengths_blob: Any, output: Any) -> None:
        if lengths_blob is None:
            net.Gather([record(), self._indices], output())
        else:
            net.LengthsGather([record(), lengths_blob, self._indices], output())

    def _gather_struct(self, net: Any, record: Any, lengths_blob: Any, output: Any) -> None:
        for name, field in record.get_children():
            self._dispatch(net, field, lengths_blob, output[name])

    def _gather_list(self, net: Any, record: Any, lengths_blob: Any, output: Any) -> None:
        self._gather_scalar(net, record.lengths, lengths_blob, output.lengths)
        lengths = str(record.lengths())
        if lengths_blob is None:
            lengths_blob = record.lengths()
        else:
            as_float = net.Cast(record.lengths(), net.NextScopedBlob(lengths + "_float"), to=core.DataType.FLOAT)
            nested = net.LengthsSum([as_float, lengths_blob], net.NextScopedBlob(lengths + "_nested_float"))
            lengths_blob = net.Cast(nested, net.NextScopedBlob(lengths + "_nested"), to=core.DataType.INT32)
        self._dispatch(net, record._items, lengths_blob, output._items)

    def _dispatch(self, net: Any, record: Any, lengths_blob: Any, output: Any) -> None:
        if isinstance(record, schema.Scalar):
            self._gather_scalar(net, record, lengths_blob, output)
        elif isinstance(record, schema.Struct):
            self._gather_struct(net, record, lengths_blob, output)
        elif isinstance(record, schema.List):
            self._gather_list(net, record, lengths_blob, output)
        else:
            raise NotImplementedError(f"GatherRecord: unsupported field {record!r}")

    def add_ops(self, net: Any) -> None:
        self._dispatch(net, self.input_record.record, None, self.output_schema)
