"""``workspace.FillRandomNetworkInputs``: random values for the blobs a net reads but no op of it writes.

``FillRandomNetworkInputs(net, input_dims, input_types)``: ``input_dims[k]`` / ``input_types[k]`` describe the
k-th op (in net order) that reads at least one such blob, one shape and one type name per such input (in
input order); the blobs are created in the current workspace. Values are uniform in [0, 1) for ``float`` /
``double``, and 0 or 1 for the integer types (``int8_t``, ``int16_t``, ``int32_t``/``int``, ``int64_t``/``long``,
``uint8_t``/``unsigned char``, ``uint16_t``) and for ``bool`` (stored as uint8), as Caffe2's default
TensorFiller. A count that does not match is a ``FrameworkError`` (a RuntimeError) naming the op; an
unknown type name is a ValueError.

Departure: Caffe2 asked each op's schema for input fillers (a few sparse ops bound lengths and indices by
the other inputs); here every input gets the default filler.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from framework.errors import FrameworkError

__all__ = ["FillRandomNetworkInputs"]

_TYPES = {
    "float": np.float32,
    "double": np.float64,
    "uint8_t": np.uint8,
    "unsigned char": np.uint8,
    "uint16_t": np.uint16,
    "int8_t": np.int8,
    "int16_t": np.int16,
    "int32_t": np.int32,
    "int": np.int32,
    "int64_t": np.int64,
    "long": np.int64,
    "bool": np.uint8,
}


def _random(shape: Sequence[int], type_name: str, rng: np.random.Generator) -> np.ndarray:
    if type_name not in _TYPES:
        raise ValueError(f"filler does not support type {type_name}")
    dtype = np.dtype(_TYPES[type_name])
    shape = tuple(int(d) for d in shape)
    if dtype.kind == "f":
        return rng.random(shape).astype(dtype)
    return rng.integers(0, 2, size=shape).astype(dtype)


def FillRandomNetworkInputs(net: Any, input_dims: Sequence[Any], input_types: Sequence[Any]) -> None:
    from framework.caffe2.python import workspace

    proto = net.Proto() if hasattr(net, "Proto") else net
    written = {o for op in proto.op for o in op.output}
    needing = [(i, op) for i, op in enumerate(proto.op) if any(b not in written for b in op.input)]
    if len(input_dims) != len(needing) or len(input_types) != len(needing):
        raise FrameworkError(
            f"FillRandomNetworkInputs: net '{proto.name}' has {len(needing)} op(s) reading inputs no op writes; "
            f"got {len(input_dims)} dims list(s) and {len(input_types)} type list(s)"
        )
    values: dict[str, np.ndarray] = {}
    rng = np.random.default_rng()
    for (i, op), dims, types in zip(needing, input_dims, input_types):
        names = [b for b in op.input if b not in written]
        if len(dims) != len(names) or len(types) != len(names):
            raise FrameworkError(
                f"FillRandomNetworkInputs: op #{i} {op.type} '{op.name}' has {len(names)} required input(s) "
                f"({', '.join(names)}); got {len(dims)} dims and {len(types)} types"
            )
        for name, shape, type_name in zip(names, dims, types):
            values[name] = _random(shape, type_name, rng)
    for name, value in values.items():  # every count checked before any blob is written
        workspace.FeedBlob(name, value)
