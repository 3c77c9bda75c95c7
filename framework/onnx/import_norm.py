"""ONNX -> our ops: normalizations (RMSNormalization, GroupNormalization, MeanVarianceNormalization)
and the classification losses (NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss)."""

from __future__ import annotations

from framework.onnx.import_attention import FLOATS16, outputs
from framework.onnx.importer import INTS, ImportContext, Node, Unsupported, translator


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
