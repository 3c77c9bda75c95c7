"""The graph layer under ``caffe2.python.nomnigraph``: Caffe2's nomnigraph data-flow graph on networkx.

A data-flow graph (``NNGraph``) is bipartite: operator nodes (``NeuralNetOperator`` values) and tensor nodes
(``NeuralNetData`` values), edges only between the two kinds. An operator's inputs are the tails of its
in-edges and its outputs the heads of its out-edges, in order: as in nomnigraph, each node keeps the order
of its in-edges and of its out-edges separately, creating an edge appends it to both ends' lists, and moving
one end of an edge (``replaceAllUsesWith``, ``replaceNode``...) appends it to the new end's list while the
other end keeps its position. The store is a ``networkx.MultiDiGraph`` keyed by ``Edge`` objects (a tensor
may feed one operator twice); each edge carries its two positions.

``NodeRef`` objects are the nodes themselves: the same object comes back from every accessor, so ``==``,
``in`` and dict keys work as with Caffe2's pybind references. ``Annotation`` is Caffe2Annotation: the
``OperatorDef`` an operator came from, its ``DeviceOption``, and the distributed fields (device string,
device type, key/length nodes, component levels).

Departures: an operator with no stored OperatorDef gets one of its own type when read
(``annotation.operator_def``) instead of Caffe2's "OperatorDef was never set" error, so a graph built from
bare ``NeuralNetOperator`` values converts back to a NetDef; bad calls raise ``NetError`` (a RuntimeError,
as Caffe2's enforce) instead of aborting on asserts.
"""

from __future__ import annotations

import itertools
from typing import Any, Iterable

import networkx as nx

from framework.errors import NetError
from framework.proto import caffe2_pb2


class NeuralNetOperator:
    """An operator value: its name (the op type) and an optional ``Annotation``."""

    def __init__(self, name: str) -> None:
        self._name = str(name)
        self.annotation: Annotation | None = None

    def getName(self) -> str:
        return self._name

    def __repr__(self) -> str:
        return f"NeuralNetOperator({self._name!r})"


class NeuralNetData:
    """A tensor value: its blob name."""

    def __init__(self, name: str) -> None:
        self._name = str(name)

    def getName(self) -> str:
        return self._name

    def __repr__(self) -> str:
        return f"NeuralNetData({self._name!r})"


class Annotation:
    """Caffe2Annotation: what an operator node carries besides its name.

    ``operator_def`` / ``device_option`` read a copy and assign a copy (as the pybind properties, which
    serialize); ``getDeviceOption`` of an annotation without one raises, as Caffe2."""

    def __init__(self) -> None:
        self._device = ""
        self._device_type = 0
        self._key_node: NodeRef | None = None
        self._length_node: NodeRef | None = None
        self._component_levels: list[str] = []
        self._device_option: Any = None
        self._operator_def: Any = None
        self._default_type = ""

    def copy(self) -> Annotation:
        other = Annotation()
        other.__dict__.update(self.__dict__)
        other._component_levels = list(self._component_levels)
        for field in ("_device_option", "_operator_def"):
            value = getattr(self, field)
            if value is not None:
                dup = type(value)()
                dup.CopyFrom(value)
                setattr(other, field, dup)
        return other

    def setDevice(self, device: str) -> None:
        self._device = str(device)

    def getDevice(self) -> str:
        return self._device

    def setDeviceType(self, device_type: int) -> None:
        self._device_type = int(device_type)

    def getDeviceType(self) -> int:
        return self._device_type

    def setKeyNode(self, node: NodeRef) -> None:
        self._key_node = node

    def getKeyNode(self) -> NodeRef | None:
        return self._key_node

    def setLengthNode(self, node: NodeRef) -> None:
        self._length_node = node

    def getLengthNode(self) -> NodeRef | None:
        return self._length_node

    def setComponentLevels(self, levels: Iterable[str]) -> None:
        self._component_levels = [str(x) for x in levels]

    def getComponentLevels(self) -> list[str]:
        return list(self._component_levels)

    def hasDeviceOption(self) -> bool:
        return self._device_option is not None

    def hasOperatorDef(self) -> bool:
        return self._operator_def is not None

    @property
    def device_option(self) -> Any:
        if self._device_option is None:
            raise NetError("Annotation: DeviceOption was never set (assign annotation.device_option first)")
        out = caffe2_pb2.DeviceOption()
        out.CopyFrom(self._device_option)
        return out

    @device_option.setter
    def device_option(self, value: Any) -> None:
        if not hasattr(value, "SerializeToString"):
            raise NetError(f"Annotation: device_option can only be set to a DeviceOption, got {type(value).__name__}")
        self._device_option = caffe2_pb2.DeviceOption.FromString(value.SerializeToString())

    @property
    def operator_def(self) -> Any:
        out = caffe2_pb2.OperatorDef()
        if self._operator_def is not None:
            out.CopyFrom(self._operator_def)
        else:
            out.type = self._default_type
        return out

    @operator_def.setter
    def operator_def(self, value: Any) -> None:
        if not hasattr(value, "SerializeToString"):
            raise NetError(f"Annotation: operator_def can only be set to an OperatorDef, got {type(value).__name__}")
        self._operator_def = caffe2_pb2.OperatorDef.FromString(value.SerializeToString())

    def mutable_operator_def(self) -> Any:
        """The stored OperatorDef itself (created from the op's name if absent), for passes that edit it."""
        if self._operator_def is None:
            self._operator_def = caffe2_pb2.OperatorDef(type=self._default_type)
        return self._operator_def


