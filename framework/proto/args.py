"""Python values -> Argument protos, exactly as Caffe2's utils.MakeArgument.

float -> f; int/bool -> i; str/bytes -> s; NetDef -> n; other message -> s
(serialized); lists -> floats/ints/strings/nets; numpy arrays flattened first
(a float array goes to ``floats`` as float32 in one conversion, a bool/int array to
``ints``, with no Python loop over the values).

>>> make_argument("axis", 1).i
1
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from framework.proto.framework_pb2 import Argument, NetDef, TensorProto


def _is_message(v: Any) -> bool:
    return hasattr(v, "SerializeToString") and hasattr(v, "DESCRIPTOR")


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        low, n = n & 0x7F, n >> 7
        out.append(low | (0x80 if n else 0))
        if not n:
            return bytes(out)


_FLOATS_PACKED = b"\x2a"  # Argument.floats: field 5, wire type 2 (packed; every parser accepts it)


def _array_argument(key: str, value: np.ndarray) -> Argument | None:
    """``value`` (a float, int or bool array) as ``floats``/``ints``; None for other dtypes."""
    kind = value.dtype.kind
    if kind == "f":
        with np.errstate(over="ignore", invalid="ignore"):  # float64 beyond float32 becomes inf, as a C cast
            payload = np.ascontiguousarray(value.reshape(-1), dtype="<f4").tobytes()
        head = Argument(name=key).SerializeToString()
        return Argument.FromString(head + _FLOATS_PACKED + _varint(len(payload)) + payload)
    if kind in "bi" or (kind == "u" and (value.size == 0 or int(value.max()) < 2**63)):
        arg = Argument(name=key)
        arg.ints.extend(value.reshape(-1).astype(np.int64).tolist())
        return arg
    return None


def make_argument(key: str, value: Any) -> Argument:
    if isinstance(value, np.ndarray):
        arg = _array_argument(key, value)
        if arg is not None:
            return arg
        value = value.flatten().tolist()
    elif isinstance(value, np.generic):
        value = value.item()
    arg = Argument(name=key)
    if isinstance(value, bool) or isinstance(value, int):
        arg.i = int(value)
    elif isinstance(value, float):
        arg.f = value
    elif isinstance(value, str):
        arg.s = value.encode("utf-8")
    elif isinstance(value, bytes):
        arg.s = value
    elif isinstance(value, NetDef):
        arg.n.CopyFrom(value)
    elif isinstance(value, TensorProto):
        arg.t.CopyFrom(value)
    elif _is_message(value):
        arg.s = value.SerializeToString()
    elif isinstance(value, Iterable) and not isinstance(value, (dict, str, bytes)):
        # any iterable, as Caffe2's MakeArgument (lists, tuples, range, generators, sets)
        items = [v.item() if isinstance(v, np.generic) else v for v in value]
        if all(isinstance(v, (int, bool)) for v in items):
            arg.ints.extend(int(v) for v in items)
        elif all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in items):
            arg.floats.extend(float(v) for v in items)
        elif all(isinstance(v, (str, bytes)) for v in items):
            arg.strings.extend(v.encode("utf-8") if isinstance(v, str) else v for v in items)
        elif all(isinstance(v, NetDef) for v in items):
            arg.nets.extend(items)
        elif all(isinstance(v, TensorProto) for v in items):
            arg.tensors.extend(items)
        elif all(_is_message(v) for v in items):
            arg.strings.extend(v.SerializeToString() for v in items)
        else:
            raise ValueError(f"argument '{key}': cannot make an Argument of a mixed list {value!r}")
    else:
        raise ValueError(f"argument '{key}': value of type {type(value).__name__} cannot become an Argument")
    return arg
