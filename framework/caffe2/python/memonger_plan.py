"""Caffe2's memonger planning API (``caffe2.python.memonger``): live ranges of blobs over a linear order
of ops, and their assignment to shared ("canonical") blobs.

- ``compute_interference_graph(ops)``: DiGraph of op indices, an edge i -> j (i < j) when op j reads an
  output of op i (edge attribute ``deps``);
- ``topological_sort_traversal`` (networkx's order) and ``topological_sort_traversal_longest_path``
  (source ops with the longest path to the end go first, so blobs live shorter);
- ``compute_ranges(ops, blob_sizes)``: ``LiveRange(defined, used, size)`` per blob (first write, last read,
  nested nets' reads included);
- ``compute_assignments_greedy`` / ``compute_assignments_dp``: chains of blobs whose ranges do not overlap
  (each blob defined after the previous one's last use); greedy picks the compatible chain closest in size,
  dp the chains of least ``get_memory_usage`` (sum over chains of the largest blob);
- ``optimize_interference(net, static_blobs, ...)`` reorders, assigns and renames: an ``Optimization``
  (net, assignments, blob_assignments); ``verify_graph_equality`` checks that two nets compute the same
  dataflow; ``compute_statistics`` compares bytes before and after from the blobs in the workspace.

Departure: ``compute_assignments_dp`` is an exact branch-and-bound search over the same choices as
Caffe2's dynamic programme (append each blob to a compatible chain or open a new one), so it finds an
assignment of the same, least, memory usage; above ``DP_MAX_BLOBS`` sharable blobs it uses greedy.
Departure: a blob's live range lasts until the last op whose nested nets (If, While, Do, a RecurrentNetwork's
step nets) read it; Caffe2's ends at the last op that lists it as an input, so a later nested read could
share a buffer still in use.
"""

from __future__ import annotations

import collections
import copy
import enum
import logging
from typing import Any, Callable, Iterable, Sequence

import networkx as nx

from framework.errors import FrameworkError
from framework.net.dataflow import DataFlow

log = logging.getLogger("framework.net.memory_planner")

LiveRange = collections.namedtuple("LiveRange", ["defined", "used", "size"])
Optimization = collections.namedtuple("Optimization", ["net", "assignments", "blob_assignments"])
Statistics = collections.namedtuple("Statistics", ["baseline_nbytes", "optimized_nbytes"])

DP_MAX_BLOBS = 24

__all__ = [
    "AssignmentAlgorithm",
    "LiveRange",
    "Optimization",
    "Statistics",
    "apply_assignments",
    "blob_nbytes",
    "collect_blob_sizes",
    "compute_assignments",
    "compute_assignments_dp",
    "compute_assignments_greedy",
    "compute_blob_assignments",
    "compute_interference_graph",
    "compute_ranges",
    "compute_statistics",
    "get_memory_usage",
    "get_updated_ranges",
    "is_compatible",
    "optimize_interference",
    "optimize_inference_for_dag",
    "release_blobs_when_used",
    "share_grad_blobs",
    "topological_sort_traversal",
    "topological_sort_traversal_longest_path",
    "verify_assignments",
    "verify_graph_equality",
    "verify_inplace_blobs",
]


class AssignmentAlgorithm(enum.Enum):
    GREEDY = 0
    DYNAMIC_PROGRAMMING = 1


# -- the dataflow graph and its orders ------------------------------------------------------------
def compute_interference_graph(ops: Sequence[Any]) -> nx.DiGraph:
    g = nx.DiGraph()
    for i, op in enumerate(ops):
        g.add_node(i, op=op)
    flow = DataFlow(ops)
    for i, parent in enumerate(ops):
        outs = set(parent.output)
        for j in sorted({j for b in outs for j in flow.readers_of(b) if j > i}):  # any later reader
            g.add_edge(i, j, deps=outs.intersection(ops[j].input))
    return g


def topological_sort_traversal(g: nx.DiGraph) -> list[int]:
    """The reverse post-order of a depth-first walk from each node in turn (successors in insertion
    order): the order networkx 2.x's ``topological_sort`` gave Caffe2, kept stable here because later
    networkx releases order nodes differently."""
    done: set[int] = set()
    post: list[int] = []
    for root in g:
        if root in done:
            continue
        stack = [(root, iter(g.successors(root)))]
        on_path = {root}
        while stack:
            node, succ = stack[-1]
            nxt = next((n for n in succ if n not in done), None)
            if nxt is None:
                stack.pop()
                on_path.discard(node)
                done.add(node)
                post.append(node)
            elif nxt in on_path:
                raise FrameworkError(f"memonger: the graph has a cycle through op {nxt}")
            else:
                on_path.add(nxt)
                stack.append((nxt, iter(g.successors(nxt))))
    return post[::-1]


