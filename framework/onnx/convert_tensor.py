"""Converters of the tensor ops: reshaping, layout, Concat/Split, slicing, gathering, casts, fills,
matrix products.

Shapes are fixed at export (the net was run once on the given input shapes), so Caffe2's
shape-valued outputs (Reshape's old shape, Concat's split_info) and deterministic fills become
initializers, and reshapes get their exact target shapes.
"""

from __future__ import annotations

import numpy as np

from framework.onnx.context import ExportContext, NotExportable, OpView, register_converter

_DETERMINISTIC_FILLS = (
    "GivenTensorFill", "GivenTensorDoubleFill", "GivenTensorIntFill", "GivenTensorInt64Fill", "GivenTensorBoolFill",
    "ConstantFill", "RangeFill", "DiagonalFill",
)  # fmt: skip


@register_converter(*_DETERMINISTIC_FILLS)
def _fill(ctx: ExportContext, op: OpView) -> None:
    value = op.values[0]
    if value.dtype.kind in "OUS":
        raise NotExportable("string tensors")
    ctx.initializers[ctx.write(op.outputs[0])] = np.array(value)


@register_converter("Reshape")
def _reshape(ctx: ExportContext, op: OpView) -> None:
    ctx.reshape(ctx.read(op.inputs[0]), op.out_shapes[0], ctx.write(op.outputs[0]))
    if len(op.outputs) > 1:
        old = np.asarray(op.in_shapes[0], dtype=op.out_dtypes[1])
        ctx.initializers[ctx.write(op.outputs[1])] = old


@register_converter("Flatten")
def _flatten(ctx: ExportContext, op: OpView) -> None:
    ctx.node("Flatten", [ctx.read(op.inputs[0])], [ctx.write(op.outputs[0])], axis=int(op.arg("axis")))


@register_converter("FlattenToVec", "ResizeLike")
def _to_out_shape(ctx: ExportContext, op: OpView) -> None:
    ctx.reshape(ctx.read(op.inputs[0]), op.out_shapes[0], ctx.write(op.outputs[0]))


@register_converter("Transpose", "NCHW2NHWC", "NHWC2NCHW")
def _transpose(ctx: ExportContext, op: OpView) -> None:
    nd = len(op.in_shapes[0])
    if op.type == "NCHW2NHWC":
        perm = [0, *range(2, nd), 1]
    elif op.type == "NHWC2NCHW":
        perm = [0, nd - 1, *range(1, nd - 1)]
    else:
        perm = [a % nd for a in op.arg("axes")] or list(reversed(range(nd)))
    ctx.transpose(ctx.read(op.inputs[0]), perm, ctx.write(op.outputs[0]))


def _concat_axis(op: OpView, nd: int) -> int:
    if op.has("axis"):
        axis = op.arg("axis")
    else:
        axis = 3 if op.arg("order").upper() == "NHWC" else 1
    return axis % (nd + (1 if op.arg("add_axis") else 0))


@register_converter("Concat")
def _concat(ctx: ExportContext, op: OpView) -> None:
    nd = len(op.in_shapes[0])
    axis = _concat_axis(op, nd)
    ins = [ctx.read(b) for b in op.inputs]
    if op.arg("add_axis"):
        ins = [ctx.unsqueeze(x, [axis]) for x in ins]
        sizes = [1] * len(ins)
    else:
        sizes = [s[axis] for s in op.in_shapes]
    ctx.node("Concat", ins, [ctx.write(op.outputs[0])], axis=axis)
    if len(op.outputs) > 1:
        ctx.initializers[ctx.write(op.outputs[1])] = np.asarray(sizes, dtype=op.out_dtypes[1])


@register_converter("Split")
def _split(ctx: ExportContext, op: OpView) -> None:
    nd = len(op.in_shapes[0])
    axis = op.arg("axis") if op.has("axis") else (3 if op.arg("order").upper() == "NHWC" else 1)
    axis %= nd
    add_axis = bool(op.arg("add_axis"))
    sizes = [1 if add_axis else s[axis] for s in op.out_shapes]
    outs = [ctx.write(b) for b in op.outputs]
    parts = outs if not add_axis else [ctx.fresh(o + "_part") for o in outs]
    x = ctx.read(op.inputs[0])
    if ctx.opset >= 13:
        ctx.node("Split", [x, ctx.ints(sizes, "split")], parts, axis=axis)
    else:
        ctx.node("Split", [x], parts, axis=axis, split=sizes)
    if add_axis:
        for p, o in zip(parts, outs):
            ctx.node("Squeeze", [p, ctx.ints([axis], "axes")], [o])


@register_converter("Squeeze", "ExpandDims")
def _squeeze(ctx: ExportContext, op: OpView) -> None:
    dims = sorted(op.arg("dims"))
    kind = "Squeeze" if op.type == "Squeeze" else "Unsqueeze"
    ctx.node(kind, [ctx.read(op.inputs[0]), ctx.ints(dims, "axes")], [ctx.write(op.outputs[0])])


