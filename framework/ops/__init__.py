"""Operators: registry and schemas, the Operator base, gradient makers (the
machinery, at this level), and one package per op family (``math``, ``nn``,
``tensor``, ``training``, ``io``...), as in Caffe2's operator catalogue. Importing a family package registers
its ops; ``framework.ops.families`` imports each on the first look-up of one of its types.
"""

from framework.memory.serialize import add_blob_type_loader
from framework.ops import families, registry
from framework.ops.gradient import GradientSlice, get_gradient_for_op
from framework.ops.operator import Operator
from framework.ops.registry import all_schemas, get_schema, has_op, register_op, registered_ops, schema_of

add_blob_type_loader(families.ensure_blob_type)

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
    assert schema.operator_class is not None, "a registered schema names its operator class"
    return schema.operator_class(op_def, ws, index)
