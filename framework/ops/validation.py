"""Input checks declared in an op's schema, run by the Operator base before ``run()``.

An op author declares what the inputs must be and writes only the maths:

    @register_op("Gather", inputs=2, input_types={1: "index"}, ranks={1: (0, None)},
                 axes={"axis": 0}, ...)

- ``input_types``: one kind for every input (``"float"``) or ``{input: kind}`` / a list by
  input position. Kinds: ``float`` (float16/32/64), ``int`` (signed or unsigned integers),
  ``index`` (int32 or int64), ``numeric`` (float or int), ``bool``, ``string`` (bytes
  elements), ``any``; or a tuple of numpy dtypes and dtype names (a list gives kinds by input position).
- ``same_shape``: groups of inputs that must have one shape, e.g. ``[(0, 1)]``.
- ``same_type``: groups of inputs that must have one dtype.
- ``ranks``: ``{input: rank}`` or ``{input: (min, max)}`` (None = unbounded); ``"*"`` for all.
- ``axes``: ``{argument: input}``: the integer argument is an axis of that input
  (``-rank <= axis < rank``; ``"+1"`` suffix on the input, e.g. ``"0+1"``, allows ``axis == rank``).
- Argument values: ``Arg(..., low=, high=, choices=)`` are checked when the op is created.

Every failure is a TypeMismatchError/ShapeError/ArgumentError naming op, blob, expected and
found. Ops whose rules need values (index ranges, lengths) or shapes the schema cannot declare call
the helpers below from ``run()`` before writing any output: ``check_indices``, ``check_lengths``,
``expect_rank``, ``expect_same_shape``, ``expect_shape``, ``expect_size``, ``expect_kind``,
``normalize_axis``, ``int_scalar``; helpers that know only a ``where`` (the op's description, in shape
inference too) use ``expect_axis`` and ``expect_in_range``.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from framework.errors import ArgumentError, ShapeError, TypeMismatchError

FLOAT_T, INT_T, INDEX_T, NUMERIC_T, BOOL_T, STRING_T, ANY_T = (
    "float",
    "int",
    "index",
    "numeric",
    "bool",
    "string",
    "any",
)

_KIND_TEST: dict[str, Callable[[np.dtype], bool]] = {
    FLOAT_T: lambda d: d.kind == "f",
    INT_T: lambda d: d.kind in "iu",
    INDEX_T: lambda d: d == np.int32 or d == np.int64,
    NUMERIC_T: lambda d: d.kind in "fiu",
    BOOL_T: lambda d: d.kind == "b",
    STRING_T: lambda d: d.kind == "O",
    ANY_T: lambda d: True,
}
_KIND_TEXT = {
    FLOAT_T: "floats",
    INT_T: "integers",
    INDEX_T: "int32 or int64 indices",
    NUMERIC_T: "numbers",
    BOOL_T: "bools",
    STRING_T: "strings",
    ANY_T: "anything",
}


def _type_test(kind: Any) -> tuple[Callable[[np.dtype], bool], str]:
    if isinstance(kind, str):
        if kind not in _KIND_TEST:
            raise ValueError(f"unknown input kind {kind!r}; one of {sorted(_KIND_TEST)}")
        return _KIND_TEST[kind], _KIND_TEXT[kind]
    # a name stands for a dtype numpy has only when another library is loaded (ml_dtypes' bfloat16)
    names = frozenset(d for d in kind if isinstance(d, str))
    dts = tuple(np.dtype(d) for d in kind if not isinstance(d, str))
    return (lambda d: d in dts or d.name in names), " or ".join([*(str(d) for d in dts), *sorted(names)])


def _blob(op: Any, i: int) -> str:
    return f"input {i} ('{op.input_names[i]}')"


def _rank_text(lo: int, hi: int | None) -> str:
    if hi == lo:
        return f"rank {lo}"
    if hi is None:
        return f"rank >= {lo}"
    return f"rank {lo} to {hi}"


def build_checks(
    input_types: Any = None, same_shape: Any = (), same_type: Any = (), ranks: Any = None, axes: Any = None
) -> tuple[Callable[[Any], None], ...]:
    """Closures ``check(op)`` for a schema's declarations (see module doc)."""
    checks: list[Callable[[Any], None]] = []
    if input_types is not None:
        if isinstance(input_types, (str, tuple)):
            spec: Any = {"*": input_types}
        elif isinstance(input_types, list):
            spec = dict(enumerate(input_types))
        else:
            spec = dict(input_types)
        tests = {k: _type_test(v) for k, v in spec.items() if v != ANY_T}
        if tests:

            def check_types(op: Any) -> None:
                for i in range(len(op.inputs)):
                    t = tests.get(i) or tests.get("*")
                    if t is not None:
                        x = op.input(i)
                        if not t[0](x.dtype):
                            got = f"{_dtype_text(x)} {list(x.shape)}"
                            raise TypeMismatchError(f"{op.describe()}: {_blob(op, i)} must hold {t[1]}, got {got}")

            checks.append(check_types)
    if ranks:
        rspec = {k: (v, v) if isinstance(v, int) else (v[0], v[1]) for k, v in dict(ranks).items()}

        def check_ranks(op: Any) -> None:
            for i in range(len(op.inputs)):
                r = rspec.get(i) or rspec.get("*")
                if r is not None:
                    x = op.input(i)
                    if x.ndim < r[0] or (r[1] is not None and x.ndim > r[1]):
                        raise ShapeError(
                            f"{op.describe()}: {_blob(op, i)} must have {_rank_text(*r)}, got shape {list(x.shape)}"
                        )

        checks.append(check_ranks)
    for group in same_type or ():
        checks.append(
            _same_check(tuple(group), "dtype", TypeMismatchError, lambda x: f"holds {_dtype_text(x)}", "type")
        )
    for group in same_shape or ():
        checks.append(_same_check(tuple(group), "shape", ShapeError, lambda x: f"has shape {list(x.shape)}", "shape"))
    for arg_name, target in dict(axes or {}).items():
        text = str(target)
        extra = 1 if text.endswith("+1") else 0
        idx = int(text[:-2]) if extra else int(target)

        def check_axis(op: Any, arg_name: str = arg_name, idx: int = idx, extra: int = extra) -> None:
            if idx >= len(op.inputs):
                return
            axis = op.args.get(arg_name)
            if axis is None:
                return
            rank = op.input(idx).ndim + extra
            if not -rank <= int(axis) < rank:
                raise ArgumentError(
                    f"{op.describe()}: argument '{arg_name}' = {axis} is out of range for {_blob(op, idx)} "
                    f"of shape {list(op.input(idx).shape)} (expected {-rank} <= {arg_name} < {rank})"
                )

        checks.append(check_axis)
    return tuple(checks)