@register_converter("Slice")
def _slice(ctx: ExportContext, op: OpView) -> None:
    if len(op.inputs) > 1:
        vals = [ctx.initial_value(b) for b in op.inputs[1:]]
        if any(v is None for v in vals):
            raise NotExportable("starts/ends computed at run time (only constant ones export)")
        starts, ends = (list(np.asarray(v).reshape(-1)) for v in vals)
    else:
        starts, ends = list(op.arg("starts")), list(op.arg("ends"))
    shape = op.in_shapes[0]
    st, en = [], []
    for d, (s, e) in enumerate(zip(starts, ends)):
        dim = shape[d]
        s = int(s) + dim if s < 0 else int(s)
        e = int(e) + dim + 1 if e < 0 else int(e)
        st.append(s)
        en.append(e)
    axes = list(range(len(st)))
    ctx.node(
        "Slice",
        [ctx.read(op.inputs[0]), ctx.ints(st, "starts"), ctx.ints(en, "ends"), ctx.ints(axes, "axes")],
        [ctx.write(op.outputs[0])],
    )


@register_converter("Gather")
def _gather(ctx: ExportContext, op: OpView) -> None:
    if op.arg("match_outer"):
        raise NotExportable("match_outer=1 (per-row gathering) has no ONNX Gather expression")
    axis = op.arg("axis") % max(len(op.in_shapes[0]), 1)
    ctx.node("Gather", [ctx.read(op.inputs[0]), ctx.read(op.inputs[1])], [ctx.write(op.outputs[0])], axis=axis)


@register_converter("Tile")
def _tile(ctx: ExportContext, op: OpView) -> None:
    if len(op.inputs) > 1:
        raise NotExportable("tiles/axis given as input tensors")
    nd = len(op.in_shapes[0])
    reps = [1] * nd
    reps[op.arg("axis") % nd] = op.arg("tiles")
    ctx.node("Tile", [ctx.read(op.inputs[0]), ctx.ints(reps, "repeats")], [ctx.write(op.outputs[0])])


@register_converter("Shape")
def _shape(ctx: ExportContext, op: OpView) -> None:
    axes = op.arg("axes")
    out = ctx.write(op.outputs[0])
    if not axes:
        ctx.node("Shape", [ctx.read(op.inputs[0])], [out])
        return
    s = ctx.node("Shape", [ctx.read(op.inputs[0])])[0]
    ctx.node("Gather", [s, ctx.ints(axes, "axes")], [out], axis=0)


@register_converter("Size")
def _size(ctx: ExportContext, op: OpView) -> None:
    ctx.node("Size", [ctx.read(op.inputs[0])], [ctx.write(op.outputs[0])])


@register_converter("Cast")
def _cast(ctx: ExportContext, op: OpView) -> None:
    from onnx import helper

    dt = op.out_dtypes[0]
    if dt.kind in "OUS":
        raise NotExportable("casts to strings")
    to = helper.np_dtype_to_tensor_dtype(dt)
    ctx.node("Cast", [ctx.read(op.inputs[0])], [ctx.write(op.outputs[0])], to=int(to))


@register_converter("MatMul")
def _matmul(ctx: ExportContext, op: OpView) -> None:
    (a_s, b_s), ins = op.in_shapes, []
    for x, s, ax_name, tr_name in ((op.inputs[0], a_s, "axis_a", "trans_a"), (op.inputs[1], b_s, "axis_b", "trans_b")):
        ax = op.arg(ax_name) % max(len(s), 1)
        two = (int(np.prod(s[:ax], dtype=np.int64)), int(np.prod(s[ax:], dtype=np.int64)))
        v = ctx.read(x)
        if tuple(s) != two:
            v = ctx.reshape(v, two)
        if op.arg(tr_name):
            v = ctx.transpose(v, [1, 0])
        ins.append(v)
    ctx.node("MatMul", ins, [ctx.write(op.outputs[0])])


@register_converter("BatchMatMul")
def _batch_matmul(ctx: ExportContext, op: OpView) -> None:
    ins = []
    for x, s, tr in ((op.inputs[0], op.in_shapes[0], "trans_a"), (op.inputs[1], op.in_shapes[1], "trans_b")):
        v = ctx.read(x)
        if op.arg(tr) and len(s) >= 2:
            v = ctx.transpose(v, [*range(len(s) - 2), len(s) - 1, len(s) - 2])
        ins.append(v)
    out = ctx.write(op.outputs[0])
    if min(len(s) for s in op.in_shapes) >= 2:
        ctx.node("MatMul", ins, [out])
        return
    y = ctx.node("MatMul", ins)[0]
    ctx.reshape(y, op.out_shapes[0], out)


@register_converter("Where")
def _where(ctx: ExportContext, op: OpView) -> None:
    c = ctx.read(op.inputs[0])
    cs, xs = op.in_shapes[0], op.in_shapes[1]
    if op.arg("broadcast_on_rows") and len(cs) == 1 and len(xs) > 1:
        c = ctx.reshape(c, (cs[0],) + (1,) * (len(xs) - 1))
    ctx.node("Where", [c, ctx.read(op.inputs[1]), ctx.read(op.inputs[2])], [ctx.write(op.outputs[0])])
