"""Helpers shared by the loss layers."""

from __future__ import annotations

from typing import Any

import numpy as np

from framework import core
from framework.caffe2.python import schema
from framework.caffe2.python.layers.layers import LayerError

__all__ = ["require_fields", "stopped_float_weight"]


def require_fields(layer: str, record: Any, *fields: tuple[str, Any]) -> None:
    """Raise ValueError unless ``record`` has every named field."""
    needed = schema.Struct(*fields)
    if not isinstance(record, schema.Struct) or not schema.is_schema_subset(needed, record):
        names = record.field_names() if isinstance(record, schema.Field) else record
        raise LayerError(f"{layer}: input record needs fields {[f[0] for f in fields]}, got {names}")


def stopped_float_weight(net: Any, record: Any) -> Any:
    """``record.weight`` cast to float32 (when it is not) behind a StopGradient."""
    weight = record.weight()
    if record.weight.field_type().base != np.float32:
        weight = net.Cast(weight, weight + "_float32", to=core.DataType.FLOAT)
    return net.StopGradient([weight], [net.NextScopedBlob("weight_stop_gradient")])