class Edge:
    """A directed edge tail -> head; ``_out_pos`` orders it among the tail's out-edges, ``_in_pos`` among the
    head's in-edges."""

    __slots__ = ("tail", "head", "_out_pos", "_in_pos")

    def __init__(self, tail: Any, head: Any, out_pos: int, in_pos: int) -> None:
        self.tail, self.head, self._out_pos, self._in_pos = tail, head, out_pos, in_pos

    def __repr__(self) -> str:
        return f"Edge({self.tail!r} -> {self.head!r})"


class _Store:
    """Nodes and ordered edges over a networkx MultiDiGraph (shared by NNGraph, Graph and NNMatchGraph)."""

    def __init__(self) -> None:
        self._g = nx.MultiDiGraph()
        self._counter = itertools.count()

    def _add_node(self, node: Any) -> Any:
        node._seq = next(self._counter)
        node._owner = self
        self._g.add_node(node)
        return node

    def _check_node(self, node: Any, what: str) -> None:
        if not self._g.has_node(node):
            raise NetError(f"{type(self).__name__}.{what}: {node!r} is not a node of this graph")

    def _add_edge(self, tail: Any, head: Any) -> Edge:
        self._check_node(tail, "createEdge")
        self._check_node(head, "createEdge")
        edge = Edge(tail, head, next(self._counter), next(self._counter))
        self._g.add_edge(tail, head, key=edge)
        return edge

    def _remove_edge(self, edge: Edge) -> None:
        if not self._g.has_edge(edge.tail, edge.head, key=edge):
            raise NetError(f"{type(self).__name__}.deleteEdge: {edge!r} is not an edge of this graph")
        self._g.remove_edge(edge.tail, edge.head, key=edge)

    def _move_edge(self, edge: Edge, tail: Any = None, head: Any = None) -> None:
        """Re-attach one end of an edge; the moved end appends it to its list, the other end keeps its place."""
        self._remove_edge(edge)
        if tail is not None:
            edge.tail, edge._out_pos = tail, next(self._counter)
        if head is not None:
            edge.head, edge._in_pos = head, next(self._counter)
        self._g.add_edge(edge.tail, edge.head, key=edge)

    def in_edges(self, node: Any) -> list[Edge]:
        return sorted((k for _, _, k in self._g.in_edges(node, keys=True)), key=lambda e: e._in_pos)

    def out_edges(self, node: Any) -> list[Edge]:
        return sorted((k for _, _, k in self._g.out_edges(node, keys=True)), key=lambda e: e._out_pos)

    def getMutableNodes(self) -> list[Any]:
        """Every node, in creation order."""
        return sorted(self._g.nodes, key=lambda n: n._seq)

    def getMutableEdges(self) -> list[Edge]:
        return sorted((k for _, _, k in self._g.edges(keys=True)), key=lambda e: e._out_pos)

    def hasNode(self, node: Any) -> bool:
        return self._g.has_node(node)

    def getEdgeIfExists(self, tail: Any, head: Any) -> Edge | None:
        if not (self._g.has_node(tail) and self._g.has_node(head)):
            return None
        edges = [e for e in self.out_edges(tail) if e.head is head]
        return edges[0] if edges else None

    def deleteNode(self, node: Any) -> None:
        """Remove a node and every edge touching it."""
        self._check_node(node, "deleteNode")
        self._g.remove_node(node)

    def deleteNodes(self, nodes: Iterable[Any]) -> None:
        for node in list(nodes):
            if self._g.has_node(node):
                self._g.remove_node(node)

    def replaceNode(self, old: Any, new: Any) -> None:
        """Move every edge of ``old`` onto ``new`` (in-edges then out-edges, in ``old``'s order)."""
        self._check_node(old, "replaceNode")
        self._check_node(new, "replaceNode")
        for edge in self.in_edges(old):
            self._move_edge(edge, head=new)
        for edge in self.out_edges(old):
            self._move_edge(edge, tail=new)

    def swapNodes(self, a: Any, b: Any) -> None:
        """Exchange the places of two nodes: every edge end at ``a`` moves to ``b`` and the reverse,
        each keeping its position."""
        self._check_node(a, "swapNodes")
        self._check_node(b, "swapNodes")
        touching = {id(e): e for n in (a, b) for e in self.in_edges(n) + self.out_edges(n)}
        swap = {a: b, b: a}
        for edge in touching.values():
            self._g.remove_edge(edge.tail, edge.head, key=edge)
        for edge in touching.values():
            edge.tail, edge.head = swap.get(edge.tail, edge.tail), swap.get(edge.head, edge.head)
            self._g.add_edge(edge.tail, edge.head, key=edge)

    def _dot(self, nodes: Iterable[Any], edges: Iterable[Edge]) -> str:
        lines = ["digraph G {", "  rankdir=LR"]
        for node in nodes:
            attrs = node._dot_attrs()
            lines.append(f"  {node._seq}[" + ",".join(f'{k}="{v}"' for k, v in attrs.items()) + "];")
        for edge in edges:
            lines.append(f"  {edge.tail._seq} -> {edge.head._seq};")
        lines.append("}")
        return "\n".join(lines) + "\n"

    def __repr__(self) -> str:
        return self._dot(self.getMutableNodes(), self.getMutableEdges())