def _same_check(
    group: tuple, attr: str, error: type, found: Callable[[np.ndarray], str], what: str
) -> Callable[[Any], None]:
    """A check that the inputs of ``group`` present on the op agree on ``attr`` (dtype or shape)."""

    def check_same(op: Any) -> None:
        present = [i for i in group if i < len(op.inputs)]
        if len(present) < 2:
            return
        first = op.input(present[0])
        for i in present[1:]:
            x = op.input(i)
            if getattr(x, attr) != getattr(first, attr):
                raise error(
                    f"{op.describe()}: {_blob(op, i)} {found(x)} but {_blob(op, present[0])} {found(first)}; "
                    f"they must have the same {what}"
                )

    return check_same


def _dtype_text(x: np.ndarray) -> str:
    return "strings" if x.dtype.kind == "O" else str(x.dtype)


# -- helpers op kernels call with values in hand ---------------------------------------------------


def check_indices(op: Any, i: int, idx: np.ndarray, bound: int, what: str = "", allow_negative: bool = False) -> None:
    """ShapeError naming op and blob unless every value of ``idx`` (input ``i``) is in [0, bound)
    (or [-bound, bound) with ``allow_negative``)."""
    if idx.dtype.kind not in "iu":
        raise TypeMismatchError(f"{op.describe()}: {_blob(op, i)} must hold integer indices, got {_dtype_text(idx)}")
    if idx.size == 0:
        return
    lo, hi = int(idx.min()), int(idx.max())
    low = -bound if allow_negative else 0
    if lo < low or hi >= bound:
        bad = lo if lo < low else hi
        raise ShapeError(
            f"{op.describe()}: {_blob(op, i)} holds index {bad}, out of range [{low}, {bound})"
            + (f" ({what})" if what else "")
        )


