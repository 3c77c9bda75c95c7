"""Parse an OperatorDef's Arguments once, against the op's schema.

Coercion between ``i`` and ``f`` is lossless or an error (an int given for a
float argument is fine; 2.5 given for an int argument is not). Repeated
arguments read ``ints``/``floats``/``strings``; bulk ones (``Arg(array=True)``: a fill's values) become
one numpy array in one conversion, never a Python loop over the values. Undeclared arguments are kept
(``Args.extra``) and warned about once per op type, except the ones Caffe2
nets carry for engines we do not have.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Iterable

import numpy as np

from framework.errors import ArgumentError
from framework.ops.schema import (
    BOOL,
    FLOAT,
    FLOATS,
    INT,
    INTS,
    NET,
    NETS,
    STRING,
    STRINGS,
    TENSOR,
    OpSchema,
)
from framework.ops.validation import check_arg_value
from framework.proto.framework_pb2 import TensorProto
from framework.runtime.state import RUNTIME

log = logging.getLogger("framework.ops")

# Arguments Caffe2 nets set for GPU engines or tuning; accepted silently here.
STORAGE_ORDERS = ("NCHW", "NHWC", "")  # "" where an op picks a default by itself

IGNORED_ARGS = frozenset(
    {
        "use_cudnn",
        "cudnn_exhaustive_search",
        "exhaustive_search",
        "ws_nbytes_limit",
        "shared_buffer",
        "float16_compute",
        "deterministic",
        "init_params",
        "use_gpu_engine",
        "num_threads",
    }
)
_warned: set[tuple[str, str]] = RUNTIME.held("ops.arguments.warned", set)


class Args:
    """Parsed arguments: attributes for declared ones (defaults filled), ``extra`` for the rest."""

    def __init__(
        self, values: dict[str, Any], given: set[str], extra: dict[str, Any], num_inputs: int, num_outputs: int
    ) -> None:
        self.__dict__.update(values)
        self.given = given
        self.extra = extra
        self.num_inputs = num_inputs
        self.num_outputs = num_outputs

    if TYPE_CHECKING:  # the declared arguments are set as attributes from the schema, one class for all ops

        def __getattr__(self, name: str) -> Any: ...

    def has(self, name: str) -> bool:
        """True if the OperatorDef set ``name`` explicitly."""
        return name in self.given or name in self.extra

    def get(self, name: str, default: Any = None) -> Any:
        if name in self.__dict__:
            return self.__dict__[name]
        return self.extra.get(name, default)

    def __repr__(self) -> str:
        vals = {k: v for k, v in self.__dict__.items() if k not in ("given", "extra")}
        return f"Args({vals})"


def raw_value(arg: Any) -> Any:
    """The Python value an Argument proto holds, by the field that is set."""
    if arg.HasField("f"):
        return arg.f
    if arg.HasField("i"):
        return arg.i
    if arg.HasField("s"):
        return arg.s
    if arg.HasField("n"):
        return arg.n
    if arg.HasField("t"):
        return arg.t
    if len(arg.floats):
        return list(arg.floats)
    if len(arg.ints):
        return list(arg.ints)
    if len(arg.strings):
        return list(arg.strings)
    if len(arg.nets):
        return list(arg.nets)
    if len(arg.tensors):
        return list(arg.tensors)
    return []  # an empty repeated argument


def _to_int(name: str, v: Any, where: str) -> int:
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, int):
        return v
    if isinstance(v, float) and v.is_integer():
        return int(v)
    raise ArgumentError(f"{where}: argument '{name}' must be an integer, got {v!r}")


def _to_float(name: str, v: Any, where: str) -> float:
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return float(v)
    raise ArgumentError(f"{where}: argument '{name}' must be a number, got {v!r}")


def _to_str(name: str, v: Any, where: str) -> str:
    if isinstance(v, bytes):
        try:
            return v.decode("utf-8")
        except UnicodeDecodeError as e:
            near = v[max(e.start - 8, 0) : e.start + 8]
            raise ArgumentError(f"{where}: argument '{name}' is not valid UTF-8 (byte {e.start}: {near!r})") from None
    if isinstance(v, str):
        return v
    raise ArgumentError(f"{where}: argument '{name}' must be a string, got {v!r}")


def _to_bytes(name: str, kind: str, v: Any, where: str) -> Any:
    """A STRING/STRINGS value of an ``Arg(raw_bytes=True)``: bytes kept as they are, str encoded to UTF-8."""

    def one(x: Any) -> bytes:
        if isinstance(x, bytes):
            return x
        if isinstance(x, str):
            return x.encode("utf-8")
        raise ArgumentError(f"{where}: argument '{name}' must be a byte string, got {x!r}")

    if kind == STRING:
        if isinstance(v, list):
            raise ArgumentError(f"{where}: argument '{name}' must be a single byte string, got a list")
        return one(v)
    return [one(x) for x in _as_list(v)]


def data_type_value(name: str, v: Any, where: str) -> Any:
    """``v`` with a TensorProto DataType name (str or bytes, any case) turned into its number, as
    Caffe2's cast::GetCastDataType; anything else is returned as it is (lists element by element)."""
    if isinstance(v, list):
        return [data_type_value(name, x, where) for x in v]
    if not isinstance(v, (bytes, str)):
        return v
    text = _to_str(name, v, where).upper()
    if text not in TensorProto.DataType.keys():
        raise ArgumentError(
            f"{where}: argument '{name}' = {text!r} is not a TensorProto DataType name "
            f"(one of {', '.join(TensorProto.DataType.keys())})"
        )
    return TensorProto.DataType.Value(text)


def _as_list(v: Any) -> list:
    return v if isinstance(v, list) else [v]


