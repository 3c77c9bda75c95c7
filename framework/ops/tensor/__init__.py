"""Tensor ops: fills, shape and layout, copies and casts, slicing, concat and split.

``MODULES`` names every module that registers ops, one line each; ``framework.ops.families`` imports
them one by one as their op types are first looked up (importing this package registers nothing).
"""

MODULES = (
    "concat_split",
    "data_movement",
    "fills",
    "python_op",
    "random_fills",
    "regions_tt",
    "sampling_ops",
    "sequence_ops",
    "shape_ops",
    "stat_puts",
    "storage_ops",
    "strings",
    "stylizer",
    "tensor_utils",
)