def _longest_path_lengths(g: nx.DiGraph) -> dict[int, int]:
    """Per node, the number of edges of the longest path from it to a sink."""
    length: dict[int, int] = {}
    for n in reversed(list(nx.topological_sort(g))):
        length[n] = max((length[s] + 1 for s in g.successors(n)), default=0)
    return length


def topological_sort_traversal_longest_path(g: nx.DiGraph) -> list[int]:
    """A topological order that starts each source's chain by how long it is: the sources whose paths to
    the end are longest come first (ties by node index), then every node as early as its dependencies
    and this source order allow."""
    length = _longest_path_lengths(g)
    sources = sorted((n for n in g if g.in_degree(n) == 0), key=lambda n: (-length[n], n))
    rank: dict[int, int] = {}
    for s in sources:
        for d in [s, *sorted(nx.descendants(g, s))]:
            rank.setdefault(d, len(rank))
    return list(nx.lexicographical_topological_sort(g, key=lambda n: rank.get(n, len(rank) + n)))


# -- live ranges and assignments -----------------------------------------------------------------
def compute_ranges(linearized_ops: Sequence[Any], blob_sizes: dict[str, int] | None = None) -> dict[str, LiveRange]:
    """``LiveRange(defined=first writing op, used=last reading op, size)`` of every blob of the ops."""
    ranges: dict[str, LiveRange] = collections.defaultdict(lambda: LiveRange(None, None, None))

    def size_of(blob: str) -> Any:
        if not blob_sizes:
            return None
        if blob not in blob_sizes:
            raise FrameworkError(f"memonger: no size given for blob '{blob}'")
        return blob_sizes[blob]

    flow = DataFlow(linearized_ops)
    nested = DataFlow(linearized_ops, nested=True)  # a blob lives on while a nested net (If, Do, a step net) reads it
    for blob in flow.blobs():
        readers = nested.readers_of(blob)
        ranges[blob] = LiveRange(flow.first_writer(blob), readers[-1] if readers else None, size_of(blob))
    return ranges


def is_compatible(candidate: LiveRange, assignment: list, static_blobs: Iterable[str]) -> bool:
    """Whether a blob with range ``candidate`` can follow the last blob of the chain ``assignment``."""
    name, last = assignment[-1]
    if name in set(static_blobs) or candidate.defined is None or last.defined is None or last.used is None:
        return False
    return candidate.defined > last.used


def compute_blob_assignments(assignments: list) -> dict[str, str]:
    """Blob -> the canonical blob of its chain (the chain's last blob); single-blob chains are left out."""
    out = {}
    for chain in assignments:
        if len(chain) > 1:
            canonical = chain[-1][0]
            for blob, _ in chain:
                out[blob] = canonical
    return out


def _max_size(chain: list) -> int:
    return max((r.size or 0) for _, r in chain) if chain else 0


def get_memory_usage(assignments: list) -> int:
    """Sum over the chains of their largest blob (unknown sizes count 0)."""
    return sum(_max_size(c) for c in assignments)


def compute_assignments_greedy(ranges_sorted: list, init_assignments: list | None = None) -> list:
    """Each blob (in the given order) joins the compatible chain closest to it in size, or starts one."""
    assignments = init_assignments or []
    seen = {name for chain in assignments for name, _ in chain}
    for name, r in ranges_sorted:
        if name in seen:
            continue
        size = r.size or 0
        best, best_dist = None, float("inf")
        for idx, chain in enumerate(assignments):
            if is_compatible(r, chain, []):
                dist = abs(_max_size(chain) - size)
                if dist < best_dist:
                    best, best_dist = idx, dist
        if best is None:
            assignments.append([(name, r)])
        else:
            assignments[best].append((name, r))
    return assignments


