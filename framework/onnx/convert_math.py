"""Converters of the elementwise, n-ary and reduction ops (Caffe2 -> ONNX).

Binary ops keep Caffe2's two broadcasting modes: numpy broadcasting maps straight onto ONNX's;
legacy ``broadcast=1`` (B aligned with A at ``axis``/``axis_str``) reshapes B to the view our
kernels use (``framework.ops.math.broadcast.b_view_shape``), so ONNX's numpy broadcasting then
gives Caffe2's result.
"""

from __future__ import annotations

import numpy as np

from framework.onnx.context import ExportContext, NotExportable, OpView, register_converter
from framework.ops.math.broadcast import b_view_shape, named_axis

_UNARY = {
    "Abs": "Abs",
    "Exp": "Exp",
    "Log": "Log",
    "Sqrt": "Sqrt",
    "Negative": "Neg",
    "Reciprocal": "Reciprocal",
    "Sigmoid": "Sigmoid",
    "Tanh": "Tanh",
    "Relu": "Relu",
    "Sin": "Sin",
    "Cos": "Cos",
    "Sign": "Sign",
    "Softsign": "Softsign",
    "Softplus": "Softplus",
    "Not": "Not",
    "Copy": "Identity",
    "Alias": "Identity",
    "StopGradient": "Identity",
    "EnsureCPUOutput": "Identity",
    "EnsureDense": "Identity",
    "CopyCPUToGPU": "Identity",
    "CopyGPUToCPU": "Identity",
    "CopyFromCPUInput": "Identity",
}


@register_converter(*_UNARY)
def _unary(ctx: ExportContext, op: OpView) -> None:
    ctx.node(_UNARY[op.type], [ctx.read(op.inputs[0])], [ctx.write(op.outputs[0])])


@register_converter("Elu", "LeakyRelu", "HardSigmoid", "Selu")
def _unary_attrs(ctx: ExportContext, op: OpView) -> None:
    names = {"Elu": ("alpha",), "LeakyRelu": ("alpha",), "HardSigmoid": ("alpha", "beta"), "Selu": ("alpha", "scale")}
    attrs = {("gamma" if k == "scale" else k): float(op.arg(k)) for k in names[op.type]}
    ctx.node(op.type, [ctx.read(op.inputs[0])], [ctx.write(op.outputs[0])], **attrs)


@register_converter("Sqr")
def _sqr(ctx: ExportContext, op: OpView) -> None:
    x = ctx.read(op.inputs[0])
    ctx.node("Mul", [x, x], [ctx.write(op.outputs[0])])


@register_converter("Rsqrt")
def _rsqrt(ctx: ExportContext, op: OpView) -> None:
    s = ctx.node("Sqrt", [ctx.read(op.inputs[0])])[0]
    ctx.node("Reciprocal", [s], [ctx.write(op.outputs[0])])


@register_converter("Swish")
def _swish(ctx: ExportContext, op: OpView) -> None:
    x = ctx.read(op.inputs[0])
    s = ctx.node("Sigmoid", [x])[0]
    ctx.node("Mul", [x, s], [ctx.write(op.outputs[0])])


@register_converter("Gelu")
def _gelu(ctx: ExportContext, op: OpView) -> None:
    x = ctx.read(op.inputs[0])
    approximate = "tanh" if op.arg("fast_gelu") else "none"
    if ctx.opset >= 20:
        ctx.node("Gelu", [x], [ctx.write(op.outputs[0])], approximate=approximate)
        return
    dt = op.in_dtypes[0]
    if op.arg("fast_gelu"):  # 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
        x3 = ctx.node("Mul", [x, ctx.node("Mul", [x, x])[0]])[0]
        inner = ctx.node("Add", [x, ctx.node("Mul", [x3, ctx.const(0.044715, "c", dt)])[0]])[0]
        t = ctx.node("Tanh", [ctx.node("Mul", [inner, ctx.const(np.sqrt(2 / np.pi), "c", dt)])[0]])[0]
    else:  # 0.5 x (1 + erf(x / sqrt 2))
        t = ctx.node("Erf", [ctx.node("Mul", [x, ctx.const(1 / np.sqrt(2), "c", dt)])[0]])[0]
    one = ctx.node("Add", [t, ctx.const(1.0, "one", dt)])[0]
    half = ctx.node("Mul", [x, ctx.const(0.5, "half", dt)])[0]
    ctx.node("Mul", [half, one], [ctx.write(op.outputs[0])])


@register_converter("Scale")
def _scale(ctx: ExportContext, op: OpView) -> None:
    c = ctx.const(op.arg("scale"), "scale", op.in_dtypes[0])
    ctx.node("Mul", [ctx.read(op.inputs[0]), c], [ctx.write(op.outputs[0])])


@register_converter("Clip")
def _clip(ctx: ExportContext, op: OpView) -> None:
    dt = op.in_dtypes[0]
    lo, hi = op.arg("min"), op.arg("max")
    if np.issubdtype(dt, np.floating):
        info = np.finfo(dt)
        lo, hi = max(lo, float(info.min)), min(hi, float(info.max))
    ctx.node(
        "Clip",
        [ctx.read(op.inputs[0]), ctx.const(lo, "min", dt), ctx.const(hi, "max", dt)],
        [ctx.write(op.outputs[0])],
    )


