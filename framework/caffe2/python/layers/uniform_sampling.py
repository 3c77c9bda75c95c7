"""``UniformSampling``: ``samples`` = the (unique) input ids followed by ``num_samples - len(input)``
ids drawn uniformly without replacement from ``[0, num_elements)`` excluding them
(UniqueUniformFill); ``sampling_prob`` = ``num_samples / num_elements`` for each. No gradient
flows through either."""

from __future__ import annotations

from typing import Any

import numpy as np

from framework import core
from framework.caffe2.python import schema
from framework.caffe2.python.layers.layers import LayerError, ModelLayer

__all__ = ["UniformSampling"]


class UniformSampling(ModelLayer):
    def __init__(
        self, model: Any, input_record: Any, num_samples: int, num_elements: int, name: str = "uniform_sampling",
        **kwargs: Any,
    ) -> None:  # fmt: skip
        super().__init__(model, name, input_record, **kwargs)
        if not num_elements > num_samples > 0:
            raise LayerError(f"UniformSampling: need num_elements > num_samples > 0, got {num_elements}, {num_samples}")
        if not isinstance(input_record, schema.Scalar):
            raise LayerError(f"UniformSampling: expected a Scalar, got {input_record!r}")
        self.num_elements = num_elements
        self.num_samples = self.create_param(
            "num_examples", (1,), ("GivenTensorInt64Fill", {"values": [num_samples]}), model.NoOptim
        )
        prob_init = ("ConstantFill", {"value": float(num_samples) / num_elements, "dtype": core.DataType.FLOAT})
        self.sampling_prob = self.create_param("prob", (num_samples,), prob_init, model.NoOptim)
        self.output_schema = schema.Struct(
            ("samples", schema.Scalar(np.int32, self.get_next_blob_reference("samples"))),
            ("sampling_prob", schema.Scalar(np.float32, self.sampling_prob)),
        )

    def add_ops(self, net: Any) -> None:
        net.StopGradient(self.sampling_prob, self.sampling_prob)
        shape = net.Shape([self.input_record()], net.NextScopedBlob("shape"))
        shape = net.Sub([self.num_samples, shape], shape)
        samples = net.UniqueUniformFill(
            [shape, self.input_record()], net.NextScopedBlob("samples_before_concat"), min=0,
            max=self.num_elements - 1, input_as_shape=True,
        )  # fmt: skip
        net.Concat(
            [self.input_record(), samples], [self.output_schema.samples(), net.NextScopedBlob("split_info")], axis=0
        )
        net.StopGradient(self.output_schema.samples(), self.output_schema.samples())
