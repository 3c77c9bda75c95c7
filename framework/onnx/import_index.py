"""ONNX -> our ops: index/gather/scatter, cumulative, triangular, padding,
selection and einsum nodes, onto Caffe2 ops where their semantics are ONNX's and onto the ONNX
family (``framework/ops/onnx/``) otherwise. Axis-like inputs (CumSum's axis, TopK's k, Trilu's k,
Pad's pads/axes, OneHot's depth) must be constants: the backend specializes small integer inputs at
run time, so a fed value becomes one."""

from __future__ import annotations

import numpy as np

from framework.onnx import import_tensor
from framework.onnx.import_types import emit_cast
from framework.onnx.importer import FLOATS, INTS, ImportContext, Node, Unsupported, translator
from framework.ops.onnx.common import BF16, MOVABLE, NUM_OR_BOOL

ANY = MOVABLE  # bfloat16 too: these nodes only move or select elements
NUMBERS = tuple(d for d in NUM_OR_BOOL if d.kind != "b")  # what the family's "numeric" ops take


def _outs(ctx: ImportContext, node: Node, n: int) -> list[str]:
    """The node's first ``n`` outputs, fresh names for the absent (optional) ones."""
    return [node.outputs[i] if i < len(node.outputs) and node.outputs[i] else ctx.fresh("unused") for i in range(n)]


def _int(ctx: ImportContext, name: str) -> int:
    v = ctx.const(name).reshape(-1)
    if v.size != 1:
        raise Unsupported(f"'{name}' must hold one integer")
    return int(v[0])


@translator("GatherElements")
def _gather_elements(ctx: ImportContext, node: Node) -> None:
    ctx.require(node, ANY, [0])
    ctx.require(node, INTS, [1])
    ctx.op("ONNXGatherElements", node.inputs[:2], [node.outputs[0]], axis=int(node.attr("axis", 0)))


@translator("ScatterElements", "Scatter")
def _scatter_elements(ctx: ImportContext, node: Node) -> None:
    red = node.attr("reduction", "none")
    ctx.require(node, ANY if red == "none" else NUMBERS, [0, 2])
    ctx.require(node, INTS, [1])
    ctx.op("ONNXScatterElements", node.inputs[:3], [node.outputs[0]], axis=int(node.attr("axis", 0)), reduction=red)


@translator("GatherND")
def _gather_nd(ctx: ImportContext, node: Node) -> None:
    ctx.require(node, ANY, [0])
    ctx.require(node, INTS, [1])
    ctx.op("ONNXGatherND", node.inputs[:2], [node.outputs[0]], batch_dims=int(node.attr("batch_dims", 0)))


@translator("ScatterND")
def _scatter_nd(ctx: ImportContext, node: Node) -> None:
    ctx.require(node, ANY if node.attr("reduction", "none") == "none" else NUMBERS, [0, 2])
    ctx.require(node, INTS, [1])
    ctx.op("ONNXScatterND", node.inputs[:3], [node.outputs[0]], reduction=node.attr("reduction", "none"))


@translator("CumSum", "CumProd")
def _cumulative(ctx: ImportContext, node: Node) -> None:
    ctx.require(node, NUMBERS, [0])
    args = {"axis": _int(ctx, node.input(1)), "exclusive": int(node.attr("exclusive", 0))}
    ctx.op("ONNX" + node.op_type, [node.input(0)], [node.outputs[0]], reverse=int(node.attr("reverse", 0)), **args)


@translator("Trilu")
def _trilu(ctx: ImportContext, node: Node) -> None:
    ctx.require(node, ANY, [0])
    k = _int(ctx, node.input(1)) if node.input(1) else 0
    ctx.op("ONNXTrilu", [node.input(0)], [node.outputs[0]], k=k, upper=int(node.attr("upper", 1)))


@translator("EyeLike")
def _eye_like(ctx: ImportContext, node: Node) -> None:
    ctx.require(node, NUM_OR_BOOL, [0])
    args = {"k": int(node.attr("k", 0)), "dtype": int(node.attr("dtype", 0))}
    ctx.op("ONNXEyeLike", [node.input(0)], [node.outputs[0]], **args)


@translator("Pad")
def _pad(ctx: ImportContext, node: Node) -> None:
    n = len(ctx.ops)
    try:  # Caffe2's PadImage where it fits (4-D, H and W only)
        import_tensor._pad(ctx, node)
        return
    except Unsupported:
        del ctx.ops[n:]
    ctx.require(node, ANY, [0])
    rank = ctx.rank(node.input(0))
    value_input = ""
    if ctx.opset < 11:
        pads, value = [int(p) for p in node.attr("pads", node.attr("paddings"))], node.attr("value", 0.0)
        if float(value) != 0.0:
            value_input = ctx.fresh("pad_value")
            ctx.values[value_input] = np.array(value, ctx.dtype(node.input(0)))
    else:
        pads = [int(p) for p in ctx.const(node.input(1)).reshape(-1)]
        if node.input(2):
            value_input = node.input(2)
            if ctx.dtype(value_input) != ctx.dtype(node.input(0)):
                raise Unsupported("a fill value of another type")
        if node.input(3):
            axes = [int(a) % rank for a in ctx.const(node.input(3)).reshape(-1)]
            full = [0] * (2 * rank)
            for j, a in enumerate(axes):
                full[a], full[rank + a] = pads[j], pads[len(axes) + j]
            pads = full
    if len(pads) != 2 * rank:
        raise Unsupported(f"{len(pads)} pads for rank {rank}")
    ins = [node.input(0)] + ([value_input] if value_input else [])
    ctx.op("ONNXPad", ins, [node.outputs[0]], pads=pads, mode=node.attr("mode", "constant"))