class NodeRef:
    """A node of an ``NNGraph`` holding a ``NeuralNetOperator`` or ``NeuralNetData``."""

    __slots__ = ("_value", "_seq", "_owner", "__weakref__")

    def __init__(self, value: NeuralNetOperator | NeuralNetData) -> None:
        self._value = value

    # what the node is
    def isOperator(self) -> bool:
        return isinstance(self._value, NeuralNetOperator)

    def isTensor(self) -> bool:
        return isinstance(self._value, NeuralNetData)

    def getType(self) -> str:
        return "Operator" if self.isOperator() else "Tensor"

    type = property(getType)

    def getName(self) -> str:
        return self._value.getName()

    name = property(getName)

    def _need(self, operator: bool, what: str) -> None:
        if self.isOperator() != operator:
            kind = "an operator" if operator else "a tensor"
            raise NetError(f"NodeRef.{what}: node '{self.getName()}' is not {kind}")

    def getOperator(self) -> NeuralNetOperator:
        self._need(True, "getOperator")
        return self._value

    def getTensor(self) -> NeuralNetData:
        self._need(False, "getTensor")
        return self._value

    operator = property(getOperator)
    tensor = property(getTensor)

    # neighbours
    def getInputs(self) -> list[NodeRef]:
        self._need(True, "inputs")
        return [e.tail for e in self._owner.in_edges(self)]

    def getOutputs(self) -> list[NodeRef]:
        self._need(True, "outputs")
        return [e.head for e in self._owner.out_edges(self)]

    inputs = property(getInputs)
    outputs = property(getOutputs)

    def hasProducer(self) -> bool:
        return bool(self._owner.in_edges(self))

    def getProducer(self) -> NodeRef:
        self._need(False, "producer")
        edges = self._owner.in_edges(self)
        if not edges:
            raise NetError(f"NodeRef.producer: tensor '{self.getName()}' has no producer")
        return edges[0].tail

    def getConsumers(self) -> list[NodeRef]:
        self._need(False, "consumers")
        return [e.head for e in self._owner.out_edges(self)]

    producer = property(getProducer)
    consumers = property(getConsumers)

    def getOperatorPredecessors(self) -> list[NodeRef]:
        """The producers of this operator's inputs, one per input that has one."""
        return [t.getProducer() for t in self.getInputs() if t.hasProducer()]

    def getOperatorSuccessors(self) -> list[NodeRef]:
        """The consumers of this operator's outputs."""
        return [c for t in self.getOutputs() for c in t.getConsumers()]

    # annotation
    def getAnnotation(self) -> Annotation:
        """The operator's annotation itself (created empty if absent), so edits stick."""
        op = self.getOperator()
        if op.annotation is None:
            op.annotation = Annotation()
            op.annotation._default_type = op.getName()
        return op.annotation

    def setAnnotation(self, annotation: Annotation) -> None:
        if not isinstance(annotation, Annotation):
            raise NetError(f"NodeRef.setAnnotation: expected an Annotation, got {type(annotation).__name__}")
        op = self.getOperator()
        op.annotation = annotation.copy()
        op.annotation._default_type = op.getName()

    annotation = property(getAnnotation, setAnnotation)

    def _dot_attrs(self) -> dict[str, str]:
        if self.isOperator():
            return {"label": self.getName(), "shape": "box"}
        return {"label": self.getName()}

    def __repr__(self) -> str:
        return f"<{self.getType()} node '{self.getName()}'>"


