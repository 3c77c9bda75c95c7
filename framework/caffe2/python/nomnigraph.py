"""``caffe2.python.nomnigraph``: Caffe2's graph IR for nets (NNModule) on networkx.

``NNModule(net)`` turns a ``core.Net`` or ``NetDef`` into a data-flow graph (see ``nomnigraph_graph``):
one operator node per op, holding the op's OperatorDef; one tensor node per version of a blob, the way
Caffe2's converter builds it: a blob read before any op writes it is one node, and every op output is a
new node (an in-place ``Relu(Y) -> Y`` reads one ``Y`` node and writes another). ``external_input`` names
are the module's inputs, ``external_output`` names (their last version) its outputs; names nothing uses
still get a node, so they survive.

``convertToCaffe2Proto(old_proto)`` writes a NetDef back: the fields of ``old_proto`` (name, type, args,
device option...), then the operators in ``controlFlow`` order, each its stored OperatorDef (or a new one
of the node's type) with inputs and outputs from the graph's edges, in edge order; external inputs and
outputs are the module's, in ``old_proto``'s order first and the rest in the module's. So
``NNModule(net_def).convertToCaffe2Proto(net_def) == net_def`` for any NetDef.

``controlFlow`` is the operators in execution order: a topological order of the data flow that keeps
creation order where it is free (for an unchanged NetDef, its op order). Caffe2 orders by basic blocks of
its control-flow graph, which for the straight-line nets it converts is the same order.

``NNModule(net, device_map)`` (Caffe2's distributed form) checks that each named blob is a blob of the net
and keeps the map as ``blob_device_options``; the ops are converted as above. ``render`` prints the Dot
text (through ``graph-easy`` when that program is installed, as Caffe2).
"""

from __future__ import annotations

import collections
import os
import shutil
import subprocess
from typing import Any, Iterator

from framework.caffe2.python.nomnigraph_graph import (
    Annotation,
    Graph,
    NeuralNetData,
    NeuralNetOperator,
    NNGraph,
    NNSubgraph,
    NodeRef,
    operator_node,
)
from framework.caffe2.python.nomnigraph_match import MatchNodeRef, NNMatchGraph, matchSubgraph
from framework.errors import NetError
from framework.proto import caffe2_pb2

__all__ = [
    "Annotation",
    "Data",
    "Graph",
    "MatchNodeRef",
    "NNMatchGraph",
    "NNModule",
    "NNSubgraph",
    "NeuralNetData",
    "NeuralNetOperator",
    "NodeRef",
    "Operator",
    "matchSubgraph",
    "render",
]

Operator = NeuralNetOperator
Data = NeuralNetData


def _as_net_def(net: Any) -> Any:
    if hasattr(net, "Proto") and callable(net.Proto):
        net = net.Proto()
    if isinstance(net, caffe2_pb2.NetDef):
        return net
    if hasattr(net, "SerializeToString") and hasattr(net, "op"):
        return caffe2_pb2.NetDef.FromString(net.SerializeToString())
    raise NetError(f"NNModule can be constructed with core.Net or caffe2_pb2.NetDef types, got {type(net).__name__}")


