"""Tensor ops: fills, shape and layout, copies and casts, slicing, concat and split.

Each import below registers its module's ops; keep one line per module.
"""

from framework.ops.tensor import (  # noqa: F401
    concat_split,
    data_movement,
    fills,
    python_op,
    random_fills,
    regions_tt,
    sampling_ops,
    sequence_ops,
    shape_ops,
    stat_puts,
    storage_ops,
    strings,
    stylizer,
    tensor_utils,
)
