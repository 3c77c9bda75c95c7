"""Normalizers of a layer model's intermediate records (Caffe2's ``caffe2.python.normalizer``).

``norm(layer_model, record)`` adds a normalization layer to ``layer_model`` and returns its output:
``BatchNormalizer(momentum)`` a BatchNormalization layer, ``LayerNormalizer(epsilon,
use_layer_norm_op=True)`` a LayerNormalization layer.
"""

from __future__ import annotations

from typing import Any

__all__ = ["BatchNormalizer", "LayerNormalizer", "Normalizer"]


class Normalizer:
    """Base: subclasses define ``_run(layer_model, record)``."""

    def __call__(self, net: Any, param: Any) -> Any:
        return self._run(net, param)

    def _run(self, layer_model: Any, param: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} does not define _run")


class BatchNormalizer(Normalizer):
    def __init__(self, momentum: float) -> None:
        self._momentum = float(momentum)

    def _run(self, layer_model: Any, param: Any) -> Any:
        return layer_model.BatchNormalization(param, momentum=self._momentum)


class LayerNormalizer(Normalizer):
    def __init__(self, epsilon: float, use_layer_norm_op: bool = True) -> None:
        self._epsilon = float(epsilon)
        self._use_layer_norm_op = use_layer_norm_op

    def _run(self, layer_model: Any, param: Any) -> Any:
        return layer_model.LayerNormalization(param, epsilon=self._epsilon, use_layer_norm_op=self._use_layer_norm_op)