class NNGraph(_Store):
    """The data-flow graph of an ``NNModule``."""

    def createNode(self, value: Any) -> NodeRef:
        """A new node from a ``NeuralNetOperator``, a ``NeuralNetData`` (each copied by name) or an
        ``OperatorDef`` (stored in the node's annotation; its inputs and outputs are dropped)."""
        if isinstance(value, NeuralNetOperator):
            return self._add_node(NodeRef(NeuralNetOperator(value.getName())))
        if isinstance(value, NeuralNetData):
            return self._add_node(NodeRef(NeuralNetData(value.getName())))
        if hasattr(value, "SerializeToString") and hasattr(value, "type"):
            op_def = caffe2_pb2.OperatorDef.FromString(value.SerializeToString())
            return self._add_node(operator_node(op_def))
        raise NetError(
            f"NNGraph.createNode takes a NeuralNetOperator, a NeuralNetData or an OperatorDef, got {value!r}"
        )

    def createEdge(self, a: NodeRef, b: NodeRef) -> None:
        if not (isinstance(a, NodeRef) and isinstance(b, NodeRef) and a.isOperator() != b.isOperator()):
            raise NetError(
                f"NNGraph.createEdge: edges must exist between NeuralNetOperator and NeuralNetData ({a!r} -> {b!r})"
            )
        self._add_edge(a, b)

    def deleteEdge(self, a: Any, b: Any = None) -> None:
        """Delete an ``Edge``, or the first edge a -> b if there is one."""
        if b is None:
            self._remove_edge(a)
            return
        edge = self.getEdgeIfExists(a, b)
        if edge is not None:
            self._remove_edge(edge)

    @property
    def nodes(self) -> list[NodeRef]:
        return self.getMutableNodes()

    @property
    def operators(self) -> list[NodeRef]:
        return [n for n in self.getMutableNodes() if n.isOperator()]

    @property
    def tensors(self) -> list[NodeRef]:
        return [n for n in self.getMutableNodes() if n.isTensor()]

    def execution_order(self) -> list[NodeRef]:
        """Operators in an order where every producer precedes its consumers, creation order where free."""
        try:
            order = nx.lexicographical_topological_sort(self._g, key=lambda n: n._seq)
            return [n for n in order if n.isOperator()]
        except nx.NetworkXUnfeasible as e:
            raise NetError("NNGraph: the data-flow graph has a cycle, so it has no execution order") from e


def operator_node(op_def: Any) -> NodeRef:
    """An operator node for an OperatorDef (kept whole in its annotation, device option included)."""
    node = NodeRef(NeuralNetOperator(op_def.type))
    annotation = Annotation()
    annotation._default_type = op_def.type
    annotation._operator_def = op_def
    if op_def.HasField("device_option"):
        annotation._device_option = caffe2_pb2.DeviceOption()
        annotation._device_option.CopyFrom(op_def.device_option)
    node._value.annotation = annotation
    return node


class NNSubgraph:
    """A set of nodes (and edges) of one NNGraph: what matching returns and ``replaceSubgraph`` takes."""

    def __init__(self) -> None:
        self._nodes: dict[NodeRef, None] = {}
        self._edges: dict[Edge, None] = {}

    def addNode(self, node: NodeRef) -> None:
        self._nodes[node] = None

    def removeNode(self, node: NodeRef) -> None:
        self._nodes.pop(node, None)

    def addEdge(self, edge: Edge) -> None:
        self._edges[edge] = None

    def hasNode(self, node: NodeRef) -> bool:
        return node in self._nodes

    def induceEdges(self) -> None:
        """Add every edge of the graph whose two ends are both in the subgraph."""
        for node in self._nodes:
            for edge in node._owner.out_edges(node):
                if edge.head in self._nodes:
                    self._edges[edge] = None

    @property
    def nodes(self) -> list[NodeRef]:
        return list(self._nodes)

    def getNodes(self) -> list[NodeRef]:
        return list(self._nodes)

    def __len__(self) -> int:
        return len(self._nodes)

    def __repr__(self) -> str:
        return _Store._dot(self, self._nodes, self._edges)


class Node:
    """A node of a generic ``Graph``: any Python value."""

    __slots__ = ("data", "_seq", "_owner", "__weakref__")

    def __init__(self, data: Any) -> None:
        self.data = data

    def _dot_attrs(self) -> dict[str, str]:
        return {"label": str(self.data)}

    def __repr__(self) -> str:
        return f"Node({self.data!r})"


class Graph(_Store):
    """nomnigraph's generic graph of Python values (``ng.Graph``)."""

    def createNode(self, data: Any) -> Node:
        return self._add_node(Node(data))

    def createEdge(self, a: Node, b: Node) -> Edge:
        return self._add_edge(a, b)

    def deleteEdge(self, edge: Edge) -> None:
        self._remove_edge(edge)
