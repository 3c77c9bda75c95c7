"""ONNX -> our ops: the ai.onnx.preview.training optimizers Adagrad, Adam, Momentum onto
ONNXAdagrad/ONNXAdam/ONNXMomentum (framework/ops/onnx/training.py)."""

from __future__ import annotations

from framework.onnx.importer import FLOATS, INTS, ImportContext, Node, translator

_DOMAIN = "ai.onnx.preview.training"
_ARGS = {
    "Adagrad": ("decay_factor", "epsilon", "norm_coefficient"),
    "Adam": ("alpha", "beta", "epsilon", "norm_coefficient", "norm_coefficient_post"),
    "Momentum": ("alpha", "beta", "mode", "norm_coefficient"),
}


@translator("Adagrad", "Adam", "Momentum", domain=_DOMAIN)
def _optimizer(ctx: ImportContext, node: Node) -> None:
    ctx.require(node, FLOATS, [0] + list(range(2, len(node.inputs))))
    ctx.require(node, INTS, [1])
    args = {k: node.attr(k) for k in _ARGS[node.op_type] if node.attr(k) is not None}
    ctx.op(f"ONNX{node.op_type}", node.inputs, node.outputs, **args)