def compute_assignments_dp(ranges_sorted: list, init_assignment: list | None, counter: Any = None) -> list:
    """Chains of least memory usage (see the module doc); ``counter`` is accepted for Caffe2's signature."""
    init = [list(c) for c in (init_assignment or [])]
    todo = [(n, r) for n, r in ranges_sorted if n not in {b for c in init for b, _ in c}]
    if len(todo) > DP_MAX_BLOBS:
        log.info("memonger: %d sharable blobs, using the greedy assignment", len(todo))
        return compute_assignments_greedy(ranges_sorted, init)
    best: list = [None, float("inf")]

    def search(k: int, chains: list) -> None:
        usage = get_memory_usage(chains)
        if usage >= best[1]:
            return  # adding blobs never lowers the usage
        if k == len(todo):
            best[0], best[1] = [list(c) for c in chains], usage
            return
        name, r = todo[k]
        for chain in chains:
            if is_compatible(r, chain, []):
                chain.append((name, r))
                search(k + 1, chains)
                chain.pop()
        chains.append([(name, r)])
        search(k + 1, chains)
        chains.pop()

    search(0, init)
    return best[0] if best[0] is not None else init


def get_updated_ranges(ranges: list, max_live: int | None = None) -> list:
    """Ranges with unknown ends filled: defined -1 (before every op), used ``max_live``, size 1."""
    if max_live is None:
        max_live = max((r.used for _, r in ranges if r.used), default=0) + 1
    out = []
    for name, r in ranges:
        r = r._replace(
            defined=-1 if r.defined is None else r.defined,
            used=max_live if r.used is None else r.used,
            size=1 if r.size is None else r.size,
        )
        out.append((name, r))
    return out


def compute_assignments(ranges: dict[str, LiveRange], static_blobs: Iterable[str], algo: AssignmentAlgorithm) -> list:
    """Chains for the sharable blobs (by last use) with ``algo``; every static blob alone in its chain."""
    static = set(static_blobs)
    ordered = get_updated_ranges(sorted(ranges.items(), key=lambda p: (p[1].used is None, p[1].used or 0)))
    sharable = [x for x in ordered if x[0] not in static]
    if algo == AssignmentAlgorithm.DYNAMIC_PROGRAMMING:
        chains = compute_assignments_dp(sharable, [])
    elif algo == AssignmentAlgorithm.GREEDY:
        chains = compute_assignments_greedy(sharable, [])
    else:
        raise FrameworkError(f"memonger: unknown assignment algorithm {algo!r}")
    return chains + [[x] for x in ordered if x[0] in static]


def verify_assignments(assignments: list) -> None:
    for chain in assignments:
        for (a, ra), (b, rb) in zip(chain, chain[1:]):
            if not ra.used < rb.defined:
                raise FrameworkError(f"memonger: '{a}' (used until op {ra.used}) overlaps '{b}' (op {rb.defined})")


def apply_assignments(net: Any, blob_assignments: dict[str, str]) -> None:
    """Rename the blobs of ``net`` (a NetDef, in place) to their canonical blobs, step nets included."""
    for op in net.op:
        if op.type.startswith("RecurrentNetwork"):
            for arg in op.arg:
                if arg.name.endswith("step_net"):
                    apply_assignments(arg.n, blob_assignments)
                    for i, b in enumerate(arg.n.external_input):
                        arg.n.external_input[i] = blob_assignments.get(b, b)
            from framework.proto.args import make_argument

            for blob, renamed in blob_assignments.items():
                if blob in list(op.input) + list(op.output):
                    op.arg.append(make_argument(blob + ".rename", str(renamed)))
        for i, b in enumerate(op.input):
            op.input[i] = blob_assignments.get(b, b)
        for i, b in enumerate(op.output):
            op.output[i] = blob_assignments.get(b, b)


def optimize_interference(
    net: Any,
    static_blobs: Iterable[str],
    ordering_function: Callable[[nx.DiGraph], list[int]] = topological_sort_traversal,
    blob_sizes: dict[str, int] | None = None,
    algo: AssignmentAlgorithm = AssignmentAlgorithm.GREEDY,
) -> Optimization:
    """Reorder ``net``'s ops (``ordering_function`` of the interference graph), compute live ranges,
    assign the non-static blobs to chains and rename them. ``net`` is not modified."""
    net = copy.deepcopy(net)
    order = ordering_function(compute_interference_graph(net.op))
    ops = [copy.deepcopy(net.op[i]) for i in order]
    del net.op[:]
    net.op.extend(ops)
    assignments = compute_assignments(compute_ranges(ops, blob_sizes), static_blobs, algo)
    blob_assignments = compute_blob_assignments(assignments)
    apply_assignments(net, blob_assignments)
    return Optimization(net=net, assignments=assignments, blob_assignments=blob_assignments)