def convert(name: str, kind: str, v: Any, where: str) -> Any:
    if kind == INT:
        return _to_int(name, v, where)
    if kind == FLOAT:
        return _to_float(name, v, where)
    if kind == BOOL:
        return bool(_to_int(name, v, where))
    if kind == STRING:
        return _to_str(name, v, where)
    if kind == INTS:
        return [_to_int(name, x, where) for x in _as_list(v)]
    if kind == FLOATS:
        return [_to_float(name, x, where) for x in _as_list(v)]
    if kind == STRINGS:
        return [_to_str(name, x, where) for x in _as_list(v)]
    if kind in (NET, TENSOR):
        if isinstance(v, list):
            raise ArgumentError(f"{where}: argument '{name}' must be a single {kind}")
        return v
    if kind == NETS:
        return _as_list(v)
    raise ArgumentError(f"{where}: argument '{name}' has unknown kind {kind}")


def collect_protos(arg_protos: Iterable[Any], where: str) -> dict[str, Any]:
    """name -> Argument proto; duplicates with different content are an error."""
    protos: dict[str, Any] = {}
    for a in arg_protos:
        if a.name in protos:
            if protos[a.name] != a:
                raise ArgumentError(f"{where}: argument '{a.name}' is given twice with different values")
            log.warning("%s: argument '%s' is given twice (identical)", where, a.name)
            continue
        protos[a.name] = a
    return protos


def collect(arg_protos: Iterable[Any], where: str) -> dict[str, Any]:
    """name -> raw value; duplicates with different content are an error."""
    return {name: raw_value(a) for name, a in collect_protos(arg_protos, where).items()}


_INT64_BOUND = float(2**63)


def numeric_array(name: str, kind: str, arg: Any, where: str) -> np.ndarray:
    """A FLOATS or INTS argument as one 1-D array, converted from the proto's repeated field in C.

    FLOATS: float32 from ``floats`` (the field's own type: every bit kept, NaN payloads, -0.0 and
    denormals included), float64 from ``ints`` (as ``float(int)``). INTS: int64 from ``ints``; from
    ``floats`` only if every value is a whole number within int64. A single ``f``/``i``, an empty
    argument or a non-numeric field takes the one-value path (same values, same errors as any
    argument): float64 for FLOATS, int64 for INTS. Raises ArgumentError naming the first bad value.
    """
    single = arg.HasField("f") or arg.HasField("i") or arg.HasField("s") or arg.HasField("n") or arg.HasField("t")
    if not single and len(arg.floats):
        arr = np.array(arg.floats, dtype=np.float32)
        return _whole_numbers(name, arr, where) if kind == INTS else arr
    if not single and len(arg.ints):
        arr = np.array(arg.ints, dtype=np.int64)
        return arr.astype(np.float64) if kind == FLOATS else arr
    values = convert(name, kind, raw_value(arg), where)
    if kind == FLOATS:
        return np.array(values, dtype=np.float64)
    try:
        return np.array(values, dtype=np.int64)
    except OverflowError:
        raise ArgumentError(f"{where}: argument '{name}' must hold integers within int64, got {values!r}") from None


def _whole_numbers(name: str, arr: np.ndarray, where: str) -> np.ndarray:
    """``arr`` (float32) as int64 if every value is a whole number within int64, else ArgumentError."""
    with np.errstate(invalid="ignore"):
        bad = ~np.isfinite(arr) | (np.trunc(arr) != arr) | (arr >= _INT64_BOUND) | (arr < -_INT64_BOUND)
    if bad.any():
        v = float(arr[int(np.argmax(bad))])
        within = " within int64" if np.isfinite(v) and v.is_integer() else ""
        raise ArgumentError(f"{where}: argument '{name}' must be an integer{within}, got {v!r}")
    return arr.astype(np.int64)


def parse_args(schema: OpSchema, arg_protos: Iterable[Any], where: str, num_inputs: int, num_outputs: int) -> Args:
    """Parse ``arg_protos`` against ``schema``: fill defaults, check required ones, coerce types."""
    protos = collect_protos(arg_protos, where)
    values: dict[str, Any] = {}
    given: set[str] = set()
    for name, spec in schema.args.items():
        if name in protos:
            if spec.array:
                values[name] = numeric_array(name, spec.kind, protos.pop(name), where)
                given.add(name)
                continue
            value = raw_value(protos.pop(name))
            if spec.dtype_name:
                value = data_type_value(name, value, where)
            if spec.raw_bytes and spec.kind in (STRING, STRINGS):
                values[name] = _to_bytes(name, spec.kind, value, where)
            else:
                values[name] = convert(name, spec.kind, value, where)
            given.add(name)
            if spec.low is not None or spec.high is not None or spec.choices is not None:
                check_arg_value(where, name, values[name], spec.low, spec.high, spec.choices)
            elif name == "order" and spec.kind == STRING and values[name] not in STORAGE_ORDERS:
                # Caffe2's StringToStorageOrder knows these two; any other string is a mistake in the file.
                check_arg_value(where, name, values[name], None, None, STORAGE_ORDERS)
        elif spec.required:
            raise ArgumentError(f"{where}: argument '{name}' is required ({spec.doc or spec.kind})")
        else:
            d = spec.default
            values[name] = list(d) if isinstance(d, (list, tuple)) else d
            if spec.array:
                values[name] = np.array(values[name], dtype=np.float64 if spec.kind == FLOATS else np.int64)
    raw = {name: raw_value(a) for name, a in protos.items()}
    for name in raw:
        if name not in IGNORED_ARGS and (schema.type, name) not in _warned:
            _warned.add((schema.type, name))
            known = ", ".join(schema.args) or "none"
            log.warning("%s: unknown argument '%s' ignored (known: %s)", where, name, known)
    return Args(values, given, raw, num_inputs, num_outputs)
