"""Operators: registry and schemas, the Operator base, gradient makers (the
machinery, at this level), and one package per op family (``math``, ``nn``,
``tensor``, ``training``, ``io``...), as in Caffe2's operator catalogue. Every
family package is imported here by name, which is what registers its ops.
"""

from framework.ops import registry
from framework.ops.gradient import GradientSlice, get_gradient_for_op
from framework.ops.operator import Operator
from framework.ops.registry import all_schemas, get_schema, has_op, register_op, registered_ops, schema_of

# Op families, one package each: importing a package registers its ops.
from framework.ops import (  # noqa: E402,F401  isort:skip
    control,
    detection,
    distributed,
    io,
    math,
    nn,
    onnx,
    quantized,
    rnn,
    sparse,
    tensor,
    training,
)

__all__ = [
    "GradientSlice",
    "Operator",
    "all_schemas",
    "create_operator",
    "get_gradient_for_op",
    "get_schema",
    "has_op",
    "register_op",
    "registered_ops",
    "registry",
]


def create_operator(op_def, ws, index=None) -> Operator:
    """Build the Operator for ``op_def`` bound to the blobs of ``ws``."""
    schema = schema_of(op_def)
    return schema.operator_class(op_def, ws, index)
