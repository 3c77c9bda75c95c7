"""OpSchema: everything the framework knows about an op type besides its kernel.

A schema gives input/output counts, in-place rules, documented inputs, outputs
and arguments (types, defaults), a shape-and-type inference function, an
optional cost function, and the gradient maker slot. Schemas are built by
``framework.ops.registry.register_op`` and queried with ``get_schema``.
"""

from __future__ import annotations

import builtins
from dataclasses import dataclass, field
from typing import Any, Callable, NamedTuple, Sequence

import numpy as np

# Argument kinds, as the Argument proto fields they read.
FLOAT, INT, BOOL, STRING = "float", "int", "bool", "string"
FLOATS, INTS, STRINGS = "floats", "ints", "strings"
NET, NETS, TENSOR = "net", "nets", "tensor"
ARG_KINDS = (FLOAT, INT, BOOL, STRING, FLOATS, INTS, STRINGS, NET, NETS, TENSOR)

REQUIRED = object()  # default marker for required arguments


@dataclass(frozen=True)
class Arg:
    """One documented argument: name, kind (see ARG_KINDS), default, doc."""

    name: str
    kind: str
    default: Any = None
    doc: str = ""
    # Checked when the op is created (ArgumentError naming op and argument); None = unchecked.
    low: Any = None
    high: Any = None
    choices: Any = None
    # INT/INTS holding TensorProto DataTypes: the type name ("FLOAT", b"int64") is accepted as well, as
    # Caffe2's cast::GetCastDataType (upper-cased), at run time and in shape inference alike.
    dtype_name: bool = False
    # STRING/STRINGS holding byte payloads (e.g. a tensor's bytes): the values stay ``bytes`` as given,
    # never decoded as UTF-8 (a ``str`` is encoded to UTF-8), at run time and in shape inference alike.
    raw_bytes: bool = False
    # FLOATS/INTS holding bulk data (a fill's values): delivered as one 1-D numpy array converted from the
    # Argument's repeated field in one step (see ``arguments.numeric_array``), never a list of Python numbers.
    array: bool = False

    @property
    def required(self) -> bool:
        return self.default is REQUIRED

    def __post_init__(self) -> None:
        if self.kind not in ARG_KINDS:
            raise ValueError(f"argument {self.name}: unknown kind {self.kind!r}; one of {ARG_KINDS}")
        if self.array and self.kind not in (FLOATS, INTS):
            raise ValueError(f"argument {self.name}: array=True needs kind floats or ints, not {self.kind!r}")
        if self.array and (self.low is not None or self.high is not None or self.choices is not None):
            raise ValueError(
                f"argument {self.name}: array=True values are checked by the op (vectorised), not by low/high"
            )


class TensorSpec(NamedTuple):
    """What shape inference knows of a blob: shape (None = unknown; a dim may be None) and dtype."""

    shape: tuple | None
    dtype: np.dtype | None

    @property
    def known(self) -> bool:
        return self.shape is not None and all(d is not None for d in self.shape)


UNKNOWN = TensorSpec(None, None)


class Cost(NamedTuple):
    flops: float = 0.0
    bytes_moved: float = 0.0
    params_bytes: float = 0.0


Count = int | tuple[int, float] | frozenset | Callable[[int], bool]


def _count_ok(spec: Any, n: int) -> bool:
    if isinstance(spec, int):
        return n == spec
    if isinstance(spec, tuple):
        return spec[0] <= n <= spec[1]
    if isinstance(spec, (set, frozenset)):
        return n in spec
    return bool(spec(n))


def _count_text(spec: Any) -> str:
    if isinstance(spec, int):
        return str(spec)
    if isinstance(spec, tuple):
        hi = "inf" if spec[1] == float("inf") else str(spec[1])
        return f"{spec[0]} to {hi}"
    if isinstance(spec, (set, frozenset)):
        return " or ".join(str(x) for x in sorted(spec))
    return getattr(spec, "__doc__", None) or "a count its schema accepts"