def release_blobs_when_used(netproto: Any, dont_free_blobs: Iterable[str], selector_fun: Any = None) -> Any:
    """A copy of ``netproto`` with a ``Free`` op right after the last read of each intermediate blob: one
    an op of the net writes before any op reads it, that some op reads, that is not an external output,
    not in ``dont_free_blobs``, not the input of an ``Alias`` op, and (if given) ``selector_fun(blob)``."""
    from framework.core import CreateOperator

    netproto = copy.deepcopy(netproto)
    read: set[str] = set()
    candidates: set[str] = set()
    aliased: set[str] = set()
    for op in netproto.op:
        if op.type == "Alias":
            aliased.add(op.input[0])
            continue
        read.update(op.input)
        candidates.update(o for o in op.output if o not in read and (selector_fun is None or selector_fun(o)))
    releasable = (candidates & read) - set(netproto.external_output) - set(dont_free_blobs) - aliased
    ops = list(netproto.op)
    for j in reversed(range(len(netproto.op))):
        for blob in netproto.op[j].input:
            if blob in releasable:
                releasable.discard(blob)
                ops.insert(j + 1, CreateOperator("Free", [blob], [blob]))
    del netproto.op[:]
    netproto.op.extend(ops)
    return netproto


def _share_in_order(
    netproto: Any, shareable: set[str], blob_shapes: dict | None = None, shared_prefix: str | None = None
) -> Any:
    """Rename the ``shareable`` blobs of a copy of ``netproto`` to shared ones without reordering its ops
    (greedy chains over the net's own order; every other blob is static); the result is checked to run
    the same dataflow with the same in-place pairs. A chain's blob is its last blob's name, or with
    ``shared_prefix`` ``<shared_prefix>__m<k>_shared`` (Caffe2's C++ recycling names)."""
    import numpy as np

    optim = copy.deepcopy(netproto)
    ranges = compute_ranges(list(optim.op))
    if blob_shapes:
        ranges = {
            b: r._replace(size=int(np.prod(blob_shapes[b])) if b in blob_shapes else None) for b, r in ranges.items()
        }
        # Departure: with shapes known, only blobs of one shape share (Caffe2 shares the closest sizes: its
        # tensors keep their capacity, where a blob here written at another shape gets a new buffer each run)
        classes: dict[tuple, set[str]] = collections.defaultdict(set)
        for b in shareable:
            if b in blob_shapes and b in ranges:
                classes[tuple(blob_shapes[b])].add(b)
        mapping = {}
        for blobs in classes.values():
            chains = compute_assignments(ranges, set(ranges) - blobs, AssignmentAlgorithm.GREEDY)
            mapping.update(compute_blob_assignments(chains))
    else:
        static = set(ranges) - set(shareable)
        mapping = compute_blob_assignments(compute_assignments(ranges, static, AssignmentAlgorithm.GREEDY))
    if shared_prefix is not None:
        names: dict[str, str] = {}
        mapping = {b: names.setdefault(c, f"{shared_prefix}__m{len(names)}_shared") for b, c in mapping.items()}
    apply_assignments(optim, mapping)
    if not verify_graph_equality(netproto, optim) or not verify_inplace_blobs(netproto, optim):
        raise FrameworkError("memonger: the shared-blob net does not compute the same dataflow")
    return optim


