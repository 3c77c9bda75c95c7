"""``HomotopyWeight``: ``alpha x + beta y`` of two scalars, moving from x to y as training goes.

``lr = LearningRate(iter, policy="inv", gamma, power, base_lr=1)`` = ``(1 + gamma iter)^-power``
with, as Caffe2 solves them, ``x = t (1 + sqrt 2) / 2 - sqrt 2`` for ``t = quad_life / half_life``
(``quad_life > 2 half_life``), ``gamma = (x - 1) / half_life`` and ``power = log 2 / log x``, so
lr is 1/2 at ``half_life``; with ``s = max_weight - min_weight``, ``alpha = s lr + min_weight`` and
``beta = s (1 - lr) + min_weight``: alpha falls from max_weight to min_weight, beta rises, and
``alpha + beta = max_weight + min_weight`` (Caffe2 2020; Caffe2 2018 left out ``s``, the same for the
default weights 0 and 1). The iteration is the layer's own atomic counter (stepped by each run) or
``atomic_iter`` if given."""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from framework import core
from framework.caffe2.python import schema
from framework.caffe2.python.layers.layers import LayerError, ModelLayer

__all__ = ["HomotopyWeight"]

logger = logging.getLogger(__name__)


class HomotopyWeight(ModelLayer):
    def __init__(
        self, model: Any, input_record: Any, name: str = "homotopy_weight", min_weight: float = 0.0,
        max_weight: float = 1.0, half_life: float = 1e6, quad_life: float = 3e6, atomic_iter: Any = None,
        **kwargs: Any,
    ) -> None:  # fmt: skip
        super().__init__(model, name, input_record, **kwargs)
        self.output_schema = schema.Scalar(np.float32, self.get_next_blob_reference("homotopy_weight"))
        data = self.input_record.field_blobs()
        if len(data) != 2:
            raise LayerError(f"HomotopyWeight takes two inputs, got {len(data)}")
        self.x, self.y = data
        self.use_external_iter = atomic_iter is not None
        self.atomic_iter = atomic_iter if self.use_external_iter else self.create_atomic_iter()
        if max_weight <= min_weight:
            raise LayerError(f"HomotopyWeight: max_weight {max_weight} must exceed min_weight {min_weight}")
        self.scale = float(max_weight - min_weight)
        self.offset = self.model.add_global_constant(f"{self.name}_offset_1dfloat", float(min_weight))
        self.gamma, self.power = self.solve_inv_lr_params(half_life, quad_life)

    def solve_inv_lr_params(self, half_life: float, quad_life: float) -> tuple[float, float]:
        """gamma and power of the ``inv`` learning-rate policy (see module doc)."""
        if half_life <= 0:
            raise LayerError(f"HomotopyWeight: half_life must be > 0, got {half_life}")
        if quad_life <= 2 * half_life:
            raise LayerError(f"HomotopyWeight: quad_life {quad_life} must exceed 2 * half_life {half_life}")
        t = float(quad_life) / float(half_life)
        x = t * (1.0 + np.sqrt(2.0)) / 2.0 - np.sqrt(2.0)
        gamma = (x - 1.0) / float(half_life)
        power = np.log(2.0) / np.log(x)
        logger.info("homotopy_weighting: found lr param: gamma=%g, power=%g", gamma, power)
        return gamma, power

    def create_atomic_iter(self) -> Any:
        self.mutex = self.create_param(f"{self.name}_mutex", None, ("CreateMutex",), self.model.NoOptim)
        self.atomic_iter = self.create_param(
            f"{self.name}_atomic_iter", [1], ("ConstantFill", {"value": 0, "dtype": core.DataType.INT64}),
            self.model.NoOptim,
        )  # fmt: skip
        return self.atomic_iter

    def update_weight(self, net: Any) -> tuple[Any, Any]:
        alpha, beta = net.NextScopedBlob("alpha"), net.NextScopedBlob("beta")
        lr, comp_lr = net.NextScopedBlob("lr"), net.NextScopedBlob("complementary_lr")
        scaled_lr, scaled_comp_lr = net.NextScopedBlob("scaled_lr"), net.NextScopedBlob("scaled_complementary_lr")
        if not self.use_external_iter:
            net.AtomicIter([self.mutex, self.atomic_iter], [self.atomic_iter])
        net.LearningRate([self.atomic_iter], [lr], policy="inv", gamma=self.gamma, power=self.power, base_lr=1.0)
        net.Sub([self.model.global_constants["ONE"], lr], [comp_lr])
        net.Scale([lr], [scaled_lr], scale=self.scale)
        net.Scale([comp_lr], [scaled_comp_lr], scale=self.scale)
        net.Add([scaled_lr, self.offset], [alpha])
        net.Add([scaled_comp_lr, self.offset], [beta])
        return alpha, beta

    def add_ops(self, net: Any) -> None:
        alpha, beta = self.update_weight(net)
        net.WeightedSum([self.x, alpha, self.y, beta], self.output_schema())
