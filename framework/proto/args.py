"""Python values -> Argument protos, exactly as Caffe2's utils.MakeArgument.

float -> f; int/bool -> i; str/bytes -> s; NetDef -> n; other message -> s
(serialized); lists -> floats/ints/strings/nets; numpy arrays flattened first.

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


def make_argument(key: str, value: Any) -> Argument:
    arg = Argument(name=key)
    if isinstance(value, np.ndarray):
        value = value.flatten().tolist()
    elif isinstance(value, np.generic):
        value = value.item()
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
