"""``caffe2.python.functional``: call any operator as a function on numpy arrays.

``Functional.<OpType>(*inputs, num_output=None, **args)`` feeds ``inputs`` as ``input_0``, ``input_1``... into
a fresh workspace, runs one ``OpType`` op with ``args`` (``device_option`` included) writing ``output_0``...,
and returns the outputs as a namedtuple that also answers ``result["output_0"]``. The number of outputs is
``num_output`` when given, else the schema's (its fixed count, or the largest it allows; an op whose outputs
are unbounded needs ``num_output``). Outputs the schema forces in place take their input's name. A count
the schema refuses is a ``ValueError``, as in Caffe2; errors of the op itself propagate.

>>> import numpy as np
>>> Functional.Relu(np.array([-1.0, 2.0], np.float32)).output_0
array([0., 2.], dtype=float32)
"""

from __future__ import annotations

from collections import namedtuple
from typing import Any, Callable, Sequence

from framework import core
from framework.caffe2 import c_extension as C
from framework.ops import get_schema

__all__ = ["Functional", "namedtupledict"]

_INF = float("inf")


def namedtupledict(typename: str, field_names: Sequence[str], *args: Any, **kwargs: Any) -> type:
    """A namedtuple class whose items can also be read by field name (``t["0"]`` for a renamed field)."""
    index = {n: i for i, n in enumerate(field_names)}
    kwargs.setdefault("rename", True)  # output names need not be identifiers
    base = namedtuple(typename, field_names, *args, **kwargs)

    def getitem(self: Any, key: Any) -> Any:
        return tuple.__getitem__(self, index[key] if isinstance(key, str) else key)

    return type(typename, (base,), {"__getitem__": getitem, "__slots__": ()})


def _bounds(spec: Any) -> tuple[float, float]:
    if isinstance(spec, int):
        return spec, spec
    if isinstance(spec, tuple):
        return spec[0], spec[1]
    if isinstance(spec, (set, frozenset)):
        return min(spec), max(spec)
    return 0, _INF


def _output_count(schema: Any, op_type: str, n_in: int, num_output: int | None) -> int:
    lo, hi = _bounds(schema.num_outputs)
    if num_output is not None:
        if not schema.output_count_ok(num_output):
            raise ValueError(
                f"Functional C2: {op_type} takes {schema.output_count_text()} outputs, num_output={num_output}"
            )
        return int(num_output)
    if hi == _INF or callable(schema.num_outputs):
        raise ValueError(f"Functional C2: {op_type} has no fixed number of outputs: pass num_output")
    return int(hi)


def _call(op_type: str, inputs: Sequence[Any], args: dict[str, Any]) -> Any:
    schema = get_schema(op_type)
    n_in = len(inputs)
    if not schema.input_count_ok(n_in):
        raise ValueError(f"Functional C2: {op_type} takes {schema.input_count_text()} inputs, got {n_in}")
    in_names = [f"input_{i}" for i in range(n_in)]
    n_out = _output_count(schema, op_type, n_in, args.pop("num_output", None))
    out_names = [f"output_{j}" for j in range(n_out)]
    for i, j in schema.enforced_pairs(n_in, n_out):
        out_names[j] = in_names[i]
    op = core.CreateOperator(op_type, in_names, out_names, **args)
    ws = C.Workspace()
    for name, value in zip(in_names, inputs):
        ws.feed_blob(name, value)
    ws.run_operator_once(op)
    return namedtupledict("output", out_names)(*[ws.fetch_blob(n) for n in out_names])


class _Functional:
    def __getattr__(self, op_type: str) -> Callable[..., Any]:
        if op_type.startswith("__"):
            raise AttributeError(op_type)
        get_schema(op_type)  # an unknown op type fails here, with suggestions

        def op_func(*inputs: Any, **args: Any) -> Any:
            return _call(op_type, inputs, args)

        op_func.__name__ = op_type
        return op_func


Functional = _Functional()
