"""Training-net assembly of ``LayerModelHelper``: net modifiers, regularizers and optimizers
applied to a generated training net (``layer_model_instantiator.generate_training_nets`` calls
these in order: regularizers on the loss, gradients, post-gradient modifiers, optimizers,
after-optimizer regularizers, final modifiers)."""

from __future__ import annotations

from typing import Any

from framework import core
from framework.caffe2.python import schema
from framework.caffe2.python.layers import layers
from framework.caffe2.python.regularizer import RegularizationBy, Regularizer

__all__ = ["TrainingAssemblyMixin"]


class TrainingAssemblyMixin:
    """Needs ``param_to_reg``, ``param_to_optim``, ``_post_grad_net_modifiers``,
    ``_final_net_modifiers`` and ``add_loss`` from the model."""

    def add_post_grad_net_modifiers(self, modifier: Any) -> None:
        if modifier in self._post_grad_net_modifiers:
            raise layers.LayerError(f"{modifier} is already in {self._post_grad_net_modifiers}")
        if not callable(modifier):
            raise layers.LayerError(f"{modifier} has to be a NetModifier")
        self._post_grad_net_modifiers.append(modifier)

    def add_final_net_modifiers(self, modifier: Any) -> None:
        if modifier in self._final_net_modifiers:
            raise layers.LayerError(f"{modifier} is already in {self._final_net_modifiers}")
        if not callable(modifier):
            raise layers.LayerError(f"{modifier} has to be a NetModifier")
        self._final_net_modifiers.append(modifier)

    # -- training-net assembly (used by layer_model_instantiator) ---------------------
    def apply_regularizers_on_loss(self, train_net: Any, train_init_net: Any, blob_to_device: Any = None) -> None:
        """Add each before-optimizer regularizer's term to the loss."""
        for param, regularizer in self.param_to_reg.items():
            if regularizer is None:
                continue
            if not isinstance(regularizer, Regularizer):
                raise layers.LayerError(f"parameter {param}: {regularizer!r} is not a Regularizer")
            added = regularizer(train_net, train_init_net, param, grad=None, by=RegularizationBy.ON_LOSS)
            if added is not None:
                self.add_loss(schema.Scalar(blob=added), str(added))

    def apply_regularizers_after_optimizer(
        self, train_net: Any, train_init_net: Any, grad_map: dict, blob_to_device: Any = None
    ) -> None:
        for param, regularizer in self.param_to_reg.items():
            if regularizer is None:
                continue
            if not isinstance(regularizer, Regularizer):
                raise layers.LayerError(f"parameter {param}: {regularizer!r} is not a Regularizer")
            grad = grad_map.get(str(param))
            regularizer(train_net, train_init_net, param, grad=grad, by=RegularizationBy.AFTER_OPTIMIZER)

    def apply_post_grad_net_modifiers(
        self, trainer_net: Any, trainer_init_net: Any, grad_map: dict, blob_to_device: Any = None
    ) -> None:
        param_grad_map = {p: grad_map[p] for p in self.param_to_optim if p in grad_map}
        for modifier in self._post_grad_net_modifiers:
            modifier(trainer_net, trainer_init_net, param_grad_map, blob_to_device=blob_to_device)

    def apply_final_net_modifiers(
        self, trainer_net: Any, trainer_init_net: Any, grad_map: dict, blob_to_device: Any = None
    ) -> None:
        for modifier in self._final_net_modifiers:
            modifier(trainer_net, trainer_init_net, grad_map, blob_to_device=blob_to_device)

    def apply_optimizers(self, train_net: Any, train_init_net: Any, grad_map: dict, blob_to_device: Any = None) -> None:
        """Run each parameter's optimizer (under the parameter's device, CPU by default)."""
        blob_to_device = blob_to_device or {}
        cpu = core.DeviceOption(0)
        for param, optimizer in self.param_to_optim.items():
            if optimizer is None:
                raise layers.LayerError(f"parameter {param} has no optimizer and the model has no default_optimizer")
            device = blob_to_device.get(param, cpu)
            with core.DeviceScope(device):
                optimizer(train_net, train_init_net, param, grad_map.get(str(param)))
