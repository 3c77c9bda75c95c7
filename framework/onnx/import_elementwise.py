"""ONNX -> our ops: elementwise arithmetic, comparison, bitwise, Max/Min, Where for every element
type. Caffe2's op when its translator (import_math) covers the node, else the ONNX family op
(framework/ops/onnx/elementwise.py): int8/16, unsigned, bfloat16..., strings, broadcasting Max/Min."""

from __future__ import annotations

import numpy as np

from framework.onnx import import_math
from framework.onnx.importer import FLOATS, TRANSLATORS, ImportContext, NeedsRuntime, Node, Unsupported, translator
from framework.ops.onnx.elementwise import ALL, NUMBER, element_kind

LOW_FLOATS = ("float16", "bfloat16")

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
    "BitShift": ("int", "uint"),
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
        start = len(ctx.ops)
        try:
            caffe2(ctx, node)
            return
        except Unsupported:  # NeedsRuntime too: the ONNX family op needs no constant inputs
            del ctx.ops[start:]
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


@translator("PRelu")
def _prelu(ctx: ImportContext, node: Node) -> None:
    typed_inputs(ctx, node, NUMBER, node.inputs[:2])
    x, slope = ctx.shape(node.input(0)), ctx.shape(node.input(1))
    if x is None or slope is None:
        raise Unsupported("X or slope of unknown shape")
    if ctx.opset < 7 and len(x) >= 2 and slope in ((x[1],), (1,)) and ctx.dtype(node.input(0)) in FLOATS:
        ctx.op("PRelu", node.inputs[:2], [node.outputs[0]])  # opset 6: one slope per channel (axis 1), Caffe2's
        return
    try:
        ok = tuple(np.broadcast_shapes(x, slope)) == tuple(x)
    except ValueError:
        ok = False
    if not ok:
        raise Unsupported("a slope that does not broadcast to X's (known) shape")
    ctx.op("ONNXPRelu", node.inputs[:2], [node.outputs[0]])


_ONNX_UNARY = ("Round", "IsNaN", "IsInf", "BitwiseNot", "Acosh", "Asinh", "Atanh", "Shrink", "Celu")
_ONNX_UNARY += ("HardSwish", "Mish", "Swish")
_UNARY_ARGS = {"IsInf": ("detect_negative", "detect_positive"), "Shrink": ("bias", "lambd"), "Celu": ("alpha",)}


@translator(*_ONNX_UNARY)
def _onnx_unary(ctx: ImportContext, node: Node) -> None:
    from framework.ops.onnx.unary import _UNARY

    typed_inputs(ctx, node, _UNARY[node.op_type][1], node.inputs[:1])
    names = _UNARY_ARGS.get(node.op_type, ("alpha",) if node.op_type == "Swish" else ())
    args = {k: node.attr(k) for k in names if node.attr(k) is not None}
    ctx.op(f"ONNX{node.op_type}", node.inputs[:1], [node.outputs[0]], **args)


def via_float32(fn, low_types: tuple = LOW_FLOATS):
    """A translator running ``fn`` on float32 copies of the float16/bfloat16 inputs, its float
    outputs cast back to that type (ONNX: low-precision floats compute in float32 and round back;
    exact for data movement). Outputs of other types (indices) are kept; unknown ones: Unsupported."""
    import copy

    from framework.onnx.import_types import emit_cast
    from framework.onnx.importer import _infer_emitted

    if getattr(fn, "via_float32", False):
        return fn

    def wrapped(ctx: ImportContext, node: Node) -> None:
        low = {ctx.dtype(n) for n in node.inputs if n and ctx.dtype(n) is not None and ctx.dtype(n).name in low_types}
        if len(low) != 1:
            return fn(ctx, node)
        start = len(ctx.ops)
        try:  # the translator's own low-precision support first
            return fn(ctx, node)
        except NeedsRuntime:
            raise
        except Unsupported:
            del ctx.ops[start:]
        (dtype,) = low
        proxy = copy.copy(node)
        proxy.inputs = []
        for n in node.inputs:
            if n and ctx.dtype(n) == dtype:
                f = ctx.fresh("f32")
                emit_cast(ctx, n, f, np.dtype(np.float32))
                ctx.types[f], ctx.shapes[f] = np.dtype(np.float32), ctx.shape(n)
                n = f
            proxy.inputs.append(n)
        proxy.outputs = [ctx.fresh("f32_out") if o else "" for o in node.outputs]
        start = len(ctx.ops)
        fn(ctx, proxy)
        _infer_emitted(ctx, ctx.ops[start:])
        for o, f in zip(node.outputs, proxy.outputs):
            if not o:
                continue
            t = ctx.types.get(f)
            if t is None:
                raise Unsupported(f"output '{o}' of unknown type after the float32 computation")
            if t == np.dtype(np.float32):
                emit_cast(ctx, f, o, dtype)
            else:
                ctx.op("Copy", [f], [o])
                ctx.types[o] = t

    wrapped.via_float32 = True
    return wrapped