@dataclass
class OpSchema:
    """The schema of one op type."""

    type: str
    doc: str = ""
    num_inputs: Any = 1
    num_outputs: Any = 1
    inputs: Sequence[tuple[str, str]] = ()
    outputs: Sequence[tuple[str, str]] = ()
    args: dict[str, Arg] = field(default_factory=dict)
    # In-place: a set of (input, output) index pairs, "all" (any i->i), or a predicate(i, o).
    allow_inplace: Any = frozenset()
    enforce_inplace: Any = frozenset()
    infer: Callable | None = None  # (args, [TensorSpec]) -> [TensorSpec]
    cost: Callable | None = None  # (args, [TensorSpec], [TensorSpec]) -> Cost
    category: str = "misc"
    # Gradient slot: None (not declared yet), a maker callable, NO_GRADIENT or SHOULD_NOT_DO_GRADIENT.
    gradient: Any = None
    operator_class: builtins.type | None = None  # the field named ``type`` shadows the builtin here
    aliases: tuple[str, ...] = ()
    private: bool = False  # internal ops (gradient ops) are listed separately in docs
    # Input checks run by the Operator base before run() (framework.ops.validation).
    checks: tuple = ()
    # The values of in-place outputs are copied before run() and restored if it raises: for ops that may
    # fail after writing into an input's buffer (optimizer updates: a failed step leaves the state as it was).
    snapshot_inplace: bool = False

    def input_count_ok(self, n: int) -> bool:
        return _count_ok(self.num_inputs, n)

    def output_count_ok(self, n: int) -> bool:
        return _count_ok(self.num_outputs, n)

    def input_count_text(self) -> str:
        return _count_text(self.num_inputs)

    def output_count_text(self) -> str:
        return _count_text(self.num_outputs)

    def inplace_allowed(self, i: int, o: int) -> bool:
        a = self.allow_inplace
        if a == "all":
            return i == o
        if callable(a):
            return bool(a(i, o))
        return (i, o) in a or self.inplace_enforced(i, o)

    def inplace_enforced(self, i: int, o: int) -> bool:
        e = self.enforce_inplace
        if e == "all":
            return i == o
        if callable(e):
            return bool(e(i, o))
        return (i, o) in e

    def enforced_pairs(self, n_in: int, n_out: int) -> list[tuple[int, int]]:
        return [(i, o) for i in range(n_in) for o in range(n_out) if self.inplace_enforced(i, o)]

    def input_name(self, i: int) -> str:
        return self.inputs[i][0] if i < len(self.inputs) else f"input {i}"

    def output_name(self, i: int) -> str:
        return self.outputs[i][0] if i < len(self.outputs) else f"output {i}"


# -- common shape-inference functions -----------------------------------------


def same_as_input(i: int = 0) -> Callable:
    """Every output has input ``i``'s shape and type."""

    def infer(args: Any, ins: list[TensorSpec]) -> list[TensorSpec]:
        spec = ins[i] if i < len(ins) else UNKNOWN
        return [spec] * args.num_outputs

    infer.__doc__ = f"outputs are shaped and typed as input {i}"
    return infer


def scalar_of(dtype: Any) -> Callable:
    dt = np.dtype(dtype)

    def infer(args: Any, ins: list[TensorSpec]) -> list[TensorSpec]:
        return [TensorSpec((), dt)] * args.num_outputs

    return infer


def pointwise_cost(flops_per_element: float = 1.0) -> Callable:
    def cost(args: Any, ins: list[TensorSpec], outs: list[TensorSpec]) -> Cost:
        n = sum(_numel(s) for s in outs)
        moved = sum(_nbytes(s) for s in ins) + sum(_nbytes(s) for s in outs)
        return Cost(flops=flops_per_element * n, bytes_moved=moved)

    return cost


def _numel(spec: TensorSpec) -> int:
    if spec.shape is None or not spec.known:
        return 0
    n = 1
    for d in spec.shape:
        n *= d
    return n


def _nbytes(spec: TensorSpec) -> int:
    return _numel(spec) * (spec.dtype.itemsize if spec.dtype is not None else 0)


numel_of = _numel
nbytes_of = _nbytes
