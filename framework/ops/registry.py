"""The operator registry: op type -> OpSchema (with its Operator class).

Filled by ``register_op`` decorators in the op modules, which their family packages import by name;
a family is imported on the first look-up of one of its types (``framework.ops.families``).
It is one of the framework's registries (filled as modules load, read-only after); the other process state is
listed under "Process state" in ``docs/architecture.md``.
"""

from __future__ import annotations

import difflib
from typing import TYPE_CHECKING, Any, Callable, Iterable, Sequence, TypeVar

from framework.errors import UnknownOperatorError
from framework.ops.schema import Arg, OpSchema
from framework.ops.validation import build_checks

if TYPE_CHECKING:
    from framework.ops.operator import Operator

OpClass = TypeVar("OpClass", bound="type[Operator]")

_SCHEMAS: dict[str, OpSchema] = {}


def register_op(
    type_name: str,
    *,
    inputs: Any = 1,
    outputs: Any = 1,
    doc: str | None = None,
    input_docs: Iterable[tuple[str, str]] = (),
    output_docs: Iterable[tuple[str, str]] = (),
    args: Iterable[Arg] = (),
    allow_inplace: Any = frozenset(),
    enforce_inplace: Any = frozenset(),
    infer: Callable | None = None,
    cost: Callable | None = None,
    category: str = "misc",
    aliases: Iterable[str] = (),
    private: bool = False,
    input_types: Any = None,
    same_shape: Any = (),
    same_type: Any = (),
    ranks: Any = None,
    axes: Any = None,
    snapshot_inplace: bool = False,
) -> Callable[[OpClass], OpClass]:
    """Class decorator: register an Operator subclass under ``type_name``.

    ``inputs``/``outputs`` are an exact count, a (min, max) range (max may be
    ``float('inf')``), a set, or a predicate. ``doc`` defaults to the class
    docstring. ``input_types``, ``same_shape``, ``same_type``, ``ranks`` and ``axes`` declare
    input checks the Operator base runs before ``run()`` (see ``framework.ops.validation``).
    ``snapshot_inplace``: the base saves the values of in-place outputs before ``run()`` and restores them
    if it raises (for ops that can fail after writing into an input's buffer).

    >>> @register_op("MyRelu", infer=same_as_input(0), allow_inplace={(0, 0)})
    ... class MyRelu(Operator):
    ...     "Y = max(X, 0)."
    ...     def run(self): ...
    """

    def deco(cls: OpClass) -> OpClass:
        schema = OpSchema(
            type=type_name,
            doc=(doc if doc is not None else (cls.__doc__ or "")).strip(),
            num_inputs=_norm_count(inputs),
            num_outputs=_norm_count(outputs),
            inputs=tuple(input_docs),
            outputs=tuple(output_docs),
            args={a.name: a for a in args},
            allow_inplace=_norm_pairs(allow_inplace),
            enforce_inplace=_norm_pairs(enforce_inplace),
            infer=infer,
            cost=cost,
            category=category,
            operator_class=cls,
            aliases=tuple(aliases),
            private=private,
            checks=build_checks(input_types, same_shape, same_type, ranks, axes),
            snapshot_inplace=snapshot_inplace,
        )
        _add(schema)
        for alias in schema.aliases:
            _add(OpSchema(**{**schema.__dict__, "type": alias, "aliases": ()}))
        # A class may serve several types; it keeps the first schema as default.
        if getattr(cls, "schema", None) is None or "schema" not in cls.__dict__:
            cls.schema = schema
        return cls

    return deco


def _add(schema: OpSchema) -> None:
    if schema.type in _SCHEMAS:
        raise ValueError(f"op type {schema.type} is registered twice")
    _SCHEMAS[schema.type] = schema


def _norm_count(c: Any) -> Any:
    if isinstance(c, (set, list)):
        return frozenset(c)
    return c


def _norm_pairs(p: Any) -> Any:
    if isinstance(p, (set, list, tuple)):
        return frozenset(tuple(x) for x in p)
    return p


def _ensure(type_name: str) -> None:
    from framework.ops import families

    families.ensure_type(type_name)


def get_schema(type_name: str) -> OpSchema:
    """The schema of ``type_name``; UnknownOperatorError with suggestions otherwise."""
    _ensure(type_name)
    schema = _SCHEMAS.get(type_name)
    if schema is None:
        raise UnknownOperatorError(unknown_message(type_name))
    return schema


# (op type, engine) -> the registered type that runs it: Caffe2 registers some engines' implementations
# under the float op's name (REGISTER_CPU_OPERATOR_WITH_ENGINE(SpatialBN, DNNLOWP, ...)).
_ENGINE_TYPES: dict[tuple[str, str], str] = {}


def register_engine_type(type_name: str, engines: Sequence[str], target: str) -> None:
    """Run ``type_name`` ops whose engine is one of ``engines`` with ``target``'s schema and class."""
    for engine in engines:
        _ENGINE_TYPES[(type_name, engine)] = target


def engine_type(op_def: Any) -> str:
    """The registered type that runs ``op_def``: its own, or the one its (type, engine) maps to."""
    if op_def.engine:
        _ensure(op_def.type)
        return _ENGINE_TYPES.get((op_def.type, op_def.engine), op_def.type)
    return op_def.type


def schema_of(op_def: Any) -> OpSchema:
    """The schema that runs ``op_def`` (``get_schema(engine_type(op_def))``)."""
    return get_schema(engine_type(op_def))


def has_op(type_name: str) -> bool:
    _ensure(type_name)
    return type_name in _SCHEMAS


def unknown_message(type_name: str) -> str:
    from framework.ops.families import load_all

    load_all()
    names = list(_SCHEMAS)
    close = difflib.get_close_matches(type_name, names, n=3, cutoff=0.5)
    lower = [n for n in names if n.lower() == type_name.lower()]
    for n in lower:
        if n not in close:
            close.insert(0, n)
    hint = f" Did you mean: {', '.join(close)}?" if close else ""
    return f"operator type '{type_name}' is not registered.{hint} (`framework ops` lists all {len(names)} types)"


def registered_ops() -> list[str]:
    """All registered op types, sorted."""
    from framework.ops.families import load_all

    load_all()
    return sorted(_SCHEMAS)


def all_schemas() -> list[OpSchema]:
    from framework.ops.families import load_all

    load_all()
    return [_SCHEMAS[k] for k in sorted(_SCHEMAS)]


def set_gradient(type_name: str, maker: Any) -> None:
    """Fill the gradient slot of a registered op and of its aliases (used by ops.gradient)."""
    # A registered schema is filled as is: looking it up by name would import every family its type's
    # index entry names (engine variants too: BatchPermutation's gradient would load the quantized family).
    schema = _SCHEMAS.get(type_name) or get_schema(type_name)
    schema.gradient = maker
    for alias in schema.aliases:
        _SCHEMAS[alias].gradient = maker
