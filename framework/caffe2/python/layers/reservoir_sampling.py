"""``ReservoirSampling``: a uniform sample of ``num_to_collect`` rows of ``input_record.data``
over all runs (op ReservoirSampling). With an ``object_id`` field, an object already in the
reservoir replaces its own entry (maps ``object_to_pos`` / ``pos_to_object``). Output Struct:
``reservoir`` (data's type), ``num_visited``, ``mutex``. Not thread safe."""

from __future__ import annotations

from typing import Any

from framework import core
from framework.caffe2.python import schema
from framework.caffe2.python.layers.layers import LayerError, ModelLayer

__all__ = ["ReservoirSampling"]


class ReservoirSampling(ModelLayer):
    def __init__(
        self, model: Any, input_record: Any, num_to_collect: int, name: str = "reservoir_sampling", **kwargs: Any
    ) -> None:
        super().__init__(model, name, input_record, **kwargs)
        if num_to_collect <= 0:
            raise LayerError(f"ReservoirSampling: num_to_collect must be > 0, got {num_to_collect}")
        self.num_to_collect = num_to_collect
        no_optim = model.NoOptim
        int64_zero = ("ConstantFill", {"value": 0, "dtype": core.DataType.INT64})
        self.reservoir = self.create_param("reservoir", [0], ("ConstantFill",), no_optim)
        self.num_visited_blob = self.create_param("num_visited", [], int64_zero, no_optim)
        self.mutex = self.create_param("mutex", None, ("CreateMutex",), no_optim)
        self.extra_input_blobs: list[Any] = []
        self.extra_output_blobs: list[Any] = []
        if "object_id" in input_record:
            map_init = ("CreateMap", {"key_dtype": core.DataType.INT64, "valued_dtype": core.DataType.INT32})
            object_to_pos = self.create_param("object_to_pos", None, map_init, no_optim)
            pos_to_object = self.create_param("pos_to_object", [0], int64_zero, no_optim)
            self.extra_input_blobs += [input_record.object_id(), object_to_pos, pos_to_object]
            self.extra_output_blobs += [object_to_pos, pos_to_object]
        self.output_schema = schema.Struct(
            ("reservoir", schema.from_blob_list(input_record.data, [self.reservoir])),
            ("num_visited", schema.Scalar(blob=self.num_visited_blob)),
            ("mutex", schema.Scalar(blob=self.mutex)),
        )

    def add_ops(self, net: Any) -> None:
        net.ReservoirSampling(
            [self.reservoir, self.num_visited_blob, self.input_record.data(), self.mutex] + self.extra_input_blobs,
            [self.reservoir, self.num_visited_blob] + self.extra_output_blobs,
            num_to_collect=self.num_to_collect,
        )
