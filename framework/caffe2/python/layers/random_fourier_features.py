"""``RandomFourierFeatures``: ``sqrt(2 / output_dims) * cos(W x + b)`` with fixed random
W ~ N(0, 1/sigma^2) and b ~ U(0, 2 pi) (Rahimi & Recht, NIPS 2007), approximating a Gaussian
kernel of bandwidth ``sigma``. W and b are never trained."""

from __future__ import annotations

from typing import Any

import numpy as np

from framework.caffe2.python import schema
from framework.caffe2.python.layers.layers import LayerError, ModelLayer

__all__ = ["RandomFourierFeatures"]


class RandomFourierFeatures(ModelLayer):
    def __init__(
        self, model: Any, input_record: Any, output_dims: int, sigma: float, w_init: Any = None, b_init: Any = None,
        name: str = "random_fourier_features", **kwargs: Any,
    ) -> None:  # fmt: skip
        super().__init__(model, name, input_record, **kwargs)
        if not isinstance(input_record, schema.Scalar):
            raise LayerError(f"RandomFourierFeatures: incorrect input type {input_record!r} (a Scalar expected)")
        input_dims = input_record.field_type().shape[0]
        if input_dims < 1:
            raise LayerError(f"expected input dimensions >= 1, got {input_dims}")
        self.output_dims = output_dims
        if output_dims < 1:
            raise LayerError(f"expected output dimensions >= 1, got {output_dims}")
        self.output_schema = schema.Scalar((np.float32, (output_dims,)), self.get_next_blob_reference("output"))
        if sigma <= 0.0:
            raise LayerError(f"expected bandwidth > 0, got {sigma}")
        w_init = w_init or ("GaussianFill", {"mean": 0.0, "std": 1.0 / sigma})
        b_init = b_init or ("UniformFill", {"min": 0.0, "max": 2 * np.pi})
        self.w = self.create_param("w", [output_dims, input_dims], w_init, model.NoOptim)
        self.b = self.create_param("b", [output_dims], b_init, model.NoOptim)

    def add_ops(self, net: Any) -> None:
        arg = net.FC(self.input_record.field_blobs() + [self.w, self.b], net.NextScopedBlob("cosine_arg"))
        features = net.Cos([arg], net.NextScopedBlob("new_feature_vec"))
        net.Scale([features], self.output_schema.field_blobs(), scale=np.sqrt(2.0 / self.output_dims))
