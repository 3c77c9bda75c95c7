"""``SamplingTrainableMixin``: a layer whose training ops may use other parameter blobs than its
prediction ops (``SamplingTrain`` gathers sampled rows of the weights into ``<w>_sampled`` blobs
and sets them as ``train_param_blobs``). Subclasses define ``param_blobs`` and ``_add_ops(net, params)``."""

from __future__ import annotations

from typing import Any

from framework.caffe2.python.layers.layers import LayerError

__all__ = ["SamplingTrainableMixin"]


class SamplingTrainableMixin:
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._train_param_blobs: list[Any] | None = None
        self._train_param_blobs_frozen = False

    @property
    def param_blobs(self) -> list[Any]:
        """The parameter blobs the prediction ops read."""
        raise NotImplementedError

    @property
    def train_param_blobs(self) -> list[Any]:
        """The parameter blobs the training ops read (``param_blobs`` unless set once before)."""
        if self._train_param_blobs is None:
            self.train_param_blobs = self.param_blobs
        return self._train_param_blobs

    @train_param_blobs.setter
    def train_param_blobs(self, blobs: list[Any]) -> None:
        if self._train_param_blobs_frozen:
            raise LayerError("train_param_blobs can be set only once")
        if blobs is None:
            raise LayerError("train_param_blobs cannot be None")
        self._train_param_blobs_frozen = True
        self._train_param_blobs = blobs

    def _add_ops(self, net: Any, param_blobs: list[Any]) -> None:
        raise NotImplementedError

    def add_ops(self, net: Any) -> None:
        self._add_ops(net, self.param_blobs)

    def add_train_ops(self, net: Any) -> None:
        self._add_ops(net, self.train_param_blobs)
