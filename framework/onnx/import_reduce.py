"""ONNX -> our ops: reductions and axis ops on every type. Caffe2's ReduceX/ArgMax where its
translator (import_math) covers the node, else the ONNX family ops (framework/ops/onnx/reduce.py):
ReduceProd/LogSum/LogSumExp, bool and empty-set Max/Min, ArgMax/ArgMin select_last_index,
Hardmax, LpNormalization; Clip on integers and float16 (ONNXMax/ONNXMin)."""

from __future__ import annotations

import numpy as np

from framework.onnx import import_math
from framework.onnx.import_elementwise import typed_inputs
from framework.onnx.importer import ImportContext, Node, Unsupported, translator
from framework.ops.onnx.elementwise import NUMBER

_KINDS = {
    "ReduceProd": NUMBER,
    "ReduceLogSum": ("float",),
    "ReduceLogSumExp": ("float",),
    "ReduceMax": NUMBER + ("bool",),
    "ReduceMin": NUMBER + ("bool",),
}


def _try_caffe2(ctx: ImportContext, node: Node, fn) -> bool:
    n = len(ctx.ops)
    try:
        fn(ctx, node)
        return True
    except Unsupported:
        del ctx.ops[n:]
        return False


@translator(*_KINDS)
def _reduce(ctx: ImportContext, node: Node) -> None:
    t = node.op_type
    if t in ("ReduceMax", "ReduceMin") and _try_caffe2(ctx, node, import_math._reduce):
        return
    typed_inputs(ctx, node, _KINDS[t], node.inputs[:1])
    rank = ctx.rank(node.input(0))
    axes = import_math._axes(ctx, node, rank, input_index=1 if ctx.opset >= 18 else 99)  # axes: an input from 18
    if axes is None and node.attr("noop_with_empty_axes", 0):
        ctx.op("Copy", [node.input(0)], [node.outputs[0]])
        return
    ctx.op(f"ONNX{t}", [node.input(0)], [node.outputs[0]], axes=axes or [], keepdims=int(node.attr("keepdims", 1)))


@translator("ArgMax", "ArgMin")
def _arg(ctx: ImportContext, node: Node) -> None:
    if not node.attr("select_last_index", 0) and _try_caffe2(ctx, node, import_math._argmax):
        return
    typed_inputs(ctx, node, NUMBER + ("bool",), node.inputs[:1])
    args = {k: int(node.attr(k, d)) for k, d in (("axis", 0), ("keepdims", 1), ("select_last_index", 0))}
    ctx.op(f"ONNX{node.op_type}", [node.input(0)], [node.outputs[0]], **args)


@translator("Hardmax")
def _hardmax(ctx: ImportContext, node: Node) -> None:
    typed_inputs(ctx, node, ("float",), node.inputs[:1])
    axis = int(node.attr("axis", -1 if ctx.opset >= 13 else 1))
    if ctx.opset < 13 and axis % ctx.rank(node.input(0)) != ctx.rank(node.input(0)) - 1:
        raise Unsupported("opset < 13 Hardmax flattens at axis (only the last axis is supported)")
    ctx.op("ONNXHardmax", [node.input(0)], [node.outputs[0]], axis=axis)


@translator("LpNormalization")
def _lp_normalization(ctx: ImportContext, node: Node) -> None:
    typed_inputs(ctx, node, ("float",), node.inputs[:1])
    p = int(node.attr("p", 2))
    if p not in (1, 2):
        raise Unsupported(f"p={p}")
    ctx.op("ONNXLpNormalization", [node.input(0)], [node.outputs[0]], axis=int(node.attr("axis", -1)), p=p)


@translator("Clip")
def _clip(ctx: ImportContext, node: Node) -> None:
    if _try_caffe2(ctx, node, import_math._clip):
        return
    x = node.input(0)
    typed_inputs(ctx, node, NUMBER, [x])
    dt = ctx.dtype(x)
    bounds = []
    for i, name, op in ((1, "min", "ONNXMax"), (2, "max", "ONNXMin")):
        if ctx.opset >= 11:
            b = node.input(i)
            if b and ctx.dtype(b) != dt:
                raise Unsupported(f"bound '{b}' of type {ctx.dtype(b)}")
        elif node.attr(name) is not None:
            b = ctx.fresh(f"clip_{name}")
            ctx.values[b] = np.asarray(node.attr(name), dtype=dt)
        else:
            b = ""
        if b:
            bounds.append((op, b))
    cur = x
    for k, (op, b) in enumerate(bounds):
        out = node.outputs[0] if k == len(bounds) - 1 else ctx.fresh("clip_lo")
        ctx.op(op, [cur, b], [out])
        cur = out
    if not bounds:
        ctx.op("Copy", [x], [node.outputs[0]])


@translator("Det")
def _det(ctx: ImportContext, node: Node) -> None:
    typed_inputs(ctx, node, ("float",), node.inputs[:1])
    ctx.op("ONNXDet", [node.input(0)], [node.outputs[0]])
