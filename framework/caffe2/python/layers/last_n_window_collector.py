"""``LastNWindowCollector``: keep the last ``num_to_collect`` rows seen of a Scalar input across
runs (op LastNWindowCollector over persistent ``last_n``, ``next``, ``num_visited`` blobs and a
mutex). Output Struct: ``last_n`` (input's type), ``num_visited``, ``mutex``. Not thread safe."""

from __future__ import annotations

from typing import Any

from framework import core
from framework.caffe2.python import schema
from framework.caffe2.python.layers.layers import LayerError, ModelLayer

__all__ = ["LastNWindowCollector"]


class LastNWindowCollector(ModelLayer):
    def __init__(
        self, model: Any, input_record: Any, num_to_collect: int, name: str = "last_n_window_collector", **kwargs: Any
    ) -> None:
        super().__init__(model, name, input_record, **kwargs)
        if num_to_collect <= 0:
            raise LayerError(f"LastNWindowCollector: num_to_collect must be > 0, got {num_to_collect}")
        if not isinstance(input_record, schema.Scalar):
            raise LayerError(f"LastNWindowCollector: expected a Scalar, got {input_record!r}")
        self.num_to_collect = num_to_collect
        no_optim = model.NoOptim
        self.last_n = self.create_param("last_n", [0], ("ConstantFill", {}), no_optim)
        int32_zero = ("ConstantFill", {"value": 0, "dtype": core.DataType.INT32})
        self.next_blob = self.create_param("next", [], int32_zero, no_optim)
        self.mutex = self.create_param("mutex", None, ("CreateMutex",), no_optim)
        self.num_visited_blob = self.create_param(
            "num_visited", [], ("ConstantFill", {"value": 0, "dtype": core.DataType.INT64}), no_optim
        )
        self.output_schema = schema.Struct(
            ("last_n", schema.from_blob_list(input_record, [self.last_n])),
            ("num_visited", schema.Scalar(blob=self.num_visited_blob)),
            ("mutex", schema.Scalar(blob=self.mutex)),
        )

    def add_ops(self, net: Any) -> None:
        net.LastNWindowCollector(
            [self.last_n, self.next_blob, self.input_record(), self.mutex, self.num_visited_blob],
            [self.last_n, self.next_blob, self.num_visited_blob],
            num_to_collect=self.num_to_collect,
        )
