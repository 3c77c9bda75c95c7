"""ONNX -> our ops: elementwise arithmetic, comparison, bitwise, Max/Min, Where for every element
type. Caffe2's op when its translator (import_math) covers the node, else the ONNX family op
(framework/ops/onnx/elementwise.py): int8/16, unsigned, bfloat16..., strings, broadcasting Max/Min."""

from __future__ import annotations

import numpy as np

from framework.onnx import import_math
from framework.onnx.importer import ImportContext, Node, Unsupported, translator
from framework.ops.onnx.elementwise import ALL, NUMBER, element_kind

_KINDS = {
    "Add": NUMBER,
    "Sub": NUMBER,
    "Mul": NUMBER,
    "Div": NUMBER,
    "Equal": ALL,
    "Less": NUMBER,
    "LessOrEqual": NUMBER,
    "Greater": NUMBER,
    "GreaterOrEqual": NUMBER,
    "BitwiseAnd": ("int", "uint"),
    "BitwiseOr": ("int", "uint"),
    "BitwiseXor": ("int", "uint"),
    "BitShift": ("uint",),
    "Mod": NUMBER,
    "Pow": NUMBER,
    "Max": NUMBER,
    "Min": NUMBER,
}
_CAFFE2 = {
    **{k: import_math._binary for k in ("Add", "Sub", "Mul", "Div", "Pow")},
    **{k: import_math._binary for k in ("Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual")},
    "Mod": import_math._mod,
    "Max": import_math._variadic,
    "Min": import_math._variadic,
}  # fmt: skip


def typed_inputs(ctx: ImportContext, node: Node, kinds: tuple, names: list[str], same: bool = True) -> None:
    """Unsupported unless each input in ``names`` has a known dtype of one of ``kinds`` (one dtype if ``same``)."""
    dts = [ctx.dtype(n) for n in names]
    for n, dt in zip(names, dts):
        if dt is None or element_kind(dt) not in kinds:
            raise Unsupported(f"input '{n}' of type {dt}")
    if same and len(set(dts)) > 1:
        raise Unsupported("inputs of different types")


@translator(*_KINDS)
def _elementwise(ctx: ImportContext, node: Node) -> None:
    t = node.op_type
    caffe2 = _CAFFE2.get(t)
    if caffe2 is not None:
        try:
            caffe2(ctx, node)
            return
        except Unsupported:
            del ctx.ops[len(ctx.ops) :]
    if node.attr("broadcast") or node.attr("axis") is not None:
        raise Unsupported("legacy broadcast/axis attributes")
    names = [n for n in node.inputs if n]
    typed_inputs(ctx, node, _KINDS[t], names, same=t != "Pow")
    args = {}
    if t == "Mod":
        args["fmod"] = int(node.attr("fmod", 0))
    if t == "BitShift":
        args["direction"] = node.attr("direction", "LEFT")
    ctx.op(f"ONNX{t}", names, [node.outputs[0]], **args)


@translator("Where")
def _where(ctx: ImportContext, node: Node) -> None:
    if ctx.dtype(node.input(0)) != np.dtype(bool):
        raise Unsupported(f"condition of type {ctx.dtype(node.input(0))}")
    typed_inputs(ctx, node, ALL, node.inputs[1:3])
    shapes = [ctx.shape(n) for n in node.inputs]
    known = ctx.dtype(node.input(1))
    if all(s is not None for s in shapes) and len(set(shapes)) == 1:
        if known.kind in "fiub" and not known.type.__module__.startswith("ml_dtypes"):
            ctx.op("Where", node.inputs[:3], [node.outputs[0]])
            return
    ctx.op("ONNXWhere", node.inputs[:3], [node.outputs[0]])