_BINARY = {
    "Add": "Add",
    "Sub": "Sub",
    "Mul": "Mul",
    "Div": "Div",
    "And": "And",
    "Or": "Or",
    "Xor": "Xor",
    "EQ": "Equal",
    "LT": "Less",
    "LE": "LessOrEqual",
    "GT": "Greater",
    "GE": "GreaterOrEqual",
    "NE": "Equal",
    "Pow": "Pow",
}


def broadcast_b(ctx: ExportContext, op: OpView, b: str, b_shape: tuple) -> str:
    """B as ONNX numpy broadcasting must see it (reshaped under Caffe2's legacy broadcast=1)."""
    if not op.arg("broadcast"):
        return b
    axis = named_axis(op.args, op.type)
    view = b_view_shape(op.in_shapes[0], b_shape, axis, op.type)
    return b if tuple(view) == tuple(b_shape) else ctx.reshape(b, view)


@register_converter(*_BINARY)
def _binary(ctx: ExportContext, op: OpView) -> None:
    a = ctx.read(op.inputs[0])
    if op.type == "Pow" and len(op.inputs) == 1:
        b, b_shape = ctx.const(op.arg("exponent"), "exponent", op.in_dtypes[0]), ()
    else:
        b, b_shape = ctx.read(op.inputs[1]), op.in_shapes[1]
    b = broadcast_b(ctx, op, b, b_shape)
    out = ctx.write(op.outputs[0])
    if op.type == "Pow" and op.in_dtypes[0] != (op.in_dtypes[1] if len(op.in_dtypes) > 1 else op.in_dtypes[0]):
        raise NotExportable("Pow with an exponent of another dtype than the base")
    if op.type == "NE":
        ctx.node("Not", [ctx.node("Equal", [a, b])[0]], [out])
    else:
        ctx.node(_BINARY[op.type], [a, b], [out])


@register_converter("Sum", "Mean", "Max", "Min")
def _nary(ctx: ExportContext, op: OpView) -> None:
    ctx.node(op.type, [ctx.read(b) for b in op.inputs], [ctx.write(op.outputs[0])])


@register_converter("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin")
def _reduce(ctx: ExportContext, op: OpView) -> None:
    axes = op.arg("axes")
    if axes is not None and len(axes) == 0:
        axes = None
    ctx.reduce(op.type, ctx.read(op.inputs[0]), axes, int(op.arg("keepdims")), ctx.write(op.outputs[0]))


@register_converter(
    "ReduceFrontSum", "ReduceFrontMean", "ReduceFrontMax", "ReduceBackSum", "ReduceBackMean", "ReduceBackMax"
)
def _reduce_front_back(ctx: ExportContext, op: OpView) -> None:
    if len(op.inputs) > 1:
        raise NotExportable("the lengths input (per-row reduction lengths) has no ONNX expression")
    nd, k = len(op.in_shapes[0]), op.arg("num_reduce_dim")
    axes = list(range(k)) if "Front" in op.type else list(range(nd - k, nd))
    kind = op.type.replace("Front", "").replace("Back", "")
    ctx.reduce(kind, ctx.read(op.inputs[0]), axes, 0, ctx.write(op.outputs[0]))


@register_converter("SumElements", "SumSqrElements")
def _sum_elements(ctx: ExportContext, op: OpView) -> None:
    x = ctx.read(op.inputs[0])
    if op.type == "SumSqrElements":
        x = ctx.node("Mul", [x, x])[0]
    kind = "ReduceMean" if op.arg("average") else "ReduceSum"
    ctx.reduce(kind, x, None, 0, ctx.write(op.outputs[0]))


@register_converter("RowwiseMax", "ColwiseMax")
def _rowcol_max(ctx: ExportContext, op: OpView) -> None:
    axis = 2 if op.type == "RowwiseMax" else 1  # X is (batch, M, N)
    ctx.reduce("ReduceMax", ctx.read(op.inputs[0]), [axis], 0, ctx.write(op.outputs[0]))


@register_converter("ArgMax", "ArgMin")
def _arg_max(ctx: ExportContext, op: OpView) -> None:
    axis = op.arg("axis")
    ctx.node(
        op.type,
        [ctx.read(op.inputs[0])],
        [ctx.write(op.outputs[0])],
        axis=int(axis),
        keepdims=int(bool(op.arg("keepdims"))),
    )


@register_converter("DotProduct", "SquaredL2Distance", "L1Distance")
def _distances(ctx: ExportContext, op: OpView) -> None:
    x, y = ctx.read(op.inputs[0]), ctx.read(op.inputs[1])
    nd = len(op.in_shapes[0])
    axes = list(range(1, nd)) if nd > 1 else None
    if op.type == "DotProduct":
        t = ctx.node("Mul", [x, y])[0]
        kind = "ReduceSum"
    elif op.type == "L1Distance":
        t = ctx.node("Abs", [ctx.node("Sub", [x, y])[0]])[0]
        kind = "ReduceSum"
    else:
        d = ctx.node("Sub", [x, y])[0]
        t = ctx.node("Mul", [ctx.node("Mul", [d, d])[0], ctx.const(0.5, "half", op.in_dtypes[0])])[0]
        kind = "ReduceSum"
    if nd <= 1:  # 1-D: elementwise per row (N,) -> (N,)
        ctx.node("Identity", [t], [ctx.write(op.outputs[0])])
        return
    ctx.reduce(kind, t, axes, 0, ctx.write(op.outputs[0]))