@translator("TopK")
def _topk(ctx: ImportContext, node: Node) -> None:
    ctx.require(node, NUMBERS, [0])
    k = int(node.attr("k", 1)) if ctx.opset < 10 else _int(ctx, node.input(1))
    axis, largest = int(node.attr("axis", -1)), int(node.attr("largest", 1))
    shape = ctx.shape(node.input(0))
    outs = _outs(ctx, node, 2)
    if largest and ctx.dtype(node.input(0)) in FLOATS and shape and 1 <= k <= shape[axis % len(shape)]:
        ctx.op("TopK", [node.input(0)], outs, k=k, axis=axis)  # Caffe2's: same order, same ties
        return
    ctx.op("ONNXTopK", [node.input(0)], outs, k=k, axis=axis, largest=largest)


@translator("Unique")
def _unique(ctx: ImportContext, node: Node) -> None:
    ctx.require(node, NUMBERS + BF16, [0])
    axis = node.attr("axis")
    args = {"sorted": int(node.attr("sorted", 1)), "has_axis": int(axis is not None), "axis": int(axis or 0)}
    ctx.op("ONNXUnique", [node.input(0)], _outs(ctx, node, 4), **args)


@translator("OneHot")
def _one_hot(ctx: ImportContext, node: Node) -> None:
    ctx.require(node, NUMBERS, [0])
    ctx.require(node, ANY, [2])
    d = ctx.const(node.input(1)).reshape(-1)
    if d.size != 1 or d.dtype.kind not in "iuf":
        raise Unsupported("depth must hold one number")
    depth = int(np.trunc(d[0]))
    if depth < 1:
        raise Unsupported(f"depth {depth}")
    axis = int(node.attr("axis", -1))
    ctx.op("ONNXOneHot", [node.input(0), node.input(2)], [node.outputs[0]], depth=depth, axis=axis)


@translator("Compress")
def _compress(ctx: ImportContext, node: Node) -> None:
    ctx.require(node, ANY, [0])
    axis = node.attr("axis")
    ctx.op("ONNXCompress", node.inputs[:2], [node.outputs[0]], has_axis=int(axis is not None), axis=int(axis or 0))


@translator("NonZero")
def _non_zero(ctx: ImportContext, node: Node) -> None:
    ctx.require(node, ANY, [0])
    ctx.op("ONNXNonZero", [node.input(0)], [node.outputs[0]])


@translator("Einsum")
def _einsum(ctx: ImportContext, node: Node) -> None:
    ctx.require(node, NUMBERS + BF16)
    types = {ctx.dtype(n) for n in node.inputs}
    if len(types) != 1:
        raise Unsupported("operands of different types")
    (dtype,) = types
    if dtype.name != "bfloat16":
        ctx.op("ONNXEinsum", node.inputs, [node.outputs[0]], equation=node.attr("equation"))
        return
    f32 = np.dtype(np.float32)  # bfloat16: numpy has no einsum for it; float32 maths, rounded back
    wide = [ctx.fresh("einsum_f32") for _ in node.inputs]
    for n, w in zip(node.inputs, wide):
        emit_cast(ctx, n, w, f32)
        ctx.types[w] = f32
    out32 = ctx.fresh("einsum_out_f32")
    ctx.op("ONNXEinsum", wide, [out32], equation=node.attr("equation"))
    ctx.types[out32] = f32
    emit_cast(ctx, out32, node.outputs[0], dtype)


@translator("TensorScatter")
def _tensor_scatter(ctx: ImportContext, node: Node) -> None:
    ctx.require(node, ANY, [0, 1])
    ctx.require(node, INTS, [2])
    args = {"axis": int(node.attr("axis", -2)), "mode": node.attr("mode", "linear")}
    ctx.op("ONNXTensorScatter", [n for n in node.inputs[:3] if n], [node.outputs[0]], **args)


@translator("Col2Im")
def _col2im(ctx: ImportContext, node: Node) -> None:
    ctx.require(node, NUMBERS, [0])
    image = [int(v) for v in ctx.const(node.input(1)).reshape(-1)]
    block = [int(v) for v in ctx.const(node.input(2)).reshape(-1)]
    args = {k: [int(v) for v in node.attr(k)] for k in ("dilations", "pads", "strides") if node.attr(k) is not None}
    ctx.op("ONNXCol2Im", [node.input(0)], [node.outputs[0]], image_shape=image, block_shape=block, **args)
