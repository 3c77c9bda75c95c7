"""The graph passes behind ``caffe2.python.transformations``, each on an ``NNModule``, by Caffe2's name.

Passes on the graph alone (Caffe2's OptimizationPassRegistry):

- ``AddNNPACK``: every ``Conv`` with data, filter and bias inputs, NCHW, all strides 1, a 2-D kernel and not
  Kx1 or 1xK gets ``engine="NNPACK"`` and ``convolution_transform_strategy="PRECOMPUTE"``.
- ``FuseNNPACKConvRelu``: a ``Conv`` on the NNPACK engine whose single output feeds only a ``Relu`` with one
  output, where NNPACK would be fast (``algo`` AUTO/unset with strides 1 and kernels >= 2, or WINOGRAD,
  WINOGRAD_FP16, FT8x8, FT16x16) becomes one ``Conv`` with ``activation="Relu"`` writing the Relu's
  output. The conv never becomes in-place: when the Relu wrote the conv's input name, the conv keeps its
  own output name and the Relu's readers read it; and when that makes the next op in-place, its input is
  renamed ``<name>_fusion_fix``.
- ``SinkMaxPool``: ``MaxPool -> Relu`` (one input, one output, only reader) becomes ``Relu -> MaxPool``
  (the same numbers: Relu is monotone; the Relu then runs on the larger tensor before pooling, as Caffe2).
- ``DeadCodeElim``: operators none of whose outputs is read or a net output go, repeatedly.

Passes that also change blobs (Caffe2's WorkspaceOptimizationPassRegistry), on the current workspace:

- ``FuseConvBN``: a ``Conv`` whose first output is read only by an inference ``SpatialBN`` (one output)
  folds the normalisation into its filter and bias blobs (W' = W s / sqrt(var + eps), b' = (b - mean) s /
  sqrt(var + eps) + bias_bn, per output channel, any kernel rank or order) and writes the BN's output; a conv
  without bias gets a zero bias blob under a new name (``_bias``, ``_bias_0``...). Departure: a SpatialBN
  with ``is_test`` unset is left alone (training BN normalises by batch statistics, so folding its running
  statistics would change the numbers; Caffe2 folds it anyway).
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from framework.caffe2.python.nomnigraph_graph import NodeRef
from framework.caffe2.python.utils import ArgsToDict
from framework.errors import BlobNotFoundError
from framework.proto.args import make_argument


def _text(value: Any) -> Any:
    return value.decode() if isinstance(value, bytes) else value


def _args(node: NodeRef) -> dict:
    return {k: _text(v) for k, v in ArgsToDict(node.getAnnotation().operator_def.arg).items()}


def _conv_geometry(args: dict) -> tuple[list[int], list[int]]:
    """(kernel shape, strides) of a conv's arguments, as Caffe2's converter reads them."""
    if "kernels" in args:
        kernel = [int(k) for k in args["kernels"]]
    elif "kernel" in args:
        kernel = [int(args["kernel"])] * 2
    else:
        kernel = [int(args.get("kernel_h", 0)), int(args.get("kernel_w", 0))]
    if "strides" in args:
        strides = [int(s) for s in args["strides"]]
    elif "stride" in args:
        strides = [int(args["stride"])] * 2
    else:
        strides = [int(args.get("stride_h", 1)), int(args.get("stride_w", 1))]
    return kernel, strides


def _ops(nn: Any, name: str) -> list[NodeRef]:
    return [n for n in nn.dataFlow.getMutableNodes() if n.isOperator() and n.getName() == name]


def add_nnpack(nn: Any, low_memory: bool = False) -> None:
    for node in _ops(nn, "Conv"):
        if len(node.inputs) < 3:
            continue
        args = _args(node)
        kernel, strides = _conv_geometry(args)
        if args.get("order", "NCHW") != "NCHW" or any(s != 1 for s in strides) or len(kernel) != 2:
            continue
        if kernel[0] != kernel[1] and (kernel[0] == 1 or kernel[1] == 1):
            continue
        op = node.getAnnotation().mutable_operator_def()
        op.engine = "NNPACK"
        if not low_memory:
            op.arg.append(make_argument("convolution_transform_strategy", "PRECOMPUTE"))


def _nnpack_relu_fast(args: dict) -> bool:
    algo = args.get("algo", "AUTO")
    if algo in ("AUTO", ""):
        kernel, strides = _conv_geometry(args)
        return all(s <= 1 for s in strides) and all(k >= 2 for k in kernel)
    return algo in ("WINOGRAD", "WINOGRAD_FP16", "FT8x8", "FT16x16")


def fuse_activation(
    nn: Any, op_name: str, act_name: str, should_fuse: Callable[[NodeRef], bool], postprocess: Callable
) -> None:
    """Fold each ``op_name -> act_name`` pair (single output, single reader) into the first op."""
    graph = nn.dataFlow
    for node in _ops(nn, op_name):
        if not graph.hasNode(node) or len(node.outputs) != 1:
            continue
        out = node.outputs[0]
        readers = out.consumers
        if len(readers) != 1 or not (readers[0].isOperator() and readers[0].getName() == act_name):
            continue
        act = readers[0]
        if len(act.outputs) != 1 or not should_fuse(node):
            continue
        act_out = act.outputs[0]
        if act_out.name != node.inputs[0].name:
            graph.replaceNode(out, act_out)
            graph.deleteNode(act)
            graph.deleteNode(out)
            result = act_out
        else:
            graph.replaceNode(act_out, out)
            graph.deleteNode(act)
            graph.deleteNode(act_out)
            result = out
        if any(o.name == result.name for reader in result.consumers for o in reader.outputs):
            fixed = graph.createNode(type(result.getTensor())(result.name + "_fusion_fix"))
            graph.replaceNode(result, fixed)
        postprocess(node)


def fuse_nnpack_conv_relu(nn: Any) -> None:
    def should_fuse(node: NodeRef) -> bool:
        args = _args(node)
        return node.getAnnotation().operator_def.engine == "NNPACK" and _nnpack_relu_fast(args)

    def postprocess(node: NodeRef) -> None:
        node.getAnnotation().mutable_operator_def().arg.append(make_argument("activation", "Relu"))

    fuse_activation(nn, "Conv", "Relu", should_fuse, postprocess)


def sink_max_pool(nn: Any) -> None:
    for pool in _ops(nn, "MaxPool"):
        if len(pool.inputs) != 1 or len(pool.outputs) != 1:
            continue
        readers = pool.outputs[0].consumers
        if len(readers) != 1 or not (readers[0].isOperator() and readers[0].getName() == "Relu"):
            continue
        if len(readers[0].outputs) != 1:
            continue
        nn.dataFlow.swapNodes(pool, readers[0])


def dead_code_elim(nn: Any) -> None:
    changed = True
    while changed:
        changed = False
        outputs = set(nn.outputs)
        for node in nn.operators:
            if any(t.consumers or t in outputs for t in node.outputs):
                continue
            for t in node.outputs:
                nn.dataFlow.deleteNode(t)
            nn.dataFlow.deleteNode(node)
            changed = True
            break


def _fetch(ws: Any, node: NodeRef, what: str) -> np.ndarray:
    if not ws.HasBlob(node.name):
        raise BlobNotFoundError(f"FuseConvBN: {what} blob '{node.name}' is not in the workspace")
    return np.asarray(ws.FetchBlob(node.name), dtype=np.float32)


def _fuse_conv_bn_once(nn: Any, ws: Any) -> bool:
    graph = nn.dataFlow
    for conv in _ops(nn, "Conv"):
        outs = conv.outputs
        if not outs:
            continue
        readers = outs[0].consumers
        if len(readers) != 1 or not (readers[0].isOperator() and readers[0].getName() == "SpatialBN"):
            continue
        bn = readers[0]
        bn_args = _args(bn)
        conv_in, bn_in = conv.inputs, bn.inputs
        if len(bn.outputs) != 1 or not bn_args.get("is_test", 0) or len(conv_in) < 2 or len(bn_in) < 5:
            continue
        w = _fetch(ws, conv_in[1], "filter")
        scale, shift, mean, var = (_fetch(ws, t, what) for t, what in zip(bn_in[1:5], ("scale", "bias", "mean", "var")))
        if len(conv_in) >= 3:
            bias_node, b = conv_in[2], _fetch(ws, conv_in[2], "bias")
        else:
            bias_node = nn.createUniqueDataNode("_bias")
            while ws.HasBlob(bias_node.name):
                graph.deleteNode(bias_node)
                bias_node = nn.createUniqueDataNode(bias_node.name)
            graph.createEdge(bias_node, conv)
            b = np.zeros(w.shape[0], np.float32)
        coeff = scale / np.sqrt(var + np.float32(bn_args.get("epsilon", 1e-5)))
        ws.FeedBlob(conv_in[1].name, (w * coeff.reshape((-1,) + (1,) * (w.ndim - 1))).astype(np.float32))
        ws.FeedBlob(bias_node.name, ((b - mean) * coeff + shift).astype(np.float32))
        bn_out = bn.outputs[0]
        graph.deleteNode(outs[0])
        graph.deleteNode(bn)
        graph.createEdge(conv, bn_out)
        return True
    return False


def fuse_conv_bn(nn: Any, ws: Any) -> None:
    while _fuse_conv_bn_once(nn, ws):
        pass


GRAPH_PASSES: dict[str, Callable[[Any], None]] = {
    "AddNNPACK": add_nnpack,
    "FuseNNPACKConvRelu": fuse_nnpack_conv_relu,
    "SinkMaxPool": sink_max_pool,
    "DeadCodeElim": dead_code_elim,
}
WORKSPACE_PASSES: dict[str, Callable[[Any, Any], None]] = {"FuseConvBN": fuse_conv_bn}