def share_grad_blobs(
    net: Any,
    losses: Iterable[Any],
    param_grads: Iterable[Any],
    namescope: str,
    dont_share_blobs: Iterable[str] | None = None,
    share_activations: bool = False,
    blob_shapes: dict | None = None,
) -> Any:
    """Share the blobs of the gradients passed between layers (Torch's ``shareGradInput``): the blobs under
    ``namescope`` ending in ``_grad`` (the parameters' gradients excluded), and with ``share_activations``
    the activations of layers with a ``<out>_w`` weight except the last two. ``dont_share_blobs`` and the
    ``losses`` are never renamed. Returns the optimized NetDef (the ops keep their order; Caffe2 computes the
    recycling on the DAG in C++, this uses greedy chains over the op order: never more blobs than before).
    With ``blob_shapes`` ({blob: dims}, e.g. from a first run) only blobs of one shape share: the backward
    pass then reuses a few buffers that stay in cache, with no buffer made anew per run."""
    if namescope and not namescope.endswith("/"):
        namescope += "/"
    param_grads = {str(g) for g in param_grads}
    proto = net.Proto() if hasattr(net, "Proto") else net

    def is_grad_blob(b: str) -> bool:
        return (
            b.endswith("_grad") and (b.startswith(namescope) or b.startswith("_" + namescope)) and b not in param_grads
        )

    outputs = set(proto.external_output)
    activations = [b for op in proto.op for b in op.output if b + "_w" in op.input and b not in outputs]
    keep_acts = set(activations[:-2]) if share_activations else set()
    shareable = {b for op in proto.op for b in [*op.input, *op.output] if is_grad_blob(b) or b in keep_acts}
    shareable -= set(dont_share_blobs or ()) | {str(x) for x in losses}
    return _share_in_order(proto, shareable, blob_shapes)


def optimize_inference_for_dag(net: Any, input_blobs: Iterable[Any], namescope: str = "") -> Any:
    """Share the activation blobs (neither external inputs nor outputs) of an inference-only net, named
    ``<namescope>__m<k>_shared`` as Caffe2's. Raises FrameworkError for a gradient op or an activation read
    before any op writes it."""
    proto = net.Proto() if hasattr(net, "Proto") else net
    external = set(proto.external_input) | set(proto.external_output)
    written: set[str] = set()
    activations: set[str] = set()
    for op in proto.op:
        if op.is_gradient_op:
            raise FrameworkError("optimize_inference_for_dag takes inference-only nets (found a gradient op)")
        for b in op.input:
            if b not in external:
                if b not in written:
                    raise FrameworkError(f"optimize_inference_for_dag: '{b}' is read before written and not an input")
                activations.add(b)
        activations.update(b for b in op.output if b not in external)
        written.update(op.output)
    return _share_in_order(proto, activations - {str(b) for b in input_blobs}, shared_prefix=namescope)


# -- checks and statistics -----------------------------------------------------------------------
def verify_inplace_blobs(net_a: Any, net_b: Any) -> bool:
    """Whether the two nets' ops have the same types and the same in-place (input, output) pairs."""

    def inplace(op: Any) -> list:
        outs = list(op.output)
        return [[j, outs.index(b)] for j, b in enumerate(op.input) if b in outs]

    return all(a.type == b.type and inplace(a) == inplace(b) for a, b in zip(net_a.op, net_b.op))


def verify_graph_equality(net_a: Any, net_b: Any) -> bool:
    """Whether the nets run the same ops (type, device, engine) reading from the same producer ops."""

    def parents(ops: Sequence[Any]) -> list[list[int]]:
        owner: dict[str, int] = {}
        out = []
        for i, op in enumerate(ops):
            out.append([owner[b] for b in op.input if b in owner])
            for b in op.output:
                owner[b] = i
        return out

    if len(net_a.op) != len(net_b.op):
        return False
    for a, b in zip(net_a.op, net_b.op):
        if a.type != b.type or a.device_option != b.device_option or a.engine != b.engine:
            return False
    return parents(net_a.op) == parents(net_b.op)


def blob_nbytes(blob: str) -> int:
    """Bytes of ``blob`` in the current workspace (0, with a warning, if it cannot be fetched)."""
    from framework import workspace

    try:
        return int(workspace.FetchBlob(blob).nbytes)
    except Exception:
        log.warning("memonger: cannot fetch blob '%s'", blob)
        return 0


def compute_statistics(assignments: list) -> Statistics:
    """Bytes of all assigned blobs (baseline) and of their chains' largest blobs (optimized)."""
    nbytes = {blob: blob_nbytes(blob) for chain in assignments for blob, _ in chain}
    optimized = sum(max(nbytes[b] for b, _ in chain) for chain in assignments)
    return Statistics(baseline_nbytes=sum(nbytes.values()), optimized_nbytes=optimized)


def collect_blob_sizes(net: Any) -> dict[str, int]:
    """Bytes of every blob the ops of ``net`` read or write, from the current workspace."""
    return {b: blob_nbytes(b) for op in net.op for b in [*op.input, *op.output]}
