"""onnx's shape inference with data propagation, only when its work is bounded (``infer_shapes``).

With ``data_prop=True`` onnx computes the values of shape-like tensors (the outputs of Shape, Concat,
Gather, Slice, arithmetic on them...) and the ranks they give Reshape, Expand, ConstantOfShape...
A chain of Concats of a tensor with itself doubles such a vector at each node, and a Reshape by it
turns the length into a rank that the next Shape propagates: a model of a few hundred bytes makes
onnx allocate until ``std::bad_alloc`` (a process-wide failure, not a Python error we can bound).

``value_bound`` walks the graph (and its subgraphs) once, in node order, and computes an upper bound
on every tensor's rank and on the length of every propagated value, from the declared shapes and the
initializers' sizes (already validated, so bounded by the file). ``infer_shapes`` runs data
propagation only when every bound stays within ``MAX_PROPAGATED``; otherwise it runs inference
without data propagation (whose work is linear in the model: ranks come from the declared shapes
and attributes only), so a hostile model loses some known shapes instead of the process.
"""

from __future__ import annotations

from typing import Any

__all__ = ["MAX_PROPAGATED", "value_bound", "infer_shapes"]

MAX_PROPAGATED = 1 << 12  # ranks and propagated shape-vector lengths: real models stay far below

_SUMS = {"Concat", "ConcatFromSequence", "SequenceConstruct"}  # propagated length: the sum of the inputs'
_RANK_FROM_VALUE = {"Reshape", "Expand", "ConstantOfShape", "Tile", "Unsqueeze", "Resize", "Upsample"}
_INT_TYPES = {2, 3, 4, 5, 6, 7, 12, 13}  # onnx TensorProto integer element types


def _attr_len(node: Any) -> int:
    """How many rank-like entries the node's attributes can add (axes, perm, shape, value...)."""
    n = 0
    for a in node.attribute:
        n += len(a.ints)
        if a.HasField("t"):
            n += len(a.t.dims) + 1
    return n


def _declared_rank(vi: Any) -> int:
    tt = vi.type.tensor_type if vi.type.HasField("tensor_type") else None
    return len(tt.shape.dim) if tt is not None and tt.HasField("shape") else 0


def value_bound(graph: Any, known: dict[str, tuple[int, int]] | None = None) -> int:
    """The largest bound on a rank or a propagated value's length anywhere in ``graph``.

    Each tensor gets (rank bound, propagated-length bound): graph inputs their declared rank and no
    values; integer initializers of rank <= 1 their length; Shape the rank of its input; Concat the
    sum of its inputs' lengths; ops whose output rank comes from a shape input (Reshape, Expand...)
    the largest input rank plus the largest propagated length; other ops the largest of their
    inputs' (plus their attribute lists). ``known`` carries the outer names into subgraphs."""
    bound: dict[str, tuple[int, int]] = dict(known or {})
    infos = list(graph.input) + list(graph.value_info) + list(graph.output)
    unknown = (max((_declared_rank(v) for v in infos), default=0) + 1, 0)
    for vi in graph.input:
        bound[vi.name] = (_declared_rank(vi), 0)
    for t in graph.initializer:
        n = 1
        for d in t.dims:
            n *= max(int(d), 1)
        bound[t.name] = (len(t.dims), n if len(t.dims) <= 1 and t.data_type in _INT_TYPES else 0)
    worst = max((max(b) for b in bound.values()), default=0)
    for node in graph.node:
        ins = [bound.get(i, unknown) for i in node.input if i]
        rank = max((r for r, _ in ins), default=0) + _attr_len(node)
        length = max((v for _, v in ins), default=0)
        if node.op_type == "Shape":
            rank, length = 1, max((r for r, _ in ins), default=0)
        elif node.op_type in _SUMS:
            length = sum(v for _, v in ins)
        elif node.op_type in _RANK_FROM_VALUE:
            rank += length
        for a in node.attribute:
            for sub in ([a.g] if a.HasField("g") else []) + list(a.graphs):
                rank = max(rank, value_bound(sub, bound))
        for o in node.output:
            if o:
                bound[o] = (rank, length)
        worst = max(worst, rank, length)
        if worst > MAX_PROPAGATED:  # already over: stop before the bounds themselves grow without end
            return worst
    return worst


def infer_shapes(model: Any) -> Any:
    """``onnx.shape_inference.infer_shapes(model)``, with data propagation when it is bounded.

    Raises what onnx raises for a model it cannot infer (callers fall back to declared infos)."""
    import onnx

    data_prop = value_bound(model.graph) <= MAX_PROPAGATED
    return onnx.shape_inference.infer_shapes(model, data_prop=data_prop)
