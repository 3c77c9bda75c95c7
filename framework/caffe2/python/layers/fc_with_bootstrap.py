"""``FCWithBootstrap`` (Caffe2 2020): ``num_bootstrap`` independent fully connected layers, each trained on a
bootstrap resample of the batch.

Parameters ``bootstrap_iteration_<i>/w`` ``[output_dims, input_dims]`` and ``/b`` ``[output_dims]``
(UniformFill in ``+-sqrt(1/input_dims)`` by default). The output record holds, for each ``i``,
``bootstrap_iteration_<i>/indices`` and ``bootstrap_iteration_<i>/preds``. Every net draws, per ``i``,
``batch_size`` row indices uniformly in ``[0, batch_size - 1]`` (UniformIntFill with the bounds as inputs;
the batch size, bounds and their blobs are made by the first iteration: Shape, GivenTensorInt64Fill, Gather,
two GivenTensorIntFill, Cast, Sub). Training gathers those rows of the input and applies FC ``i`` to them;
evaluation and prediction apply each FC to the whole input (the indices are drawn but unused), as Caffe2.
``clip_param = (min, max)`` (either may be None) clips the parameters before use; extra keyword arguments go
to the FC ops.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from framework import core
from framework.caffe2.python import schema
from framework.caffe2.python.layers.fc import _clip_args, _scoped_fc_version
from framework.caffe2.python.layers.layers import LayerError, ModelLayer
from framework.caffe2.python.layers.sampling_trainable_mixin import SamplingTrainableMixin

__all__ = ["FCWithBootstrap"]


class FCWithBootstrap(SamplingTrainableMixin, ModelLayer):
    def __init__(
        self, model: Any, input_record: Any, output_dims: int, num_bootstrap: int, weight_init: Any = None,
        bias_init: Any = None, weight_optim: Any = None, bias_optim: Any = None, name: str = "fc_with_bootstrap",
        weight_reg: Any = None, bias_reg: Any = None, clip_param: Any = None, axis: int = 1, **kwargs: Any,
    ) -> None:  # fmt: skip
        super().__init__(model, name, input_record, **kwargs)
        if not isinstance(input_record, schema.Scalar):
            raise LayerError(f"FCWithBootstrap: incorrect input type {input_record!r} (a Scalar expected)")
        shape = input_record.field_types()[0].shape
        if not len(shape):
            raise LayerError("FCWithBootstrap expects limited dimensions of the input tensor")
        if axis < 1:
            raise LayerError(f"FCWithBootstrap: axis {axis} should be >= 1")
        self.axis = axis
        input_dims = int(np.prod(shape[axis - 1 :]))
        if input_dims <= 0:
            raise LayerError(f"FCWithBootstrap expects input dimensions > 0, got {input_dims}")
        self.input_dims, self.num_bootstrap = input_dims, num_bootstrap
        self.clip_args = _clip_args(clip_param)
        self.batch_size = self.lower_bound = self.upper_bound = None
        scale = math.sqrt(1.0 / input_dims)
        weight_init = weight_init or ("UniformFill", {"min": -scale, "max": scale})
        bias_init = bias_init or ("UniformFill", {"min": -scale, "max": scale})
        self.bootstrapped_FCs: list[Any] = []
        output_schema = schema.Struct()
        for i in range(num_bootstrap):
            for field in ("indices", "preds"):
                key = f"bootstrap_iteration_{i}/{field}"
                output_schema += schema.Struct((key, self.get_next_blob_reference(key)))
            self.bootstrapped_FCs += [
                self.create_param(
                    param_name=f"bootstrap_iteration_{i}/w", shape=[output_dims, input_dims],
                    initializer=weight_init, optimizer=weight_optim, regularizer=weight_reg,
                ),
                self.create_param(
                    param_name=f"bootstrap_iteration_{i}/b", shape=[output_dims], initializer=bias_init,
                    optimizer=bias_optim, regularizer=bias_reg,
                ),
            ]  # fmt: skip
        self.output_schema = output_schema

    @property
    def param_blobs(self) -> list[Any]:
        return self.bootstrapped_FCs

    def get_fp16_compatible_parameters(self) -> list[Any]:
        return self.bootstrapped_FCs[0::2]

    def _indices(self, net: Any, iteration: int) -> Any:
        """``batch_size`` indices drawn uniformly in ``[0, batch_size - 1]`` into the iteration's indices."""
        x = self.input_record.field_blobs()[0]
        with core.NameScope(f"bootstrap_iteration_{iteration}"):
            if iteration == 0:
                input_shape = net.Shape(x, net.NextScopedBlob("input_shape"))
                index = net.GivenTensorInt64Fill([], net.NextScopedBlob("batch_size_index"), shape=[1], values=[0])
                self.batch_size = net.Gather([input_shape, index], net.NextScopedBlob("batch_size"))
                self.lower_bound = net.GivenTensorIntFill([], net.NextScopedBlob("lower_bound"), shape=[1], values=[0])
                offset = net.GivenTensorIntFill([], net.NextScopedBlob("offset"), shape=[1], values=[1])
                as_int = net.Cast([self.batch_size], net.NextScopedBlob("int_batch_size"), to=core.DataType.INT32)
                self.upper_bound = net.Sub([as_int, offset], net.NextScopedBlob("upper_bound"))
            out = self.output_schema[iteration * 2].field_blobs()[0]
            return net.UniformIntFill([self.batch_size, self.lower_bound, self.upper_bound], out, input_as_shape=1)

    def _fc(self, net: Any, features: list[Any], params: list[Any], iteration: int) -> None:
        if self.clip_args is not None:
            clipped = [net.NextScopedBlob(f"clipped_{p}") for p in params]
            for p, c in zip(params, clipped):
                net.Clip([p], [c], **self.clip_args)
            params = clipped
        out = [self.output_schema.field_blobs()[iteration * 2 + 1]]
        net.FC(features + list(params), out, axis=self.axis, **self.kwargs)

    def add_ops(self, net: Any) -> None:
        if _scoped_fc_version() != "fp32":
            raise LayerError("FCWithBootstrap supports only fp32 FCs in the predictor net")
        for i in range(self.num_bootstrap):
            self._indices(net, i)
            self._fc(net, self.input_record.field_blobs(), self.bootstrapped_FCs[2 * i : 2 * i + 2], i)

    def add_train_ops(self, net: Any) -> None:
        x = self.input_record.field_blobs()[0]
        for i in range(self.num_bootstrap):
            indices = self._indices(net, i)
            rows = net.Gather([x, indices], net.NextScopedBlob(f"bootstrapped_features_{i}"))
            self._fc(net, [rows], self.train_param_blobs[2 * i : 2 * i + 2], i)
