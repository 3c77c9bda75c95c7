"""``caffe2.python.nomnigraph_transformations``: rewrites written in Python on an ``NNModule``.

``transpose_network(nn)`` turns every NCHW ``Conv`` (no ``order`` argument means NCHW) into an NHWC one,
leaving the rest of the net as it was: the conv's data and filter inputs go through ``NCHW2NHWC`` into new
tensors, its outputs come back through ``NHWC2NCHW``, and the new conv keeps every argument but ``order``.
Then the transposes cancel out: where a tensor was made by ``NHWC2NCHW`` from an NHWC tensor, its
``NCHW2NHWC`` copies are dropped and their readers read that NHWC tensor; where a tensor feeds several
``NCHW2NHWC``, only the first stays and the others' readers read its output. So a chain of convolutions
transposes once on the way in and once per output, as in Caffe2.
"""

from __future__ import annotations

from typing import Any

from framework.caffe2.python.nomnigraph_graph import NeuralNetOperator, NodeRef
from framework.caffe2.python.utils import ArgsToDict


def _nchw_conv(node: NodeRef) -> dict | None:
    if not (node.isOperator() and node.getName() == "Conv"):
        return None
    args = ArgsToDict(node.getAnnotation().operator_def.arg)
    order = args.get("order", "NCHW")
    if isinstance(order, bytes):
        order = order.decode()
    return args if order == "NCHW" else None


def transpose_network(nn: Any) -> None:
    """Rewrite NCHW convolutions of ``nn`` (an NNModule) as NHWC ones, in place."""
    from framework.caffe2.python.core import CreateOperator

    made_from_nhwc: dict[NodeRef, NodeRef] = {}  # NCHW tensor written by NHWC2NCHW -> its NHWC source
    to_nhwc: dict[NodeRef, list[NodeRef]] = {}  # NCHW tensor -> the NCHW2NHWC ops reading it, in order
    for node in list(nn.nodes):
        args = _nchw_conv(node)
        if args is None:
            continue
        inputs, outputs = node.inputs, node.outputs
        if len(inputs) < 2 or not outputs:
            raise ValueError(f"transpose_network: Conv needs data and filter inputs and an output, got {node!r}")
        for tensor in inputs:
            nn.deleteEdge(tensor, node)
        for tensor in outputs:
            nn.deleteEdge(node, tensor)
        for k in range(2):
            nhwc = nn.createUniqueDataNode(inputs[k].name)
            transpose = nn.createNode(NeuralNetOperator("NCHW2NHWC"))
            nn.createEdge(inputs[k], transpose)
            nn.createEdge(transpose, nhwc)
            to_nhwc.setdefault(inputs[k], []).append(transpose)
            inputs[k] = nhwc
        for k, tensor in enumerate(outputs):
            nhwc = nn.createUniqueDataNode(tensor.name)
            transpose = nn.createNode(NeuralNetOperator("NHWC2NCHW"))
            nn.createEdge(nhwc, transpose)
            nn.createEdge(transpose, tensor)
            made_from_nhwc[tensor] = nhwc
            outputs[k] = nhwc
        args["order"] = "NHWC"
        conv = nn.createNode(CreateOperator("Conv", [], [], **args))
        for tensor in inputs:
            nn.createEdge(tensor, conv)
        for tensor in outputs:
            nn.createEdge(conv, tensor)
        nn.deleteNode(node)

    for nchw, transposes in to_nhwc.items():
        if nchw in made_from_nhwc:
            nhwc, redundant = made_from_nhwc[nchw], transposes
        else:
            nhwc, redundant = transposes[0].outputs[0], transposes[1:]
        for transpose in redundant:
            for out in transpose.outputs:
                nn.replaceAllUsesWith(out, nhwc)
                nn.deleteNode(out)
            nn.deleteNode(transpose)
