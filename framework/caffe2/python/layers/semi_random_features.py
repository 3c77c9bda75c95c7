"""``SemiRandomFeatures``: semi-random kernel features (Kar & Karnick, arXiv:1702.08882):
``full = H(x_rand) x_rand^s * x_learned`` where ``x_rand`` is the input through an FC with random
fixed parameters (as ArcCosineFeatureMap, scaled by ``scale_random``) and ``x_learned`` through an
FC with learned ones (scaled by ``scale_learned``). Input: a Scalar, or a Struct with ``full`` and
``random`` Scalars (stacking layers). Output Struct: ``full`` and ``random`` (the processed random
features)."""

from __future__ import annotations

from typing import Any

import numpy as np

from framework.caffe2.python import schema
from framework.caffe2.python.layers.arc_cosine_feature_map import ArcCosineFeatureMap
from framework.caffe2.python.layers.layers import LayerError

__all__ = ["SemiRandomFeatures"]


class SemiRandomFeatures(ArcCosineFeatureMap):
    def __init__(
        self, model: Any, input_record: Any, output_dims: int, s: int = 1, scale_random: float = 1.0,
        scale_learned: float = 1.0, weight_init_random: Any = None, bias_init_random: Any = None,
        weight_init_learned: Any = None, bias_init_learned: Any = None, weight_optim: Any = None,
        bias_optim: Any = None, set_weight_as_global_constant: bool = False, name: str = "semi_random_features",
        **kwargs: Any,
    ) -> None:  # fmt: skip
        if isinstance(input_record, schema.Struct):
            if "full" not in input_record or "random" not in input_record:
                raise LayerError("SemiRandomFeatures: a Struct input needs 'full' and 'random' fields")
            self.input_record_full = input_record.full
            self.input_record_random = input_record.random
        elif isinstance(input_record, schema.Scalar):
            self.input_record_full = self.input_record_random = input_record
        else:
            raise LayerError(f"SemiRandomFeatures: incorrect input type {input_record!r}")
        super().__init__(
            model, self.input_record_full, output_dims, s=s, scale=scale_random, weight_init=weight_init_random,
            bias_init=bias_init_random, weight_optim=None, bias_optim=None,
            set_weight_as_global_constant=set_weight_as_global_constant, initialize_output_schema=False, name=name,
            **kwargs,
        )  # fmt: skip
        self.output_schema = schema.Struct(
            ("full", schema.Scalar((np.float32, output_dims), model.net.NextScopedBlob(name + "_full_output"))),
            ("random", schema.Scalar((np.float32, output_dims), model.net.NextScopedBlob(name + "_random_output"))),
        )
        if scale_learned <= 0.0:
            raise LayerError(f"expected scale (learned) > 0, got {scale_learned}")
        self.stddev = scale_learned * np.sqrt(1.0 / self.input_dims)
        self.learned_w, self.learned_b = self._initialize_params(
            "learned_w", "learned_b", w_init=weight_init_learned, b_init=bias_init_learned, w_optim=weight_optim,
            b_optim=bias_optim,
        )  # fmt: skip

    def add_ops(self, net: Any) -> None:
        learned = net.FC(
            self.input_record_full.field_blobs() + [self.learned_w, self.learned_b],
            net.NextScopedBlob("learned_features"),
        )
        random = net.FC(
            self.input_record_random.field_blobs() + [self.random_w, self.random_b],
            net.NextScopedBlob("random_features"),
        )
        processed = self._heaviside_with_power(net, random, self.output_schema.random.field_blobs(), self.s)
        net.Mul([processed, learned], self.output_schema.full.field_blobs())
