"""Subgraph matching for ``caffe2.python.nomnigraph``: ``NNMatchGraph`` and ``matchSubgraph``.

A match graph is a pattern of match nodes, each a predicate on one data-flow node: an operator of a given
name (``createNode(NeuralNetOperator(name))``), any tensor (``createNode(NeuralNetData(...))``) or anything
(``createNode()``). Matching starts at the pattern's root (its first node without in-edges) against one
node of the data-flow graph and follows out-edges, as Caffe2's Python binding does: a matched node's
out-edges are matched in order against its pattern node's children; a pattern node made ``strict`` must
account for every out-edge of the node it matches (a non-strict one, "non-terminal" in nomnigraph, matches
on its predicate alone and its children are not looked at); a pattern node reached twice must match the
same node both times. The result is the ``NNSubgraph`` of matched nodes and edges, empty when there is no
match.
"""

from __future__ import annotations

from typing import Any, Callable

from framework.caffe2.python.nomnigraph_graph import (
    NeuralNetData,
    NeuralNetOperator,
    NNSubgraph,
    NodeRef,
    _Store,
)
from framework.errors import NetError


class MatchNodeRef:
    """A pattern node: a predicate on data-flow nodes, and whether it is terminal (``strict``)."""

    __slots__ = ("criteria", "strict", "label", "_seq", "_owner", "__weakref__")

    def __init__(self, criteria: Callable[[NodeRef], bool], strict: bool, label: str) -> None:
        self.criteria, self.strict, self.label = criteria, bool(strict), label

    def _dot_attrs(self) -> dict[str, str]:
        return {"label": self.label}

    def __repr__(self) -> str:
        return f"MatchNode({self.label}, strict={self.strict})"


class NNMatchGraph(_Store):
    """A pattern to look for in a data-flow graph (``nn.match(pattern)``)."""

    def createNode(self, node: Any = None, strict: bool = False) -> MatchNodeRef:
        """A pattern node: ``NeuralNetOperator(name)`` matches operators of that name, ``NeuralNetData``
        any tensor, nothing (or ``createNode(strict=...)``) any node."""
        if isinstance(node, bool):
            node, strict = None, node
        if isinstance(node, NeuralNetOperator):
            name = node.getName()
            return self._add_node(MatchNodeRef(lambda n: n.isOperator() and n.getName() == name, strict, name))
        if isinstance(node, NeuralNetData):
            return self._add_node(MatchNodeRef(lambda n: n.isTensor(), strict, "Tensor"))
        if node is None:
            return self._add_node(MatchNodeRef(lambda n: True, strict, "*"))
        raise NetError(f"NNMatchGraph.createNode takes a NeuralNetOperator, a NeuralNetData or nothing, got {node!r}")

    def createEdge(self, a: MatchNodeRef, b: MatchNodeRef) -> None:
        self._add_edge(a, b)

    def root(self) -> MatchNodeRef:
        nodes = self.getMutableNodes()
        if not nodes:
            raise NetError("NNMatchGraph: the pattern has no nodes")
        sources = [n for n in nodes if not self.in_edges(n)]
        return (sources or nodes)[0]


def _match(node: NodeRef, pattern: MatchNodeRef, matched: dict, subgraph: NNSubgraph) -> bool:
    previous = matched.get(pattern)
    if previous is not None:
        return previous is node
    if not pattern.criteria(node):
        return False
    if pattern.strict:
        edges = node._owner.out_edges(node)
        children = [e.head for e in pattern._owner.out_edges(pattern)]
        if len(edges) != len(children):
            return False
        for edge, child in zip(edges, children):
            if not _match(edge.head, child, matched, subgraph):
                return False
            subgraph.addEdge(edge)
    matched[pattern] = node
    subgraph.addNode(node)
    return True


def matchSubgraph(node: NodeRef, pattern: NNMatchGraph) -> NNSubgraph:
    """The subgraph rooted at ``node`` that ``pattern`` matches, or an empty NNSubgraph."""
    subgraph = NNSubgraph()
    if _match(node, pattern.root(), {}, subgraph):
        return subgraph
    return NNSubgraph()