# ONNX ops whose float16/bfloat16 nodes run on their float32 translation (cast in, cast back):
# data movement (exact for both), and computing ops for bfloat16 only (float16 nodes keep their
# own float16 arithmetic, which onnx's numpy reference matches: accumulating in float32 instead
# is more precise but leaves its float16 tolerance).
DATA_MOVEMENT = (
    "Expand", "Reshape", "Unsqueeze", "Squeeze", "Flatten", "Transpose", "Concat", "Split", "Slice", "Tile",
    "Gather", "GatherElements", "GatherND", "ScatterElements", "ScatterND", "Compress", "OneHot", "Unique",
    "Pad", "Trilu", "DepthToSpace", "SpaceToDepth", "ReverseSequence", "Dropout", "MaxPool", "GlobalMaxPool",
)  # fmt: skip
COMPUTING = (
    "Einsum", "MatMul", "Gemm", "Conv", "ConvTranspose", "AveragePool", "GlobalAveragePool", "Softmax",
    "LogSoftmax", "ReduceSum", "ReduceMean", "ReduceL1", "ReduceL2", "ReduceSumSquare", "Sum", "Mean", "CumSum",
    "LayerNormalization", "InstanceNormalization", "BatchNormalization", "TopK", "Attention", "RMSNormalization",
    "GroupNormalization", "RotaryEmbedding",
)  # fmt: skip


def _native_matmul(ctx: ImportContext, node: Node) -> None:
    typed_inputs(ctx, node, NUMBER, node.inputs[:2])
    if ctx.dtype(node.input(0)).type.__module__.startswith("ml_dtypes"):
        raise Unsupported(f"input of type {ctx.dtype(node.input(0))}")
    ctx.op("ONNXMatMul", node.inputs[:2], [node.outputs[0]])


def _native_softmax(ctx: ImportContext, node: Node) -> None:
    typed_inputs(ctx, node, ("float",), node.inputs[:1])
    dt = ctx.dtype(node.input(0))
    if dt.kind != "f":
        raise Unsupported(f"input of type {dt}")
    axis = int(node.attr("axis", -1 if ctx.opset >= 13 else 1))
    if ctx.opset < 13 and axis % ctx.rank(node.input(0)) != ctx.rank(node.input(0)) - 1:
        raise Unsupported("opset < 13 Softmax coerces to 2-D at axis (only the last axis is supported)")
    ctx.op(f"ONNX{node.op_type}", node.inputs[:1], [node.outputs[0]], axis=axis)


# A translator tried when the registered one refuses a node (float16 and integer nodes).
NATIVE_FALLBACK = {"MatMul": _native_matmul, "Softmax": _native_softmax, "LogSoftmax": _native_softmax}


def with_fallback(fn, fallback):
    """``fn``, then ``fallback`` if ``fn`` refuses the node (not for run-time needs)."""
    if getattr(fn, "fallback", None) is fallback:
        return fn

    def wrapped(ctx: ImportContext, node: Node) -> None:
        start = len(ctx.ops)
        try:
            return fn(ctx, node)
        except NeedsRuntime:
            raise
        except Unsupported:
            del ctx.ops[start:]
        return fallback(ctx, node)

    wrapped.fallback = fallback
    return wrapped


def wrap_low_precision(translators: dict) -> None:
    """Route float16/bfloat16 nodes of DATA_MOVEMENT and bfloat16 nodes of COMPUTING through
    ``via_float32`` (idempotent; the importer calls it once every translator module is registered)."""
    for t, fallback in NATIVE_FALLBACK.items():
        if t in translators and not getattr(translators[t][0], "via_float32", False):
            fn, opsets = translators[t]
            translators[t] = (with_fallback(fn, fallback), opsets)
    for types, low in ((DATA_MOVEMENT, LOW_FLOATS), (COMPUTING, ("bfloat16",))):
        for t in types:
            if t in translators:
                fn, opsets = translators[t]
                translators[t] = (via_float32(fn, low), opsets)


_FLOAT_ONLY = ("Elu", "LeakyRelu", "Selu", "HardSigmoid", "ThresholdedRelu", "Gelu")
for _t in _FLOAT_ONLY + tuple(t for t in import_math._UNARY if t not in ("Not", "Identity")):
    _fn, _opsets = TRANSLATORS[_t]
    TRANSLATORS[_t] = (via_float32(_fn), _opsets)


@translator("Identity")
def _identity(ctx: ImportContext, node: Node) -> None:
    dt = ctx.dtype(node.input(0))
    if dt is None:
        raise Unsupported(f"input '{node.input(0)}' of unknown type (a sequence or optional?)")
    ctx.op("Copy", [node.input(0)], [node.outputs[0]])
