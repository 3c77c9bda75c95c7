"""ONNX -> our ops: elementwise, variadic, reductions, comparisons, casts."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from framework.memory.allocator import check_elements
from framework.onnx.import_types import CAFFE2_TYPE as _CAFFE2_TYPE
from framework.onnx.importer import (
    BOOL,
    FLOATS,
    INTS,
    NUMERIC,
    ImportContext,
    Node,
    OnnxImportError,
    Unsupported,
    translator,
)

F32 = (np.dtype(np.float32),)

_UNARY = {
    "Abs": ("Abs", NUMERIC),
    "Neg": ("Negative", FLOATS + INTS),
    "Reciprocal": ("Reciprocal", FLOATS),
    "Sqrt": ("Sqrt", FLOATS),
    "Exp": ("Exp", FLOATS),
    "Log": ("Log", FLOATS),
    "Relu": ("Relu", FLOATS),
    "Sigmoid": ("Sigmoid", FLOATS),
    "Tanh": ("Tanh", FLOATS),
    "Softplus": ("Softplus", FLOATS),
    "Softsign": ("Softsign", FLOATS),
    "Sin": ("Sin", FLOATS),
    "Cos": ("Cos", FLOATS),
    "Tan": ("Tan", FLOATS),
    "Asin": ("Asin", FLOATS),
    "Acos": ("Acos", FLOATS),
    "Atan": ("Atan", FLOATS),
    "Sinh": ("Sinh", FLOATS),
    "Cosh": ("Cosh", FLOATS),
    "Floor": ("Floor", FLOATS),
    "Ceil": ("Ceil", FLOATS),
    "Erf": ("Erf", FLOATS),
    "Sign": ("Sign", FLOATS),
    "Not": ("Not", BOOL),
    "Identity": ("Copy", NUMERIC + BOOL + tuple(np.dtype(t) for t in (np.float16, np.int8, np.int16, np.uint8))),
}


@translator(*_UNARY)
def _unary(ctx: ImportContext, node: Node) -> None:
    kind, allowed = _UNARY[node.op_type]
    ctx.require(node, allowed)
    ctx.op(kind, [node.input(0)], [node.outputs[0]])


@translator("LeakyRelu", "Elu", "Selu", "HardSigmoid", "ThresholdedRelu")
def _unary_attrs(ctx: ImportContext, node: Node) -> None:
    ctx.require(node, FLOATS)
    defaults = {
        "LeakyRelu": {"alpha": 0.01},
        "Elu": {"alpha": 1.0},
        "Selu": {"alpha": 1.67326319217681884765625, "gamma": 1.05070102214813232421875},
        "HardSigmoid": {"alpha": 0.2, "beta": 0.5},
        "ThresholdedRelu": {"alpha": 1.0},
    }[node.op_type]
    args = {("scale" if k == "gamma" else k): float(node.attr(k, v)) for k, v in defaults.items()}
    ctx.op(node.op_type, [node.input(0)], [node.outputs[0]], **args)


@translator("Gelu")
def _gelu(ctx: ImportContext, node: Node) -> None:
    ctx.require(node, FLOATS)
    approx = node.attr("approximate", "none")
    ctx.op("Gelu", [node.input(0)], [node.outputs[0]], fast_gelu=int(approx == "tanh"))


_BINARY = {
    "Add": ("Add", NUMERIC),
    "Sub": ("Sub", NUMERIC),
    "Mul": ("Mul", NUMERIC),
    "Div": ("Div", NUMERIC),  # integers: truncation toward zero, as ONNX
    "Pow": ("Pow", FLOATS),
    "Equal": ("EQ", NUMERIC + BOOL),
    "Less": ("LT", NUMERIC),
    "LessOrEqual": ("LE", NUMERIC),
    "Greater": ("GT", NUMERIC),
    "GreaterOrEqual": ("GE", NUMERIC),
    "And": ("And", BOOL),
    "Or": ("Or", BOOL),
    "Xor": ("Xor", BOOL),
}


@translator(*_BINARY)
def _binary(ctx: ImportContext, node: Node) -> None:
    kind, allowed = _BINARY[node.op_type]
    ctx.require(node, allowed)
    if ctx.dtype(node.input(0)) != ctx.dtype(node.input(1)):
        raise Unsupported("inputs of different types")
    if node.attr("broadcast"):  # opset < 7: Caffe2's own legacy broadcast
        ctx.op(kind, node.inputs[:2], [node.outputs[0]], broadcast=1, axis=int(node.attr("axis", -1)))
        return
    if kind == "Add" and _same_static_shape(ctx, node.inputs[:2]) and ctx.dtype(node.input(0)) in FLOATS:
        kind = "Sum"  # the same numbers; the inference pass fuses a Sum (not an Add) into the conv before it
    ctx.op(kind, node.inputs[:2], [node.outputs[0]])


def _same_static_shape(ctx: ImportContext, names: Sequence[str]) -> bool:
    """Do ``names`` all have one fully known shape (no broadcasting between them)?"""
    shapes = {ctx.shape(n) for n in names}
    if len(shapes) != 1:
        return False
    (shape,) = shapes
    return shape is not None and all(isinstance(d, int) for d in shape)


@translator("Sum", "Mean", "Max", "Min")
def _variadic(ctx: ImportContext, node: Node) -> None:
    allowed = FLOATS if node.op_type == "Mean" else NUMERIC
    ctx.require(node, allowed)
    shapes = {ctx.shape(n) for n in node.inputs}
    if None in shapes or len(shapes) != 1:
        if len(node.inputs) != 2 or node.op_type in ("Mean",):
            raise Unsupported("inputs of different (or unknown) shapes: Caffe2's n-ary op needs equal shapes")
        kind = {"Sum": "Add", "Max": None, "Min": None}[node.op_type]
        if kind is None:
            raise Unsupported("broadcasting Max/Min")
        ctx.op(kind, node.inputs, [node.outputs[0]])
        return
    ctx.op(node.op_type, node.inputs, [node.outputs[0]])


def _axes(ctx: ImportContext, node: Node, rank: int, input_index: int = 1) -> list[int] | None:
    """Reduction axes from the attribute or the (constant) axes input; None = all."""
    axes = node.attr("axes")
    if axes is None and node.input(input_index):
        axes = ctx.const(node.input(input_index)).reshape(-1).tolist()
    if axes is None or len(axes) == 0:
        return None
    return sorted(int(a) % rank for a in axes)


_REDUCE = {"ReduceSum": "ReduceSum", "ReduceMean": "ReduceMean", "ReduceMax": "ReduceMax", "ReduceMin": "ReduceMin"}
_REDUCE.update({"ReduceL1": "ReduceL1", "ReduceL2": "ReduceL2"})


@translator(*_REDUCE)
def _reduce(ctx: ImportContext, node: Node) -> None:
    ctx.require(node, FLOATS if node.op_type in ("ReduceMean", "ReduceL1", "ReduceL2") else NUMERIC, [0])
    rank = ctx.rank(node.input(0))
    axes_input = node.op_type == "ReduceSum" and ctx.opset >= 13 or ctx.opset >= 18
    axes = _axes(ctx, node, rank) if axes_input else _axes(ctx, node, rank, input_index=99)
    keep = int(node.attr("keepdims", 1))
    if axes is None and node.attr("noop_with_empty_axes", 0):
        ctx.op("Copy", [node.input(0)], [node.outputs[0]])
        return
    if rank == 0:
        raise Unsupported("0-d input")
    if axes is None:
        axes = list(range(rank))
    ctx.op(_REDUCE[node.op_type], [node.input(0)], [node.outputs[0]], axes=axes, keepdims=keep)


@translator("ArgMax", "ArgMin")
def _argmax(ctx: ImportContext, node: Node) -> None:
    ctx.require(node, NUMERIC)
    if node.attr("select_last_index", 0):
        raise Unsupported("select_last_index=1")
    rank = ctx.rank(node.input(0))
    axis = int(node.attr("axis", 0)) % max(rank, 1)
    ctx.op(node.op_type, [node.input(0)], [node.outputs[0]], axis=axis, keepdims=int(node.attr("keepdims", 1)))


@translator("Clip")
def _clip(ctx: ImportContext, node: Node) -> None:
    ctx.require(node, F32, [0])
    lo, hi = node.attr("min"), node.attr("max")
    if ctx.opset >= 11:
        lo = float(ctx.const(node.input(1))) if node.input(1) else None
        hi = float(ctx.const(node.input(2))) if node.input(2) else None
    args = {}
    if lo is not None:
        args["min"] = float(lo)
    if hi is not None:
        args["max"] = float(hi)
    ctx.op("Clip", [node.input(0)], [node.outputs[0]], **args)


@translator("Mod")
def _mod(ctx: ImportContext, node: Node) -> None:
    ctx.require(node, INTS)
    b = ctx.const(node.input(1)).reshape(-1)
    if b.size == 0 or not (b == b[0]).all() or b[0] == 0:
        raise Unsupported("a divisor tensor that is not one non-zero constant (Caffe2's Mod takes a scalar)")
    sign_div = int(not node.attr("fmod", 0))  # fmod=0: the result takes the divisor's sign
    shape_a, shape_b = ctx.shape(node.input(0)), ctx.shape(node.input(1))
    if shape_a is None or shape_b is None or np.broadcast_shapes(shape_a, shape_b) != tuple(shape_a):
        raise Unsupported("a divisor that broadcasts the dividend to another shape")
    ctx.op("Mod", [node.input(0)], [node.outputs[0]], divisor=int(b[0]), sign_follow_divisor=sign_div)


@translator("ReduceSumSquare")
def _reduce_sum_square(ctx: ImportContext, node: Node) -> None:
    ctx.require(node, FLOATS, [0])
    rank = ctx.rank(node.input(0))
    axes = _axes(ctx, node, rank) if ctx.opset >= 18 else _axes(ctx, node, rank, input_index=99)
    if axes is None and node.attr("noop_with_empty_axes", 0):
        ctx.op("Sqr", [node.input(0)], [node.outputs[0]])
        return
    if rank == 0:
        raise Unsupported("0-d input")
    sq = ctx.fresh("sqr")
    ctx.op("Sqr", [node.input(0)], [sq])
    axes = list(range(rank)) if axes is None else axes
    ctx.op("ReduceSum", [sq], [node.outputs[0]], axes=axes, keepdims=int(node.attr("keepdims", 1)))


@translator("ConstantOfShape")
def _constant_of_shape(ctx: ImportContext, node: Node) -> None:
    from onnx import numpy_helper

    shape = [int(d) for d in ctx.const(node.input(0)).reshape(-1)]
    t = node.proto.attribute[0].t if node.proto.attribute else None
    value = numpy_helper.to_array(t).reshape(-1) if t is not None else np.zeros(1, np.float32)
    if value.dtype.kind in "OUS" or value.dtype not in _CAFFE2_TYPE:
        raise Unsupported(f"value of type {value.dtype}")
    if any(d < 0 for d in shape):
        raise OnnxImportError(f"ConstantOfShape '{node.outputs[0]}': negative dims {shape}", [node.outputs[0]])
    check_elements(shape, value.dtype.itemsize, f"ConstantOfShape output '{node.outputs[0]}'")
    ctx.values[node.outputs[0]] = np.full(shape, value[0], dtype=value.dtype)


@translator("Range")
def _range(ctx: ImportContext, node: Node) -> None:
    start, limit, delta = (ctx.const(node.input(i)).reshape(()) for i in range(3))
    dt = start.dtype
    if dt == np.float16 or dt.name == "bfloat16":  # low precision: computed wider, as onnx's reference
        stash = node.attr("stash_type")
        if stash is not None and int(stash) not in (1, 11):
            raise Unsupported(f"stash_type {stash}")
        wide = None if stash is None else np.dtype(np.float32 if int(stash) == 1 else np.float64)
        first = start.astype(wide).item() if wide is not None else start.item()
        ctx.values[node.outputs[0]] = np.arange(first, float(limit), float(delta), dtype=wide).astype(dt)
        return
    if dt not in NUMERIC:
        raise Unsupported(f"type {dt}")
    n = max(int(np.ceil((float(limit) - float(start)) / float(delta))), 0)
    ctx.values[node.outputs[0]] = (start + np.arange(n, dtype=dt) * delta).astype(dt)
