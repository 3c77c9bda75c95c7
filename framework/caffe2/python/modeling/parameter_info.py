"""``ParameterInfo``: one trainable (or computed) parameter of a model, as Caffe2's
``caffe2.python.modeling.parameter_info``.

>>> from framework import core
>>> info = ParameterInfo(0, core.BlobReference("fc_w"), shape=[2, 3])
>>> info.name, int(info.size), info.length, info.grad_type()
('fc_w', 6, 1, None)
"""

from __future__ import annotations

from typing import Any

import numpy as np

from framework.errors import FrameworkError

__all__ = ["ParameterInfo", "ParameterTags", "ParameterType"]


class ParameterTags:
    """Tags a parameter carries: weights and biases are trained; computed params (running means...) are not."""

    BIAS = "BIAS"
    WEIGHT = "WEIGHT"
    COMPUTED_PARAM = "COMPUTED_PARAM"


class ParameterType:
    """The kind of a parameter's gradient."""

    DENSE = "dense"
    SPARSE = "sparse"


class ParameterInfo:
    """A parameter blob with its id, shape, gradient and optional copies in other precisions.

    ``blob_copy`` maps a ``TensorProto.DataType`` to the blob holding the parameter in that precision
    (the fp32 master copy of an fp16 parameter). ``optimizer`` can be set once (by ``create_param`` from
    the ``OptimizerContext``); setting it twice raises. ``tags`` records the ``ParameterTags`` given to
    ``create_param`` (not in Caffe2, where the model keeps them in separate lists).
    """

    def __init__(
        self,
        param_id: int | None,
        param: Any,
        key: Any = None,
        shape: Any = None,
        length: int | None = None,
        grad: Any = None,
        blob_copy: dict[int, Any] | None = None,
        tags: Any = None,
    ) -> None:
        self.param_id = param_id
        self.name = str(param)
        self.blob = param
        self.key = key
        self.shape = None if shape is None else list(shape)
        self.size = None if shape is None else int(np.prod(shape))
        self.length = max(1, length if length is not None else 1)
        self.grad = grad
        self.blob_copy = blob_copy
        self.tags = [tags] if isinstance(tags, str) else list(tags or [])
        self._optimizer: Any = None
        self.regularizer: Any = None

    def grad_type(self) -> str | None:
        """``ParameterType.SPARSE`` for a GradientSlice gradient, ``DENSE`` for a blob, None without one."""
        from framework.ops.gradient import GradientSlice

        if self.grad is None:
            return None
        return ParameterType.SPARSE if isinstance(self.grad, GradientSlice) else ParameterType.DENSE

    @property
    def param(self) -> Any:
        return self.blob

    @property
    def parameter(self) -> Any:
        return self.blob

    @property
    def optimizer(self) -> Any:
        return self._optimizer

    @optimizer.setter
    def optimizer(self, value: Any) -> None:
        if self._optimizer is not None:
            raise FrameworkError(f"parameter '{self.name}': its optimizer has already been set")
        self._optimizer = value

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"ParameterInfo({self.name!r}, shape={self.shape}, grad={self.grad!s})"