class NNModule:
    """A net as a data-flow graph, with the input and output tensors of the net."""

    def __init__(self, net: Any = None, device_map: dict | None = None) -> None:
        self._graph = NNGraph()
        self._inputs: list[NodeRef] = []
        self._outputs: list[NodeRef] = []
        self.blob_device_options: dict[str, Any] = {}
        if net is not None:
            self._build(_as_net_def(net))
            if device_map is not None:
                self._set_device_map(device_map)

    def _build(self, net_def: Any) -> None:
        latest: dict[str, NodeRef] = {}

        def tensor(name: str) -> NodeRef:
            if name not in latest:
                latest[name] = self._graph.createNode(NeuralNetData(name))
            return latest[name]

        for name in net_def.external_input:
            self._inputs.append(tensor(name))
        for op in net_def.op:
            op_def = caffe2_pb2.OperatorDef()
            op_def.CopyFrom(op)
            node = self._graph._add_node(operator_node(op_def))
            for name in op.input:
                self._graph.createEdge(tensor(name), node)
            for name in op.output:
                out = self._graph.createNode(NeuralNetData(name))
                latest[name] = out
                self._graph.createEdge(node, out)
        for name in net_def.external_output:
            self._outputs.append(tensor(name))

    def _set_device_map(self, device_map: dict) -> None:
        names = {n.getName() for n in self._graph.tensors}
        for name, option in device_map.items():
            if name not in names:
                raise NetError(f"NNModule: device_map names blob '{name}', which the net does not use")
            if not hasattr(option, "SerializeToString"):
                raise NetError(f"NNModule: device_map['{name}'] must be a DeviceOption, got {type(option).__name__}")
            self.blob_device_options[name] = caffe2_pb2.DeviceOption.FromString(option.SerializeToString())

    # graph views
    @property
    def dataFlow(self) -> NNGraph:
        return self._graph

    @property
    def controlFlow(self) -> list[NodeRef]:
        return self._graph.execution_order()

    @property
    def nodes(self) -> list[NodeRef]:
        return self._graph.nodes

    @property
    def operators(self) -> list[NodeRef]:
        return self._graph.operators

    @property
    def tensors(self) -> list[NodeRef]:
        return self._graph.tensors

    @property
    def inputs(self) -> list[NodeRef]:
        """The net's external inputs still in the graph."""
        return [n for n in self._inputs if self._graph.hasNode(n)]

    @property
    def outputs(self) -> list[NodeRef]:
        """The net's external outputs still in the graph."""
        return [n for n in self._outputs if self._graph.hasNode(n)]

    # editing
    def createNode(self, val: Any) -> NodeRef:
        return self._graph.createNode(val)

    def deleteNode(self, node: NodeRef) -> None:
        self._graph.deleteNode(node)

    def createEdge(self, a: NodeRef, b: NodeRef) -> None:
        self._graph.createEdge(a, b)

    def deleteEdge(self, a: Any, b: Any = None) -> None:
        self._graph.deleteEdge(a, b)

    def replaceNode(self, old_node: NodeRef, new_node: NodeRef) -> None:
        self._graph.replaceNode(old_node, new_node)

    def replaceProducer(self, tensor: NodeRef, new_producer: NodeRef) -> None:
        """Make ``new_producer`` write ``tensor`` instead of its current producer."""
        for edge in self._graph.in_edges(tensor):
            self._graph._remove_edge(edge)
        self._graph.createEdge(new_producer, tensor)

    def replaceAllUsesWith(self, old_tensor: NodeRef, new_tensor: NodeRef) -> None:
        """Every consumer of ``old_tensor`` reads ``new_tensor`` instead, at the same input position."""
        for edge in self._graph.out_edges(old_tensor):
            self._graph._move_edge(edge, tail=new_tensor)

    def replaceAsConsumer(self, old_consumer: NodeRef, new_consumer: NodeRef) -> None:
        """``new_consumer`` reads the inputs of ``old_consumer``, in order; the old one reads nothing."""
        for edge in self._graph.in_edges(old_consumer):
            self._graph._move_edge(edge, head=new_consumer)

    def deleteSubgraph(self, subgraph: NNSubgraph) -> None:
        self._graph.deleteNodes(subgraph.getNodes())

    def replaceSubgraph(
        self, subgraph: NNSubgraph, node: NodeRef, inputs: list[NodeRef], outputs: list[NodeRef]
    ) -> None:
        """Replace ``subgraph`` by the operator ``node``, which reads ``inputs`` and writes ``outputs``.

        ``inputs`` must list every tensor of the subgraph produced outside it, ``outputs`` every tensor of
        it read outside it (or by nothing); those tensors stay, the rest of the subgraph goes."""
        nodes = set(subgraph.getNodes())
        sg_inputs = {n for n in nodes if n.isTensor() and (not n.hasProducer() or n.getProducer() not in nodes)}
        sg_outputs = {
            n for n in nodes if n.isTensor() and (not n.getConsumers() or any(c not in nodes for c in n.getConsumers()))
        }
        missing_in = sg_inputs - set(inputs)
        missing_out = sg_outputs - set(outputs) - set(inputs)
        if missing_in or missing_out:
            names = sorted(n.getName() for n in missing_in | missing_out)
            raise NetError(f"NNModule.replaceSubgraph: inputs/outputs of the subgraph not listed: {names}")
        keep = set()
        for tensor in inputs:
            self._graph.createEdge(tensor, node)
            keep.add(tensor)
        for tensor in outputs:
            if tensor in sg_inputs:
                self._graph.createEdge(node, self.createUniqueDataNode())
                continue
            self._graph.createEdge(node, tensor)
            keep.add(tensor)
        self._graph.deleteNodes(n for n in nodes if n not in keep)

    def createUniqueDataNode(self, prefix: str = "_unique") -> NodeRef:
        """A new tensor node named ``prefix``, or ``prefix_0``, ``prefix_1``... if a node has that name."""
        used = {n.getName() for n in self._graph.getMutableNodes()}
        name, k = prefix, 0
        while name in used:
            name, k = f"{prefix}_{k}", k + 1
        return self._graph.createNode(NeuralNetData(name))

    # conversion and matching
    def convertToCaffe2Proto(self, old_proto: Any = None) -> Any:
        net_def = caffe2_pb2.NetDef()
        if old_proto is not None:
            net_def.CopyFrom(_as_net_def(old_proto))
        del net_def.op[:]
        for node in self.controlFlow:
            op = node.getAnnotation().operator_def
            annotation = node.getAnnotation()
            if annotation.hasDeviceOption():
                op.device_option.CopyFrom(annotation.device_option)
            del op.input[:]
            del op.output[:]
            op.input.extend(t.getName() for t in node.getInputs())
            op.output.extend(t.getName() for t in node.getOutputs())
            net_def.op.add().CopyFrom(op)
        for field, nodes in (("external_input", self.inputs), ("external_output", self.outputs)):
            merged = _merge_names(list(getattr(net_def, field)), [n.getName() for n in nodes])
            del getattr(net_def, field)[:]
            getattr(net_def, field).extend(merged)
        return net_def

    def match(self, pattern: NNMatchGraph) -> Iterator[NNSubgraph]:
        """Every non-empty match of ``pattern`` rooted at a node of the graph, in node order."""
        for node in self._graph.getMutableNodes():
            if self._graph.hasNode(node):
                found = matchSubgraph(node, pattern)
                if len(found):
                    yield found


def _merge_names(old: list[str], current: list[str]) -> list[str]:
    """``current``'s names (a multiset), those also in ``old`` first and in ``old``'s order."""
    left = collections.Counter(current)
    out = []
    for name in old:
        if left[name] > 0:
            out.append(name)
            left[name] -= 1
    for name in current:
        if left[name] > 0:
            out.append(name)
            left[name] -= 1
    return out


def render(s: Any) -> None:
    """Print a graph's Dot text, drawn by ``graph-easy`` when that program is on the PATH."""
    text = str(s)
    exe = shutil.which("graph-easy", path=os.getenv("PATH", ""))
    if exe is None:
        print(text)
        return
    try:
        subprocess.run([exe], input=text.encode("utf-8"), check=False)
    except OSError:
        print(text)
