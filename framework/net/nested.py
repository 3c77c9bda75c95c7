"""Nested nets (If, While, Do, ONNXWhile, RecurrentNetwork): validation, hazards, services.

- ``install_services()``: hands the net layer's callables down to the layers
  below (``framework.runtime.services.NET``): the Workspace's net methods, and
  ``framework.ops.subnet``'s "build this NetDef in this workspace" and
  "backward pass of these ops" (lower layers may not import the net layer).
- ``check_nested(net_def, known)``: validates nested nets at net creation
  (unknown ops, arity, in-place rules, undefined blobs), recursively, with
  errors naming the path: ``op #3 If / then_net / op #1 Relu``.
- ``extra_io(op)``: the blobs nested nets read and write in the op's own
  workspace (If, While, ONNXWhile with disable_scopes), so the outer graph
  orders the op after their producers and before their readers.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable

from framework.errors import NetError, SchemaError, UnknownOperatorError
from framework.ops.arg_reader import ArgReader
from framework.ops.operator import check_schema, describe_op
from framework.ops.registry import schema_of
from framework.ops.schema import INT
from framework.proto.framework_pb2 import NetDef, OperatorDef
from framework.runtime.services import NET

SAME_WORKSPACE = frozenset({"If", "While"})
OUTER_IO_TYPES = SAME_WORKSPACE | {"ONNXWhile"}  # op types whose nested nets may touch the outer workspace


def nested_nets(op: OperatorDef) -> list[tuple[str, NetDef]]:
    """(argument label, NetDef) for every NetDef-valued argument of ``op``."""
    out = []
    for a in op.arg:
        if a.HasField("n"):
            out.append((a.name, a.n))
        for k, n in enumerate(a.nets):
            out.append((f"{a.name}[{k}]", n))
    return out


def _flag(op: OperatorDef, name: str) -> bool:
    args = ArgReader(op)
    return args.has_single(name, INT) and bool(args.single(name, kind=INT))


def shares_workspace(op: OperatorDef) -> bool:
    return op.type in SAME_WORKSPACE or (op.type == "ONNXWhile" and _flag(op, "disable_scopes"))


def net_io(net_def: NetDef) -> tuple[list[str], list[str]]:
    """(blobs read before being written inside ``net_def``, blobs written), nested ops included."""
    reads: dict[str, None] = {}
    writes: dict[str, None] = {}
    for op in net_def.op:
        ins, outs = op_io(op)
        for b in ins:
            if b not in writes:
                reads[b] = None
        for b in outs:
            writes[b] = None
    return list(reads), list(writes)


def op_io(op: OperatorDef) -> tuple[list[str], list[str]]:
    """Inputs and outputs of ``op`` in the outer graph, with what its nested nets touch."""
    ins, outs = list(op.input), list(op.output)
    if op.arg and shares_workspace(op):
        for _, net in nested_nets(op):
            r, w = net_io(net)
            bound = set(net.external_input) if op.type == "ONNXWhile" else ()  # the op sets these itself
            ins += [b for b in r if b not in ins and b not in bound]
            outs += [b for b in w if b not in outs]
    return ins, outs


def extra_io(op: OperatorDef) -> tuple[list[str], list[str]] | None:
    """None for plain ops (the fast common case), else op_io(op)."""
    if not op.arg or not shares_workspace(op):
        return None
    return op_io(op)


# -- validation -------------------------------------------------------------------
def _inner_known(op: OperatorDef, label: str, net: NetDef, outer: Callable[[str], bool]) -> Callable[[str], bool]:
    """Which blobs a nested net may read without producing them."""
    ext = set(net.external_input)
    if shares_workspace(op):
        return lambda b: b in ext or outer(b)
    if op.type == "Do":
        names = ("inner_blobs", "saved_fwd_blobs")
        bound = {s.decode() if isinstance(s, bytes) else s for a in op.arg if a.name in names for s in a.strings}
        return lambda b: b in ext or b in bound
    if op.type == "ONNXWhile":
        return lambda b: b in ext
    return lambda b: True  # RecurrentNetwork and others: blobs come from links the op sets up


def check_nested(net_def: NetDef, known: Callable[[str], bool], path: str = "") -> None:
    """Validate every nested net of ``net_def`` (recursively); errors name the path."""
    for i, op in enumerate(net_def.op):
        nets = nested_nets(op)
        if not nets:
            continue
        for label, net in nets:
            where = f"{path}{describe_op(op, i)} / {label}"
            _check_one(net, _inner_known(op, label, net, known), where)


def _check_one(net: NetDef, known: Callable[[str], bool], where: str) -> None:
    written: set[str] = set()
    all_written = {b for op in net.op for b in op_io(op)[1]}
    for j, op in enumerate(net.op):
        here = f"{where} / {describe_op(op, j)}"
        try:
            schema = schema_of(op)
        except UnknownOperatorError as e:
            raise UnknownOperatorError(f"{here}: {e}") from None
        try:
            check_schema(schema, op, j)
        except SchemaError as e:
            raise SchemaError(f"{where} / {e}") from None
        ins, outs = op_io(op)
        for b in ins:
            if b in written or known(b):
                continue
            later = " (it is written only later in this net)" if b in all_written else ""
            raise NetError(
                f"{here} reads '{b}', which is not produced before it in the nested net, not one of its "
                f"external inputs and not visible from the enclosing net{later}"
            )
        written.update(outs)
    inner_known = lambda b: b in written or known(b)  # noqa: E731
    check_nested(net, inner_known, f"{where} / ")


# -- shape inference -----------------------------------------------------------------
def infer_nested(op: OperatorDef, specs: dict[str, Any], infer_net: Callable[..., dict]) -> dict[str, Any] | None:
    """Specs an If leaves behind: those both branches (or then and the unchanged state) agree on."""
    if op.type != "If":
        return None
    nets = dict(nested_nets(op))
    then_def = nets.get("then_net")
    if then_def is None:
        return None
    then_specs = infer_net(then_def, specs)
    else_def = nets.get("else_net")
    else_specs = infer_net(else_def, specs) if else_def is not None else specs
    out = {}
    for name in set(then_specs) | set(else_specs):
        if name in specs and then_specs.get(name) == specs[name] and else_specs.get(name) == specs[name]:
            continue
        a, b = then_specs.get(name), else_specs.get(name)
        if a is not None and a == b:
            out[name] = a
    return out


# -- services for the ops layer ----------------------------------------------------
def _create_subnet(net_def: NetDef, ws: Any) -> Any:
    """Build a nested net bound to ``ws``; blobs are checked by the enclosing net's validation."""
    from framework.net.base import net_class
    from framework.net.graph import compile_graph

    graph = compile_graph(net_def, lambda name: True)
    cls = net_class(graph.net_def.type, f'nested net "{graph.net_def.name}"')
    return cls(graph, ws)


