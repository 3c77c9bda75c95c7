"""NetDef -> validated dependency graph -> stable execution order.

``compile_graph(net_def, has_blob)`` is the pure, side-effect-free half of net
creation: it normalizes the NetDef (net-level device option and arguments
reach the ops), checks every op against its schema, builds a hazard graph
whose nodes are op indices (declared order) and whose edges are data hazards
and ``control_input`` dependencies, validates blobs, and picks a stable
topological order (``NetGraph.graph`` gives it as a ``networkx.DiGraph``).

Ordering rules (DESIGN.md, Nets):

- A blob written by exactly one op, not read by that op, and not declared in
  ``external_input`` has one producer: every op that reads it depends on the
  producer, even ops declared before it (hand-written nets need not be sorted).
- Every other blob (several writers: in-place ops, counters; or an external
  input that is overwritten) follows declared order, as Caffe2's dag_utils:
  read-after-write on the last earlier writer, write-after-write on the
  previous writer, write-after-read on every reader since that write.
- ``control_input`` blobs order the op after their producer (or last writer).

>>> from framework.core import CreateOperator
>>> net = NetDef(name="n", external_input=["X"])
>>> net.op.extend([CreateOperator("Relu", "H", "Y"), CreateOperator("Relu", "X", "H")])
>>> compile_graph(net).order
[1, 0]
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from heapq import heapify, heappop, heappush
from typing import Any, Callable, Iterable

from framework.errors import NetError, ProtoParseError, SchemaError, UnknownOperatorError
from framework.memory.workspace import suggest
from framework.net.dataflow import DataFlow
from framework.net.nested import check_nested
from framework.ops.operator import check_schema, describe_op
from framework.ops.registry import schema_of
from framework.proto.framework_pb2 import NetDef, OperatorDef

__all__ = ["NetGraph", "compile_graph", "load_net_def", "format_op", "format_ops", "compute_chains"]


# -- loading ------------------------------------------------------------------
def load_net_def(net: Any) -> NetDef:
    """A private copy of ``net`` as a NetDef.

    Accepts a NetDef, anything with ``Proto()`` (core.Net), a path to a text
    or binary NetDef file, the text format itself, or serialized bytes.
    """
    if isinstance(net, NetDef):
        out = NetDef()
        out.CopyFrom(net)
        return out
    if hasattr(net, "Proto") and callable(net.Proto):
        return load_net_def(net.Proto())
    if isinstance(net, os.PathLike) or (isinstance(net, str) and os.path.isfile(net)):
        from framework.proto.io import read_net

        return read_net(net)
    if isinstance(net, bytes):
        from framework.proto.io import parse_bytes

        return parse_bytes(net, NetDef)
    if isinstance(net, str):
        if ":" in net or "{" in net or not net.strip():
            from framework.proto.io import parse_text

            return parse_text(net, NetDef)
        raise ProtoParseError(f"'{net}' is neither a NetDef file nor NetDef text")
    raise NetError(f"expected a NetDef, core.Net, file path, text or bytes; got {type(net).__name__}")


def normalize_net_def(net_def: NetDef) -> NetDef:
    """Give ops without a device_option the net's, and net-level arguments their schema knows.

    A net argument reaches an op only when the op's schema declares an
    argument of that name and the op does not set it itself (so ``num_workers``
    and other net settings do not become unknown op arguments).
    """
    has_dev = net_def.HasField("device_option")
    net_args = list(net_def.arg)
    for op in net_def.op:
        if has_dev and not op.HasField("device_option"):
            op.device_option.CopyFrom(net_def.device_option)
        if net_args:
            try:
                known = schema_of(op).args
            except UnknownOperatorError:
                continue
            have = {a.name for a in op.arg}
            for a in net_args:
                if a.name in known and a.name not in have:
                    op.arg.add().CopyFrom(a)
    return net_def


# -- formatting ---------------------------------------------------------------
def _arg_text(arg: Any) -> str:
    for f in ("f", "i", "s"):
        if arg.HasField(f):
            v = getattr(arg, f)
            return f"{arg.name}={v.decode(errors='replace')!r}" if f == "s" else f"{arg.name}={v!r}"
    for f in ("floats", "ints", "strings"):
        vals = list(getattr(arg, f))
        if vals:
            return f"{arg.name}={vals!r}"
    if arg.HasField("n"):
        return f"{arg.name}=<net {arg.n.name}>"
    return f"{arg.name}=[]"


def format_op(op: OperatorDef) -> str:
    """``Y = FC(X, W, b, axis=1)`` for one op."""
    args = [*op.input, *(_arg_text(a) for a in op.arg)]
    if op.engine:
        args.append(f"engine={op.engine!r}")
    call = f"{op.type}({', '.join(args)})"
    text = f"{', '.join(op.output)} = {call}" if op.output else call
    if op.control_input:
        text += f"  # after {', '.join(op.control_input)}"
    return text


def format_ops(ops: Iterable[OperatorDef]) -> str:
    return "\n".join(format_op(op) for op in ops)


# -- the graph ------------------------------------------------------------------
class HazardGraph:
    """Op indices ``0..n-1`` and the hazard edges between them (``a -> b``: b runs after a), each labelled
    with its ``(kind, blob)`` pairs. Ordering needs nothing more; ``to_networkx()`` builds the
    ``networkx.DiGraph`` (edge attribute ``kinds``) for the graph algorithms of the DAG executor."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.kinds: dict[tuple[int, int], set[tuple[str, str]]] = {}
        self._succ: list[list[int]] = [[] for _ in range(n)]
        self._indegree = [0] * n

    def add_edge(self, a: int, b: int, kind: str, blob: str) -> None:
        if a == b:
            return
        kinds = self.kinds.get((a, b))
        if kinds is None:
            self.kinds[(a, b)] = {(kind, blob)}
            self._succ[a].append(b)
            self._indegree[b] += 1
        else:
            kinds.add((kind, blob))

    def order(self) -> list[int] | None:
        """The topological order taking the lowest ready index first (the lexicographically smallest);
        None if the edges form a cycle."""
        indegree = list(self._indegree)
        ready = [i for i in range(self.n) if not indegree[i]]
        heapify(ready)
        out = []
        while ready:
            i = heappop(ready)
            out.append(i)
            for j in self._succ[i]:
                indegree[j] -= 1
                if not indegree[j]:
                    heappush(ready, j)
        return out if len(out) == self.n else None

    def to_networkx(self) -> Any:
        import networkx as nx

        g = nx.DiGraph()
        g.add_nodes_from(range(self.n))
        for (a, b), kinds in self.kinds.items():
            g.add_edge(a, b, kinds=kinds)
        return g


