"""``SamplingTrain``: train a SamplingTrainableMixin layer (``FC``...) on sampled output rows.

Input record: ``input`` (the prediction layer's input), ``indices`` (sampled rows) and, with
``subtract_log_odd``, ``sampling_prob``. Training gathers the sampled rows of each parameter into
``<param>_sampled`` blobs, runs the layer on them and subtracts ``log(sampling_prob)`` from the
output; prediction runs the full layer."""

from __future__ import annotations

from typing import Any

from framework.caffe2.python import schema
from framework.caffe2.python.layers.layers import LayerError, ModelLayer, get_layer_class
from framework.caffe2.python.layers.sampling_trainable_mixin import SamplingTrainableMixin

__all__ = ["SamplingTrain"]


class SamplingTrain(ModelLayer):
    def __init__(
        self, model: Any, input_record: Any, prediction_layer: str, output_dims: int, subtract_log_odd: bool = True,
        name: str = "sampling_train", **kwargs: Any,
    ) -> None:  # fmt: skip
        super().__init__(model, name, input_record, **kwargs)
        layer_class = get_layer_class(prediction_layer)
        if not issubclass(layer_class, SamplingTrainableMixin):
            raise LayerError(f"SamplingTrain: {prediction_layer} is not a SamplingTrainableMixin layer")
        if "indices" not in input_record or not isinstance(input_record.indices, schema.Scalar):
            raise LayerError("SamplingTrain: input_record.indices (a Scalar) is required")
        if "input" not in input_record:
            raise LayerError("SamplingTrain: input_record.input is required")
        self.subtract_log_odd = subtract_log_odd
        if subtract_log_odd and "sampling_prob" not in input_record:
            raise LayerError("SamplingTrain: subtract_log_odd needs input_record.sampling_prob")
        self._prediction_layer = layer_class(model, input_record.input, output_dims=output_dims, **kwargs)
        self._prediction_layer.train_param_blobs = [
            model.net.NextBlob(str(blob) + "_sampled") for blob in self._prediction_layer.param_blobs
        ]
        self.params = self._prediction_layer.params
        self.output_schema = self._prediction_layer.output_schema

    def add_ops(self, net: Any) -> None:
        self._prediction_layer.add_ops(net)

    def add_train_ops(self, net: Any) -> None:
        layer = self._prediction_layer
        for full, sampled in zip(layer.param_blobs, layer.train_param_blobs):
            net.Gather([full, self.input_record.indices()], sampled)
        layer.add_train_ops(net)
        if not self.subtract_log_odd:
            return
        log_q = net.Log(self.input_record.sampling_prob(), net.NextScopedBlob("log_q"))
        net.Sub([self.output_schema(), log_q], self.output_schema(), broadcast=1, use_grad_hack=1)