def _compile_subnet(net_def: NetDef) -> Any:
    from framework.net.base import net_class
    from framework.net.graph import compile_graph

    graph = compile_graph(net_def, lambda name: True)
    return graph, net_class(graph.net_def.type, f'nested net "{graph.net_def.name}"')


def _bind_subnet(compiled: Any, ws: Any, compile_when_stable: bool = False) -> Any:
    graph, cls = compiled
    return cls(graph, ws, compile_when_stable=compile_when_stable)


def _backward_pass(ops: Iterable[OperatorDef], ys: dict[str, Any]) -> tuple[list, dict[str, Any]]:
    from framework.net.backward import get_backward_pass

    return get_backward_pass(list(ops), ys)


def install_services() -> None:
    """Hand the net layer's services down (framework.runtime.services.NET): the Workspace's net methods
    (framework.net.api) and what control-flow ops build nested nets with (framework.ops.subnet)."""
    from framework.net import api

    NET.provide(
        create_net=api.create_net,
        run_net_once=api.run_net_once,
        run_operator_once=api.run_operator_once,
        run_plan=api.run_plan,
        infer_shapes_and_types=api.infer_shapes_and_types,
        benchmark_net=api.benchmark_net,
        create_subnet=_create_subnet,
        compile_subnet=_compile_subnet,
        bind_subnet=_bind_subnet,
        backward_pass=_backward_pass,
    )