@dataclass
class NetGraph:
    """A validated net: normalized NetDef, hazard graph, and stable execution order."""

    net_def: NetDef
    hazards: HazardGraph
    order: list[int]
    produced: set[str] = field(default_factory=set)
    _nx: Any = field(default=None, repr=False, compare=False)

    @property
    def graph(self) -> Any:
        """The hazard graph as a ``networkx.DiGraph`` (built, and networkx imported, on first use)."""
        if self._nx is None:
            self._nx = self.hazards.to_networkx()
        return self._nx

    @property
    def name(self) -> str:
        return self.net_def.name

    def ops_in_order(self) -> list[OperatorDef]:
        return [self.net_def.op[i] for i in self.order]

    def __str__(self) -> str:
        return format_ops(self.ops_in_order())


def _label(net_def: NetDef) -> str:
    return f'net "{net_def.name}"' if net_def.name else "net"


def creation_site(op: OperatorDef) -> str:
    """For ops built in Python (``OperatorDef.debug_info``): where the op was created, else ''."""
    return f"\nthe op was created at:\n{op.debug_info}" if op.debug_info else ""


def build_graph(net_def: NetDef) -> tuple[HazardGraph, DataFlow, dict[str, int]]:
    """Hazard graph of ``net_def``: (graph, the net's dataflow view, single-producer blobs and their producer).

    Producers and readers come from the net's dataflow view (``framework.net.dataflow``, nested nets' blobs
    counted as their op's: If, While)."""
    ops = net_def.op
    flow = DataFlow(ops, nested=True)
    g = HazardGraph(len(ops))
    _add_edge = g.add_edge
    producer = flow.producer
    external = set(net_def.external_input)
    ios = flow.ios()
    sole = flow.sole_writers()
    single = {b: w for b, w in sole.items() if b not in external and b not in ios[w][0]}
    for i, (ins, outs) in enumerate(ios):
        for b in ins:
            w = single[b] if b in single else producer(i, b)
            if w is not None:
                _add_edge(w, i, "RaW", b)
        for b in ops[i].control_input:
            w = single[b] if b in single else producer(i, b)
            if w is not None:
                _add_edge(w, i, "control", b)
        for b in dict.fromkeys(outs) if len(outs) > 1 else outs:
            if b in single:
                continue
            w = producer(i, b)
            if w is not None:
                _add_edge(w, i, "WaW", b)
            for r in flow.readers(w, b) if w is not None else flow.readers_of(b):
                if r > i:
                    break
                _add_edge(r, i, "WaR", b)
    return g, flow, single


