"""Global constants of ``LayerModelHelper``: blobs (``ONE``, ``ZERO``, ``ZERO_RANGE`` and any a
layer adds) whose initializers go into every init net the model creates."""

from __future__ import annotations

from typing import Any

import numpy as np

from framework import core
from framework.caffe2.python import utils as _utils
from framework.caffe2.python.layers import layers

OpAlmostEqual = _utils.OpAlmostEqual

__all__ = ["GlobalConstantsMixin"]

_GIVEN_TENSOR_FILL = {
    np.dtype(np.int32): "GivenTensorIntFill",
    np.dtype(np.int64): "GivenTensorInt64Fill",
    np.dtype(np.bool_): "GivenTensorBoolFill",
}


def _given_tensor_initializer(array: Any, dtype: Any) -> Any:
    array = np.array(array) if dtype is None else np.array(array, dtype=dtype)
    if array.dtype.kind in "US":
        op_type = "GivenTensorStringFill"
    else:
        op_type = _GIVEN_TENSOR_FILL.get(array.dtype, "GivenTensorFill")

    def initializer(blob_name: Any) -> Any:
        return core.CreateOperator(op_type, [], blob_name, shape=list(array.shape), values=array.flatten().tolist())

    return initializer


class GlobalConstantsMixin:
    """Needs ``self.net`` from the model."""

    # -- global constants --------------------------------------------------------------
    @staticmethod
    def _get_global_constant_initializer_op(
        blob_name: Any, array: Any = None, dtype: Any = None, initializer: Any = None
    ) -> Any:
        if array is not None:
            if initializer is not None:
                raise layers.LayerError("give either array or initializer for a global constant, not both")
            initializer = _given_tensor_initializer(array, dtype)
        elif initializer is None:
            raise layers.LayerError("a global constant needs an array or an initializer")
        return initializer(blob_name)

    def add_global_constant(self, name: str, array: Any = None, dtype: Any = None, initializer: Any = None) -> Any:
        """A constant blob created by every init net of this model; returns its (unique) blob name."""
        if not isinstance(name, str):
            raise layers.LayerError(f"global constant name must be a string, got {name!r}")
        if name in self.global_constants:
            raise layers.LayerError(f"{name} already added in global_constants")
        blob_name = self.net.NextBlob(name)
        self.global_constants[name] = blob_name
        op = self._get_global_constant_initializer_op(blob_name, array, dtype, initializer)
        if blob_name in self.global_constant_initializers:
            raise layers.LayerError(f"blob {blob_name} already has an initializer")
        self.global_constant_initializers[blob_name] = op
        return blob_name

    def maybe_add_global_constant(self, name: str, *args: Any, **kwargs: Any) -> Any:
        """``add_global_constant`` unless ``name`` exists; then its initializer must match."""
        if name in self.global_constants:
            blob_name = self.global_constants[name]
            op = self._get_global_constant_initializer_op(blob_name, *args, **kwargs)
            previous = self.global_constant_initializers[blob_name]
            if not OpAlmostEqual(op, previous, "debug_info"):
                raise layers.LayerError(f"conflicting initializers for global constant {blob_name}: {previous} vs {op}")
            return blob_name
        return self.add_global_constant(name, *args, **kwargs)

    def _init_global_constants(self) -> None:
        self.global_constants: dict[str, Any] = {}
        self.global_constant_initializers: dict[Any, Any] = {}
        self.add_global_constant("ONE", 1.0)
        self.add_global_constant("ZERO", 0.0)
        self.add_global_constant("ZERO_RANGE", [0, 0], dtype="int32")

    def _add_global_constants(self, init_net: Any) -> None:
        init_net.Proto().op.extend(list(self.global_constant_initializers.values()))

    def create_init_net(self, name: str) -> Any:
        """A new net holding the initializers of the global constants."""
        init_net = core.Net(name)
        self._add_global_constants(init_net)
        return init_net
