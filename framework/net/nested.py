"""Nested nets (If, While, Do, ONNXWhile, RecurrentNetwork): validation, hazards, services.

- ``install_services()``: hands the net layer's callables down to the layers
  below (``framework.runtime.services.NET``): the Workspace's net methods, and
  ``framework.ops.subnet``'s "build this NetDef in this workspace" and
  "backward pass of these ops" (lower layers may not import the net layer).
- ``check_nested(net_def, known)``: validates nested nets at net creation
  (unknown ops, arity, in-place rules, undefined blobs), recursively, with
  errors naming the path: ``op #3 If / then_net / op #1 Relu``.
- ``extra_io(op)``: the blobs nested nets read and write in the op's own
  workspace, so the outer graph orders the op after their producers and
  before their readers: If, While (and ONNXWhile with disable_scopes) run
  them there; Do binds inner names to its outer blobs (``inner_blobs`` ->
  ``outer_blobs_idx``); a RecurrentNetwork's step nets see sequence blobs
  through links and read the rest from the op's workspace (their parent).
"""

from __future__ import annotations

from typing import Any, Callable, Iterable

from framework.errors import NetError, SchemaError, UnknownOperatorError
from framework.ops.arg_reader import ArgReader
from framework.ops.operator import check_schema, describe_op
from framework.ops.registry import schema_of
from framework.ops.schema import INT, INTS, STRING, STRINGS
from framework.proto.framework_pb2 import NetDef, OperatorDef
from framework.proto.io import parse_text
from framework.runtime.services import NET

SAME_WORKSPACE = frozenset({"If", "While"})
RECURRENT = frozenset({"RecurrentNetwork", "RecurrentNetworkGradient"})
OUTER_IO_TYPES = SAME_WORKSPACE | {"ONNXWhile", "Do"} | RECURRENT  # nested nets that touch the outer workspace
STEP_NETS = ("step_net", "backward_step_net")


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


def _add(names: list[str], new: Iterable[str]) -> None:
    for b in new:
        if b not in names:
            names.append(b)


def op_io(op: OperatorDef) -> tuple[list[str], list[str]]:
    """Inputs and outputs of ``op`` in the outer graph, with what its nested nets touch."""
    ins, outs = list(op.input), list(op.output)
    if not op.arg:
        return ins, outs
    if shares_workspace(op):
        for _, net in nested_nets(op):
            r, w = net_io(net)
            bound = set(net.external_input) if op.type == "ONNXWhile" else ()  # the op sets these itself
            _add(ins, (b for b in r if b not in bound))
            _add(outs, w)
    elif op.type == "Do":
        _do_io(op, ins, outs)
    elif op.type in RECURRENT:
        _recurrent_io(op, ins, outs)
    return ins, outs


def _strings(args: ArgReader, name: str) -> list[str]:
    return [s.decode() if isinstance(s, bytes) else s for s in args.repeated(name, kind=STRINGS)]


def _do_io(op: OperatorDef, ins: list[str], outs: list[str]) -> None:
    """Do's child workspace sees only the outer blobs bound to inner names: inner ``inner_blobs[k]`` is outer
    blob ``outer_blobs_idx[k]`` of the op's inputs then outputs, each without the last (the scope blob). What
    the net reads or writes through a binding is the op's read or write of that outer blob."""
    args = ArgReader(op)
    outer = list(op.input[:-1]) + list(op.output[:-1])
    inner = _strings(args, "inner_blobs")
    idx = args.repeated("outer_blobs_idx", kind=INTS)
    binding = {b: outer[k] for b, k in zip(inner, idx) if 0 <= k < len(outer)}
    for _, net in nested_nets(op):
        r, w = net_io(net)
        _add(ins, (binding[b] for b in r if b in binding))
        _add(outs, (binding[b] for b in w if b in binding))


def _recurrent_io(op: OperatorDef, ins: list[str], outs: list[str]) -> None:
    """A RecurrentNetwork runs its ``step_net`` in child workspaces of its own, its gradient op the
    ``backward_step_net`` in the same ones: a linked blob (``link_internal``, and for the gradient op
    ``backward_link_internal``) is a window of its sequence blob (``*link_external``) in the op's workspace;
    any other blob a step net reads before writing it, but the timestep and (for the gradient op) what the
    forward step net left in the step workspaces, comes from the op's workspace (its parameters). The forward
    op writes its ``recurrent_states`` there (initialized before the steps, so the steps' reads of them are the
    op's own), the gradient op reads them and writes their gradients (``<state>_grad``, likewise its own).
    Departure (static view): a step net's write of an unlinked blob counts as local to the step workspace,
    unless the op declares the blob (a step net writing a blob the op's workspace already holds writes that)."""
    args = ArgReader(op)
    gradient = op.type == "RecurrentNetworkGradient"  # the forward op carries the backward net, unrun
    links: dict[str, str] = {}
    for prefix in ("link_", "backward_link_") if gradient else ("link_",):
        links.update(zip(_strings(args, prefix + "internal"), _strings(args, prefix + "external")))
    timestep = args.single("timestep", kind=STRING) if args.has_single("timestep", STRING) else "timestep"
    timestep = timestep.decode() if isinstance(timestep, bytes) else timestep
    states = _strings(args, "recurrent_states")
    own = [s + "_grad" for s in states] if gradient else states  # the op sets them up before the steps run
    _add(outs, own)
    if gradient:
        _add(ins, states)
    else:
        _add(ins, (b for b in _strings(args, "alias_src") if b not in own))
    forward_local: set[str] = set()  # kept in the step workspaces, where the backward step net reads them
    for label, net in _step_nets(op):
        r, w = net_io(net)
        if label == "step_net" and gradient:
            forward_local.update(w)
            continue
        if label == "backward_step_net" and not gradient:
            continue
        reads = (links.get(b, b) for b in r if b != timestep and b not in forward_local)
        _add(ins, (b for b in reads if b not in own))
        _add(outs, (links[b] for b in w if b in links))


def _step_nets(op: OperatorDef) -> list[tuple[str, NetDef]]:
    """(label, net) of the step nets of a RecurrentNetwork(Gradient), forward first: NetDef arguments, or their
    text (as Caffe2 writes them). Text that does not parse is left to the op, which reports it when created."""
    nets = [(label, net) for label, net in nested_nets(op) if label in STEP_NETS]
    for a in op.arg:
        if a.name in STEP_NETS and a.HasField("s") and a.s.strip():
            try:
                nets.append((a.name, parse_text(a.s.decode("utf-8", errors="replace"), NetDef)))
            except Exception:
                continue
    return sorted(nets, key=lambda item: STEP_NETS.index(item[0]))


def named_outer_blobs(op: OperatorDef) -> set[str]:
    """The outer blobs ``op``'s nested nets or arguments name (a pass that renames outer blobs must keep these
    names): what If/While/ONNXWhile's nets touch beyond the op's own inputs and outputs, and every outer blob
    of a RecurrentNetwork (its arguments name links, states and aliases). Do names none: its net reaches outer
    blobs by the op's input and output positions."""
    if not op.arg or op.type not in OUTER_IO_TYPES or op.type == "Do":
        return set()
    ins, outs = op_io(op)
    if op.type in RECURRENT:
        return set(ins) | set(outs)
    return (set(ins) | set(outs)) - set(op.input) - set(op.output)


def extra_io(op: OperatorDef) -> tuple[list[str], list[str]] | None:
    """None for plain ops (the fast common case), else op_io(op)."""
    if not op.arg or op.type not in OUTER_IO_TYPES or (op.type == "ONNXWhile" and not shares_workspace(op)):
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