def compile_graph(net_def: Any, has_blob: Callable[[str], bool] | None = None, owned: bool = False) -> NetGraph:
    """Normalize, validate and order ``net_def``; raise on the first problem found.

    ``has_blob`` tells which blobs already exist (the workspace); blobs read
    before any op writes them must be external inputs or exist. ``owned=True``:
    ``net_def`` is a NetDef the caller hands over (it is normalized in place and
    kept, not copied: a 128 MB init net costs as much to copy as to parse).

    Raises UnknownOperatorError/SchemaError (schema violations), NetError
    (undefined blobs, external outputs never produced, cycles). Every message
    names the net, the op (index, type, name) and the blob.
    """
    net_def = normalize_net_def(net_def if owned and isinstance(net_def, NetDef) else load_net_def(net_def))
    has_blob = has_blob or (lambda name: False)
    label = _label(net_def)
    for i, op in enumerate(net_def.op):
        try:
            check_schema(schema_of(op), op, i)
        except UnknownOperatorError as e:
            raise UnknownOperatorError(f"{label}: {describe_op(op, i)}: {e}{creation_site(op)}") from None
        except SchemaError as e:
            raise SchemaError(f"{label}: {e}{creation_site(op)}") from None
    g, flow, single = build_graph(net_def)
    external = set(net_def.external_input)
    produced = flow.produced()
    try:
        check_nested(net_def, lambda b: b in produced or b in external or has_blob(b))
    except (UnknownOperatorError, SchemaError, NetError) as e:
        raise type(e)(f"{label}: {e}") from None
    _check_reads(net_def, flow, single, external, has_blob)
    for b in net_def.external_output:
        if b not in produced and b not in external:
            known = sorted(produced | external)
            raise NetError(
                f"{label}: external output '{b}' is never produced by any op and is not an external input."
                f"{suggest(b, known)}"
            )
    order = g.order()
    if order is None:
        raise NetError(f"{label}: the ops form a cycle: {_describe_cycle(net_def, g.to_networkx())}")
    return NetGraph(net_def, g, order, produced)


def _check_reads(
    net_def: NetDef,
    flow: DataFlow,
    single: dict[str, int],
    external: set[str],
    has_blob: Callable[[str], bool],
) -> None:
    """Raise for the first read (in op order) of a blob no earlier op writes that is neither an external input,
    single-produced (ordered after its producer) nor in the workspace."""
    label = _label(net_def)
    for b in flow.inputs():  # blobs read at or before their first writer, by first read
        if b in single or b in external or has_blob(b):
            continue
        i, w = flow.readers_of(b)[0], flow.first_writer(b)
        op = net_def.op[i]
        known = sorted(flow.produced() | external)
        if w is not None:
            what = (
                f"reads '{b}' before its first writer ({describe_op(net_def.op[w], w)}), "
                "and it is neither an external input nor in the workspace"
            )
        else:
            what = f"reads '{b}', which no op produces, is not an external input and is not in the workspace"
        raise NetError(
            f"{label}: {describe_op(op, i)} {what}.{suggest(b, known)} Feed it first, or add it to external_input."
            f"{creation_site(op)}"
        )


def _describe_cycle(net_def: NetDef, g: Any) -> str:
    import networkx as nx

    cycle = nx.find_cycle(g)
    parts = []
    for a, b in cycle:
        blobs = sorted({blob for _, blob in g.edges[a, b]["kinds"]})
        parts.append(f"{describe_op(net_def.op[a], a)} -> ('{', '.join(blobs)}') ->")
    first = cycle[0][0]
    parts.append(describe_op(net_def.op[first], first))
    return " ".join(parts) + creation_site(net_def.op[first])


def compute_chains(g: Any, order: list[int]) -> list[list[int]]:
    """Group maximal linear runs of the (transitively reduced) graph into chains.

    An op joins its parent's chain when it is the parent's only child and the
    parent is its only parent; each chain is one scheduling task. Chains are
    listed in ``order`` of their first op, ops within a chain in order.
    """
    import networkx as nx

    reduced = nx.transitive_reduction(g) if g.number_of_edges() else g
    chain_of: dict[int, int] = {}
    chains: list[list[int]] = []
    for n in order:
        preds = list(reduced.predecessors(n))
        if len(preds) == 1 and reduced.out_degree(preds[0]) == 1:
            c = chain_of[preds[0]]
            chains[c].append(n)
        else:
            c = len(chains)
            chains.append([n])
        chain_of[n] = c
    return chains
