"""Operators: registry and schemas, the Operator base, gradient makers, and
one module per op family. Every op module is imported here by name, which is
what registers its ops.
"""

from framework.ops import registry
from framework.ops.gradient import GradientSlice, get_gradient_for_op
from framework.ops.operator import Operator
from framework.ops.registry import all_schemas, get_schema, has_op, register_op, registered_ops

# Op families: each import registers its ops. Keep one line per module.
from framework.ops import (  # noqa: E402,F401  isort:skip
    activations,
    adaptive,
    arithmetic,
    batch_norm,
    concat_split,
    conv,
    conv_transpose,
    data_movement,
    db_input,
    distances,
    dropout,
    fc,
    fills,
    image,
    layer_norm,
    load_save,
    logical,
    losses,
    matmul,
    nary,
    normalization,
    optimizers,
    pool,
    random_fills,
    reduce,
    reductions,
    sgd,
    shape_ops,
    smooth_activations,
    softmax,
    summarize,
    training,
    unary,
    upsample,
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
    schema = get_schema(op_def.type)
    return schema.operator_class(op_def, ws, index)
