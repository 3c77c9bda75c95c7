"""ONNX -> our ops: normalizations (RMSNormalization, GroupNormalization, MeanVarianceNormalization)
and the classification losses (NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss)."""

from __future__ import annotations

from framework.onnx.import_attention import FLOATS16, outputs
from framework.onnx.importer import FLOATS, INTS, ImportContext, Node, Unsupported, translator


def _loss(ctx: ImportContext, node: Node, kind: str) -> None:
    ctx.require(node, FLOATS16, [0, 2])
    ctx.require(node, INTS, [1])
    if ctx.rank(node.input(0)) < 2:
        raise Unsupported("input of rank < 2")
    args = {"reduction": node.attr("reduction", "mean")}
    if node.attr("ignore_index") is not None:
        args["ignore_index"] = int(node.attr("ignore_index"))
    ins = [n for n in node.inputs[:3] if n]
    ctx.op(kind, ins, outputs(ctx, node, "loss_unused"), **args)


@translator("NegativeLogLikelihoodLoss")
def _nll(ctx: ImportContext, node: Node) -> None:
    _loss(ctx, node, "ONNXNegativeLogLikelihoodLoss")


@translator("SoftmaxCrossEntropyLoss")
def _sce(ctx: ImportContext, node: Node) -> None:
    _loss(ctx, node, "ONNXSoftmaxCrossEntropyLoss")


@translator("RMSNormalization", opsets=(23, 10_000))
def _rms_norm(ctx: ImportContext, node: Node) -> None:
    ctx.require(node, FLOATS16)
    if ctx.dtype(node.input(0)) != ctx.dtype(node.input(1)):
        raise Unsupported("scale of another type than X")
    if int(node.attr("stash_type", 1)) != 1:
        raise Unsupported("stash_type other than float")
    args = {"axis": int(node.attr("axis", -1)), "epsilon": float(node.attr("epsilon", 1e-5))}
    ctx.op("ONNXRMSNormalization", node.inputs[:2], [node.outputs[0]], **args)


@translator("GroupNormalization", opsets=(21, 10_000))
def _group_norm(ctx: ImportContext, node: Node) -> None:
    """Opset 21 (per-channel scale and bias) is Caffe2's GroupNorm (NCHW) exactly."""
    ctx.require(node, FLOATS)
    shape = ctx.shape(node.input(0))
    if shape is None or len(shape) < 3:
        raise Unsupported("input of unknown shape or without spatial dimensions")
    if int(node.attr("stash_type", 1)) != 1:
        raise Unsupported("stash_type other than float")
    groups = int(node.attr("num_groups"))
    if groups <= 0 or shape[1] % groups:
        raise Unsupported(f"{shape[1]} channels in {groups} groups")
    outs = [node.outputs[0], ctx.fresh("gn_mean"), ctx.fresh("gn_std")]
    eps = float(node.attr("epsilon", 1e-5))
    ctx.op("GroupNorm", node.inputs[:3], outs, group=groups, epsilon=eps, order="NCHW")