def check_lengths(op: Any, i: int, lengths: np.ndarray, total: int | None = None, what: str = "") -> None:
    """ShapeError unless ``lengths`` (input ``i``) are integers >= 0 (summing to ``total`` if given)."""
    if lengths.dtype.kind not in "iu":
        raise TypeMismatchError(
            f"{op.describe()}: {_blob(op, i)} must hold integer lengths, got {_dtype_text(lengths)}"
        )
    if lengths.size and int(lengths.min()) < 0:
        raise ShapeError(f"{op.describe()}: {_blob(op, i)} holds a negative length {int(lengths.min())}")
    if total is not None:
        s = int(lengths.sum(dtype=np.int64))
        if s != total:
            raise ShapeError(
                f"{op.describe()}: {_blob(op, i)} sums to {s} but must sum to {total}" + (f" ({what})" if what else "")
            )


def check_arg_value(where: str, name: str, value: Any, low: Any, high: Any, choices: Any) -> None:
    """ArgumentError if an argument value is outside its declared range or choices."""
    vals = value if isinstance(value, list) else [value]
    for v in vals:
        if isinstance(v, float) and v != v:
            raise ArgumentError(f"{where}: argument '{name}' is NaN")
        if choices is not None and v not in choices:
            raise ArgumentError(f"{where}: argument '{name}' = {v!r} is not one of {sorted(choices, key=str)}")
        if low is not None and v < low:
            raise ArgumentError(f"{where}: argument '{name}' = {v!r} must be >= {low}")
        if high is not None and v > high:
            raise ArgumentError(f"{where}: argument '{name}' = {v!r} must be <= {high}")


def expect_shape(op: Any, i: int, x: np.ndarray, shape: Any, what: str = "") -> None:
    """ShapeError naming op and blob unless input ``i`` (``x``) has exactly ``shape``."""
    if tuple(x.shape) != tuple(shape):
        raise ShapeError(
            f"{op.describe()}: {_blob(op, i)} must have shape {list(shape)}"
            + (f" ({what})" if what else "")
            + f", got {list(x.shape)}"
        )


def expect_size(op: Any, i: int, x: np.ndarray, n: int, what: str = "") -> None:
    """ShapeError naming op and blob unless input ``i`` (``x``) has ``n`` elements."""
    if x.size != n:
        raise ShapeError(
            f"{op.describe()}: {_blob(op, i)} must have {n} elements"
            + (f" ({what})" if what else "")
            + f", got shape {list(x.shape)}"
        )


def expect_kind(op: Any, i: int, x: np.ndarray, kind: str) -> None:
    """TypeMismatchError unless input ``i`` holds ``kind`` (a validation kind name, e.g. "float")."""
    test, text = _type_test(kind)
    if not test(x.dtype):
        got = f"{_dtype_text(x)} {list(x.shape)}"
        raise TypeMismatchError(f"{op.describe()}: {_blob(op, i)} must hold {text}, got {got}")


