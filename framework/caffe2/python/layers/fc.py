"""Fully connected layers: ``FC`` (``y = x W^T + b``, op FC; see its doc) and ``FCWithoutBias``
(MatMul with ``trans_b``). Input: a Scalar of shape ``(batch, input_dims...)``; output float32.
Default initializers: UniformFill in ``[-sqrt(1/input_dims), sqrt(1/input_dims)]``. Extra keyword
arguments are passed to the op."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from framework.caffe2.python import schema
from framework.caffe2.python.layers.layers import LayerError, ModelLayer
from framework.caffe2.python.layers.sampling_trainable_mixin import SamplingTrainableMixin

__all__ = ["FC", "FCWithoutBias", "get_fc_predictor_version"]


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


def get_fc_predictor_version(fc_version: str) -> str:
    """Checked value of the FC precision set with ``arg_scope([get_fc_predictor_version], fc_version=...)``."""
    if fc_version not in ("fp32", "fp16"):
        raise LayerError(f"the FC layer supports fp32 and fp16 in the predictor net, got {fc_version!r}")
    return fc_version


def _scoped_fc_version() -> str:
    try:
        from framework.caffe2.python.helpers.arg_scope import get_current_scope
    except ImportError:
        return "fp32"
    info = get_current_scope().get(get_fc_predictor_version.__name__, {"fc_version": "fp32"})
    return get_fc_predictor_version(info["fc_version"])


class FC(SamplingTrainableMixin, ModelLayer):
    """``y = x W^T + b`` over the input's dimensions from ``axis`` on (their product is the input
    size; the output keeps the dimensions before ``axis``). ``transposed`` stores W as
    ``[in, out]`` (op FCTransposed). ``clip_param=(min, max)`` clips the parameters before use.
    ``max_fc_size`` (weights per FC, at least the input size) splits the layer along the output
    into several FCs (``w_sub_<i>``, ``b_sub_<i>``) joined by Concat; as in Caffe2 those biases take
    the weight initializer and optimizer. Default initializers: UniformFill in
    ``+-sqrt(uniform_weight_init_scale_numerator / input_size)``. Prediction in ``fp16`` (arg scope
    of ``get_fc_predictor_version``) needs Caffe2's FbFCPacked op, which is not available here."""

    def __init__(
        self, model: Any, input_record: Any, output_dims: int, weight_init: Any = None, bias_init: Any = None,
        weight_optim: Any = None, bias_optim: Any = None, name: str = "fc", weight_reg: Any = None,
        bias_reg: Any = None, clip_param: Any = None, max_fc_size: int | None = None, axis: int = 1,
        transposed: bool = False, uniform_weight_init_scale_numerator: float | None = 1.0, **kwargs: Any,
    ) -> None:  # fmt: skip
        super().__init__(model, name, input_record, **kwargs)
        _input_dims("FC", input_record)
        if axis < 1:
            raise LayerError(f"FC: axis {axis} should be >= 1")
        self.axis = axis
        inner = input_record.field_types()[0].shape
        input_dims = int(np.prod(inner[axis - 1 :]))
        if input_dims <= 0:
            raise LayerError(f"FC expects input dimensions > 0, got {input_dims}")
        self.clip_args = _clip_args(clip_param)
        numerator = 1.0 if uniform_weight_init_scale_numerator is None else uniform_weight_init_scale_numerator
        scale = math.sqrt(numerator / input_dims)
        weight_init = weight_init or ("UniformFill", {"min": -scale, "max": scale})
        bias_init = bias_init or ("UniformFill", {"min": -scale, "max": scale})
        self.output_dim_vec = FC.calculate_fc_output_dims(max_fc_size, input_dims, output_dims)
        self.transposed = transposed

        def weight_shape(out: int) -> list[int]:
            return [input_dims, out] if transposed else [out, input_dims]

        if self.output_dim_vec is None or len(self.output_dim_vec) == 1:
            self.w = self.create_param(
                "w", weight_shape(output_dims), weight_init, weight_optim, regularizer=weight_reg
            )
            self.b = self.create_param("b", [output_dims], bias_init, bias_optim, regularizer=bias_reg)
        else:
            self.w_vec, self.b_vec = [], []
            for i, out in enumerate(self.output_dim_vec):
                self.w_vec.append(
                    self.create_param(
                        f"w_sub_{i}", weight_shape(out), weight_init, weight_optim, regularizer=weight_reg
                    )
                )
                self.b_vec.append(
                    self.create_param(f"b_sub_{i}", [out], weight_init, weight_optim, regularizer=weight_reg)
                )
        output_shape = (output_dims,) if axis == 1 else tuple(list(inner[: axis - 1]) + [output_dims])
        self.output_schema = schema.Scalar((np.float32, output_shape), self.get_next_blob_reference("output"))

    @staticmethod
    def calculate_fc_output_dims(max_fc_size: int | None, input_dim: int, output_dim: int) -> list[int] | None:
        """Output sizes of the FCs a layer of ``input_dim x output_dim`` splits into so that none
        holds more than ``max_fc_size`` weights; None when not splitting."""
        if not max_fc_size or max_fc_size < 0:
            return None
        if max_fc_size < input_dim:
            raise LayerError(f"FC splits along the output: max_fc_size {max_fc_size} must be >= input_dim {input_dim}")
        allowed = max_fc_size // input_dim
        num_fc = (output_dim - 1) // allowed + 1
        sizes = [allowed] * (num_fc - 1)
        return sizes + [output_dim - sum(sizes)]

    def _insert_fc_ops(self, net: Any, params: list[Any], outputs: Any, version: str) -> Any:
        if version != "fp32":
            raise LayerError(f"FC: predictor version {version} needs Caffe2's FbFCPacked op, not available here")
        op = net.FCTransposed if self.transposed else net.FC
        return op(self.input_record.field_blobs() + params, outputs, axis=self.axis, **self.kwargs)

    def _add_ops(self, net: Any, params: list[Any], version: str = "fp32") -> None:
        if self.clip_args is not None:
            clipped = [net.NextScopedBlob(f"clipped_{p}") for p in params]
            for p, cp in zip(params, clipped):
                net.Clip([p], [cp], **self.clip_args)
            params = clipped
        if self.output_dim_vec is None or len(self.output_dim_vec) == 1:
            self._insert_fc_ops(net, params, self.output_schema.field_blobs(), version)
            return
        half = len(params) // 2
        parts = [
            self._insert_fc_ops(net, [w, b], [net.NextScopedBlob(f"output_sub_{i}")], version)
            for i, (w, b) in enumerate(zip(params[:half], params[half:]))
        ]
        out = self.output_schema.field_blobs()
        net.Concat(parts, out + [out[0] + "_concat_dims"])

    def add_ops(self, net: Any) -> None:
        """Prediction and evaluation (at the arg-scoped predictor precision)."""
        self._add_ops(net, self.param_blobs, _scoped_fc_version())

    def add_train_ops(self, net: Any) -> None:
        self._add_ops(net, self.train_param_blobs, "fp32")

    def get_fp16_compatible_parameters(self) -> list[Any]:
        return [self.w] if self.output_dim_vec is None or len(self.output_dim_vec) == 1 else self.w_vec

    @property
    def param_blobs(self) -> list[Any]:
        if self.output_dim_vec is None or len(self.output_dim_vec) == 1:
            return [self.w, self.b]
        return self.w_vec + self.b_vec


def _clip_args(clip_param: Any) -> dict[str, float] | None:
    if clip_param is None:
        return None
    if len(clip_param) != 2:
        raise LayerError("clip_param must be a tuple / list (clip_min, clip_max)")
    lo, hi = clip_param
    if lo is None and hi is None:
        raise LayerError("clip_min and clip_max in clip_param cannot both be None")
    if lo is not None and hi is not None and not lo < hi:
        raise LayerError("clip_param = [clip_min, clip_max] must have clip_min < clip_max")
    return {k: v for k, v in (("min", lo), ("max", hi)) if v is not None}


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
