"""``ArcCosineFeatureMap``: the generalized arc-cosine kernel feature map (Cho & Saul, NIPS 2009):
``H(x) x^s`` of ``x = W x_orig + b`` with random, by default untrained, W ~ N(0, stddev^2) and
b ~ U(-stddev/2, stddev/2), ``stddev = scale * sqrt(1 / input_dims)``. ``s = 0``: Relu(Softsign(x));
``s = 1``: Relu(x); ``s >= 2``: Relu(x) * x^(s-1). With ``set_weight_as_global_constant`` the random
W and b are drawn here (numpy) and held as global constants, the same in every instance."""

from __future__ import annotations

from typing import Any

import numpy as np

from framework.caffe2.python import schema
from framework.caffe2.python.layers.layers import LayerError, ModelLayer

__all__ = ["ArcCosineFeatureMap"]


class ArcCosineFeatureMap(ModelLayer):
    def __init__(
        self, model: Any, input_record: Any, output_dims: int, s: int = 1, scale: float = 1.0,
        weight_init: Any = None, bias_init: Any = None, weight_optim: Any = None, bias_optim: Any = None,
        set_weight_as_global_constant: bool = False, initialize_output_schema: bool = True,
        name: str = "arc_cosine_feature_map", **kwargs: Any,
    ) -> None:  # fmt: skip
        super().__init__(model, name, input_record, **kwargs)
        if not isinstance(input_record, schema.Scalar):
            raise LayerError(f"{type(self).__name__}: incorrect input type {input_record!r} (a Scalar expected)")
        self.params = []
        self.model = model
        self.set_weight_as_global_constant = set_weight_as_global_constant
        self.input_dims = input_record.field_type().shape[0]
        if self.input_dims < 1:
            raise LayerError(f"expected input dimensions >= 1, got {self.input_dims}")
        if initialize_output_schema:
            self.output_schema = schema.Scalar((np.float32, (output_dims,)), model.net.NextScopedBlob(name + "_output"))
        self.output_dims = output_dims
        if output_dims < 1:
            raise LayerError(f"expected output dimensions >= 1, got {output_dims}")
        if not isinstance(s, int) or s < 0:
            raise LayerError(f"expected s to be an int >= 0, got {s!r}")
        self.s = s
        if scale <= 0.0:
            raise LayerError(f"expected scale > 0, got {scale}")
        self.stddev = scale * np.sqrt(1.0 / self.input_dims)
        if set_weight_as_global_constant:
            w = np.random.normal(scale=self.stddev, size=(self.output_dims, self.input_dims))
            b = np.random.uniform(low=-0.5 * self.stddev, high=0.5 * self.stddev, size=self.output_dims)
            self.random_w = self.model.add_global_constant(name=self.name + "_fixed_rand_W", array=w)
            self.random_b = self.model.add_global_constant(name=self.name + "_fixed_rand_b", array=b)
        else:
            self.random_w, self.random_b = self._initialize_params(
                "random_w", "random_b", w_init=weight_init, b_init=bias_init, w_optim=weight_optim,
                b_optim=bias_optim,
            )  # fmt: skip

    def _initialize_params(
        self, w_name: str, b_name: str, w_init: Any = None, b_init: Any = None, w_optim: Any = None,
        b_optim: Any = None,
    ) -> list[Any]:  # fmt: skip
        """Weight (GaussianFill std=stddev) and bias (UniformFill +-stddev/2) parameters; no
        optimizer unless given."""
        w_init = w_init or ("GaussianFill", {"mean": 0.0, "std": self.stddev})
        b_init = b_init or ("UniformFill", {"min": -0.5 * self.stddev, "max": 0.5 * self.stddev})
        w = self.create_param(w_name, (self.output_dims, self.input_dims), w_init, w_optim or self.model.NoOptim)
        b = self.create_param(b_name, [self.output_dims], b_init, b_optim or self.model.NoOptim)
        return [w, b]

    def _heaviside_with_power(self, net: Any, features: Any, output_blob: Any, s: int) -> Any:
        if s == 0:
            softsign = net.Softsign([features], net.NextScopedBlob("softsign"))
            return net.Relu(softsign, output_blob)
        if s == 1:
            return net.Relu([features], output_blob)
        relu = net.Relu([features], net.NextScopedBlob("relu_rand"))
        power = net.Pow([features], net.NextScopedBlob("pow_rand"), exponent=float(s - 1))
        return net.Mul([relu, power], output_blob)

    def add_ops(self, net: Any) -> None:
        features = net.FC(
            self.input_record.field_blobs() + [self.random_w, self.random_b], net.NextScopedBlob("random_features")
        )
        self._heaviside_with_power(net, features, self.output_schema.field_blobs(), self.s)