def int_scalar(op: Any, i: int, what: str = "") -> int:
    """The value of input ``i``, which must hold exactly one integer (TypeMismatchError/ShapeError)."""
    x = op.input(i)
    expect_kind(op, i, x, INT_T)
    expect_size(op, i, x, 1, what or "a scalar")
    return int(x.reshape(-1)[0])


def expect_rank(op: Any, i: int, x: np.ndarray, rank: int | tuple[int, int | None], what: str = "") -> None:
    """ShapeError naming op and blob unless input ``i`` (``x``) has ``rank`` (an int, or ``(min, max)`` with
    ``max`` None for unbounded), as the schema's ``ranks`` check words it."""
    lo, hi = (rank, rank) if isinstance(rank, int) else rank
    if x.ndim < lo or (hi is not None and x.ndim > hi):
        raise ShapeError(
            f"{op.describe()}: {_blob(op, i)} must have {_rank_text(lo, hi)}"
            + (f" ({what})" if what else "")
            + f", got shape {list(x.shape)}"
        )


def expect_same_shape(op: Any, i: int, a: np.ndarray, j: int, b: np.ndarray, what: str = "") -> None:
    """ShapeError naming both blobs unless input ``j`` (``b``) has the shape of input ``i`` (``a``)."""
    if a.shape != b.shape:
        raise ShapeError(
            f"{op.describe()}: {_blob(op, j)} has shape {list(b.shape)} but {_blob(op, i)} has shape "
            f"{list(a.shape)}; they must have the same shape" + (f" ({what})" if what else "")
        )


def normalize_axis(op: Any, axis: int, ndim: int, name: str = "axis", allow_end: bool = False) -> int:
    """``axis`` in ``[0, ndim)`` (``[0, ndim]`` with ``allow_end``), negative values counted from the end;
    ShapeError naming the op and the argument when it does not fit the input's rank (the schema's ``axes``
    check, made before ``run()``, reports an ArgumentError instead)."""
    rank = ndim + (1 if allow_end else 0)
    if not -rank <= axis < rank:
        raise ShapeError(
            f"{op.describe()}: argument '{name}' = {axis} is out of range for rank {ndim} "
            f"(expected {-rank} <= {name} < {rank})"
        )
    return axis + rank if axis < 0 else axis


def expect_in_range(
    where: str,
    what: str,
    value: int,
    low: int,
    high: int,
    *,
    inclusive: bool = False,
    of: str = "",
    error: type[Exception] = ShapeError,
) -> int:
    """``value`` when it lies in ``[low, high)`` (``[low, high]`` with ``inclusive``), else ``error`` (a
    ShapeError unless told) worded ``"<where>: <what> <value> is out of range [low, high) for <of>"``: an
    index, position, count or cursor whose bounds only the values in hand tell. ``where`` names the op
    (``op.describe()``), or the op and blob in shape inference."""
    if low <= value < high or (inclusive and value == high):
        return value
    close = "]" if inclusive else ")"
    raise error(f"{where}: {what} {value} is out of range [{low}, {high}{close}" + (f" for {of}" if of else ""))


def expect_axis(
    where: str,
    axis: int,
    ndim: int,
    *,
    name: str = "axis",
    of: str = "",
    allow_end: bool = False,
    error: type[Exception] = ShapeError,
) -> int:
    """``axis`` in ``[0, ndim)`` (``[0, ndim]`` with ``allow_end``), negative values counted from the end; else
    ``error`` (a ShapeError unless told) worded ``"<where>: <name> <axis> is out of range for <of> (expected
    -r <= <name> < r)"``, ``of`` defaulting to "a <ndim>-D input". ``normalize_axis`` is the same for an op's
    argument named as such; this one serves helpers that know only a ``where`` (shape inference too)."""
    rank = ndim + (1 if allow_end else 0)
    if -rank <= axis < rank:
        return axis + rank if axis < 0 else axis
    raise error(
        f"{where}: {name} {axis} is out of range for {of or f'a {ndim}-D input'} (expected {-rank} <= {name} < {rank})"
    )
