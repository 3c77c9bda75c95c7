"""Fully connected layers: ``FC`` (``y = x W^T + b``, op FC) and ``FCWithoutBias`` (MatMul with
``trans_b``). Input: a Scalar of shape ``(batch, input_dims)``; output ``(np.float32, (output_dims,))``.
Default initializers: UniformFill in ``[-sqrt(1/input_dims), sqrt(1/input_dims)]`` (weights and bias).
Extra keyword arguments are passed to the op (e.g. ``axis``)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from framework import schema
from framework.caffe2.python.layers.layers import LayerError, ModelLayer
from framework.caffe2.python.layers.sampling_trainable_mixin import SamplingTrainableMixin

__all__ = ["FC", "FCWithoutBias"]


def _input_dims(layer: str, record: Any) -> int:
    if not isinstance(record, schema.Scalar):
        raise LayerError(f"{layer}: incorrect input type {record!r} (a Scalar expected)")
    shape = record.field_types()[0].shape
    if len(shape) == 0:
        raise LayerError(f"{layer} expects limited dimensions of the input tensor")
    if shape[0] <= 0:
        raise LayerError(f"{layer} expects input dimensions > 0, got {shape[0]}")
    return shape[0]


def _uniform(input_dims: int) -> tuple[str, dict[str, float]]:
    scale = math.sqrt(1.0 / input_dims)
    return ("UniformFill", {"min": -scale, "max": scale})


class FC(SamplingTrainableMixin, ModelLayer):
    def __init__(
        self, model: Any, input_record: Any, output_dims: int, weight_init: Any = None, bias_init: Any = None,
        weight_optim: Any = None, bias_optim: Any = None, name: str = "fc", weight_reg: Any = None,
        bias_reg: Any = None, **kwargs: Any,
    ) -> None:  # fmt: skip
        super().__init__(model, name, input_record, **kwargs)
        input_dims = _input_dims("FC", input_record)
        self.w = self.create_param(
            param_name="w", shape=[output_dims, input_dims], initializer=weight_init or _uniform(input_dims),
            optimizer=weight_optim, regularizer=weight_reg,
        )  # fmt: skip
        self.b = self.create_param(
            param_name="b", shape=[output_dims], initializer=bias_init or _uniform(input_dims),
            optimizer=bias_optim, regularizer=bias_reg,
        )  # fmt: skip
        self.output_schema = schema.Scalar((np.float32, (output_dims,)), self.get_next_blob_reference("output"))

    def _add_ops(self, net: Any, params: list[Any]) -> None:
        net.FC(self.input_record.field_blobs() + params, self.output_schema.field_blobs(), **self.kwargs)

    @property
    def param_blobs(self) -> list[Any]:
        return [self.w, self.b]


class FCWithoutBias(SamplingTrainableMixin, ModelLayer):
    def __init__(
        self, model: Any, input_record: Any, output_dims: int, weight_init: Any = None, weight_optim: Any = None,
        name: str = "fc_without_bias", **kwargs: Any,
    ) -> None:  # fmt: skip
        super().__init__(model, name, input_record, **kwargs)
        input_dims = _input_dims("FCWithoutBias", input_record)
        self.output_schema = schema.Scalar((np.float32, (output_dims,)), self.get_next_blob_reference("output"))
        self.w = self.create_param(
            param_name="w", shape=[output_dims, input_dims], initializer=weight_init or _uniform(input_dims),
            optimizer=weight_optim,
        )  # fmt: skip

    def _add_ops(self, net: Any, params: list[Any]) -> None:
        net.MatMul(self.input_record.field_blobs() + params, self.output_schema.field_blobs(), trans_b=1, **self.kwargs)

    @property
    def param_blobs(self) -> list[Any]:
        return [self.w]
