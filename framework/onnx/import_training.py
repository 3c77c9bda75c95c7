"""ONNX -> our ops: the ai.onnx.preview.training optimizers Adagrad, Adam, Momentum onto
ONNXAdagrad/ONNXAdam/ONNXMomentum (framework/ops/onnx/training.py)."""

from __future__ import annotations

import numpy as np

from framework.onnx.importer import FLOATS, INTS, ImportContext, Node, Unsupported, translator

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


@translator("Gradient", domain=_DOMAIN)
def _gradient(ctx: ImportContext, node: Node) -> None:
    """Gradient(xs) of y: our backward pass (framework.net.backward, Caffe2's gradient makers) over
    the ops emitted so far, seeded with ones of y's shape; the gradients of xs are copied out.
    Unsupported when an op on the path has no gradient, a gradient is sparse or missing, or zs
    (inputs held constant) are given."""
    from framework.errors import FrameworkError
    from framework.net.backward import get_backward_pass

    xs, y = list(node.attr("xs") or []), node.attr("y")
    xs = [x.decode() if isinstance(x, bytes) else x for x in xs]
    y = y.decode() if isinstance(y, bytes) else y
    if node.attr("zs"):
        raise Unsupported("zs (inputs held constant)")
    if ctx.dtype(y) != np.dtype(np.float32) or len(xs) != len(node.outputs):
        raise Unsupported(f"y '{y}' of type {ctx.dtype(y)} (float32 only), or outputs that do not match xs")
    try:
        ops, grads = get_backward_pass(list(ctx.ops), [y])
    except FrameworkError as e:
        raise Unsupported(f"no gradient: {e}") from None
    for x in xs:
        g = grads.get(x)
        if not isinstance(g, str):
            raise Unsupported(f"no dense gradient reaches '{x}'")
    ctx.ops.extend(ops)
    for x, out in zip(xs, node.outputs):
        if out:
            ctx.op("Copy", [grads[x]], [out])
