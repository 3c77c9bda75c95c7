"""Converters of the neural-network ops: Conv, ConvTranspose, pooling, FC, Softmax, SpatialBN,
LRN, InstanceNorm, LayerNorm, Dropout, PRelu, ChannelShuffle, PadImage, resizing.

Padding is always explicit: ``legacy_pad`` (VALID, SAME, CAFFE_LEGACY_POOLING) and Caffe2's
output-size rules are resolved on the input's shape by the same code our kernels use
(``framework.ops.nn.conv_args.resolve``), so ONNX's floor rule with those pads gives Caffe2's
sizes. NHWC ops run as their NCHW ONNX op between two Transposes (adjacent inverse Transposes are
cancelled after the export).
"""

from __future__ import annotations

import numpy as np

from framework.onnx.context import ExportContext, NotExportable, OpView, register_converter
from framework.ops.nn.conv_args import parse_conv_pool, resolve, split_layout
from framework.ops.nn.conv_transpose import convt_adjs, convt_geometry


def to_nchw_perm(nd: int) -> list[int]:
    return [0, nd - 1, *range(1, nd - 1)]


def to_nhwc_perm(nd: int) -> list[int]:
    return [0, *range(2, nd), 1]


def nchw_in(ctx: ExportContext, x: str, order: str, nd: int) -> str:
    return ctx.transpose(x, to_nchw_perm(nd)) if order == "NHWC" else x


def nchw_out(ctx: ExportContext, order: str, nd: int, out: str) -> str:
    """The name the NCHW ONNX op should write: ``out`` itself, or a temporary Transposed into ``out``."""
    if order != "NHWC":
        return out
    tmp = ctx.fresh(out + "_nchw")
    ctx.pending_transposes.append((tmp, to_nhwc_perm(nd), out))
    return tmp


def flush(ctx: ExportContext) -> None:
    for tmp, perm, out in ctx.pending_transposes:
        ctx.transpose(tmp, perm, out)
    ctx.pending_transposes.clear()


def _geometry(op: OpView, kernel=None):
    spec = parse_conv_pool(op.args, op.type, op.type)
    _, _, spatial = split_layout(op.in_shapes[0], spec.order)
    geo = resolve(spec, spatial, op.type, kernel=kernel)
    if any(p < 0 for p in geo.head + geo.tail):
        raise NotExportable("negative pads (cropping) have no ONNX Conv/Pool expression")
    return spec, geo


@register_converter("Conv", "Conv1D", "Conv2D", "Conv3D")
def _conv(ctx: ExportContext, op: OpView) -> None:
    nd = len(op.in_shapes[0])
    order = op.arg("order").upper()
    _, _, kernel = split_layout(op.in_shapes[1], order)
    spec, geo = _geometry(op, kernel=kernel)
    x = nchw_in(ctx, ctx.read(op.inputs[0]), order, nd)
    w = nchw_in(ctx, ctx.read(op.inputs[1]), order, nd)
    ins = [x, w] + ([ctx.read(op.inputs[2])] if len(op.inputs) > 2 else [])
    y = nchw_out(ctx, order, nd, ctx.write(op.outputs[0]))
    ctx.node(
        "Conv",
        ins,
        [y],
        kernel_shape=list(geo.kernel),
        strides=list(geo.stride),
        dilations=list(geo.dilation),
        pads=list(geo.head + geo.tail),
        group=spec.group,
    )
    flush(ctx)


@register_converter("ConvTranspose")
def _conv_transpose(ctx: ExportContext, op: OpView) -> None:
    nd = len(op.in_shapes[0])
    spec = parse_conv_pool(op.args, op.type, op.type)
    adjs = convt_adjs(op.has, op.arg)
    geo, _, _, _, _, _ = convt_geometry(spec, adjs, op.in_shapes[0], op.in_shapes[1], op.type)
    r = nd - 2
    adj = list(adjs) if isinstance(adjs, tuple) else [adjs] * r
    if any(a >= st for a, st in zip(adj, geo.stride)):
        raise NotExportable(f"adj {adj} not smaller than the stride {list(geo.stride)} (ONNX's output_padding)")
    x = nchw_in(ctx, ctx.read(op.inputs[0]), spec.order, nd)
    w = nchw_in(ctx, ctx.read(op.inputs[1]), spec.order, nd)
    ins = [x, w] + ([ctx.read(op.inputs[2])] if len(op.inputs) > 2 else [])
    y = nchw_out(ctx, spec.order, nd, ctx.write(op.outputs[0]))
    ctx.node(
        "ConvTranspose",
        ins,
        [y],
        kernel_shape=list(geo.kernel),
        strides=list(geo.stride),
        pads=list(geo.head + geo.tail),
        output_padding=adj,
        group=spec.group,
    )
    flush(ctx)


_POOLS = {"MaxPool": "MaxPool", "AveragePool": "AveragePool", "LpPool": "LpPool"}


@register_converter(*[f"{b}{s}" for b in _POOLS for s in ("", "1D", "2D", "3D")])
def _pool(ctx: ExportContext, op: OpView) -> None:
    base = op.type.rstrip("123D") if op.type[-2:] in ("1D", "2D", "3D") else op.type
    nd = len(op.in_shapes[0])
    spec, geo = _geometry(op)
    x = nchw_in(ctx, ctx.read(op.inputs[0]), spec.order, nd)
    y = nchw_out(ctx, spec.order, nd, ctx.write(op.outputs[0]))
    attrs = {}
    if base == "LpPool":
        attrs["p"] = int(op.arg("p")) if float(op.arg("p")).is_integer() else None
        if attrs["p"] is None:
            raise NotExportable("LpPool with a non-integer p (ONNX's p is an int)")
    pads = list(geo.head + geo.tail)
    if spec.global_pooling and base != "LpPool":
        ctx.node("Global" + base, [x], [y], **attrs)
    else:
        if any(h >= k or t >= k for h, t, k in zip(geo.head, geo.tail, geo.kernel)):
            if not _ceil_mode_fits(geo):
                raise NotExportable(f"pads {geo.head + geo.tail} not smaller than the kernel {geo.kernel}")
            attrs["ceil_mode"] = 1  # CAFFE_LEGACY_POOLING's tail pad as ONNX's ceil rule
            pads = list(geo.head + geo.head)
        if base == "AveragePool":
            attrs["count_include_pad"] = int(bool(op.arg("count_include_pad")))
        if base != "LpPool" and any(d != 1 for d in geo.dilation):
            attrs["dilations"] = list(geo.dilation)
        elif any(d != 1 for d in geo.dilation):
            raise NotExportable("LpPool with dilation")
        ctx.node(
            base, [x], [y], kernel_shape=list(geo.kernel), strides=list(geo.stride), pads=pads,
            **attrs,
        )  # fmt: skip
    flush(ctx)


def _ceil_mode_fits(geo) -> bool:
    """ONNX's ceil_mode with symmetric head pads gives the same output sizes as ``geo``."""
    for n, k, s, h, o in zip(geo.spatial, geo.kernel, geo.stride, geo.head, geo.out):
        out = -(-(n + 2 * h - k) // s) + 1
        if (out - 1) * s >= n + h:
            out -= 1
        if out != o or h >= k:
            return False
    return True


@register_converter("FC", "FCTransposed")
def _fc(ctx: ExportContext, op: OpView) -> None:
    xs, ws = op.in_shapes[0], op.in_shapes[1]
    axis, axis_w = op.arg("axis") % max(len(xs), 1), op.arg("axis_w") % max(len(ws), 1)
    m, k = int(np.prod(xs[:axis], dtype=np.int64)), int(np.prod(xs[axis:], dtype=np.int64))
    x = ctx.read(op.inputs[0])
    if tuple(xs) != (m, k):
        x = ctx.reshape(x, (m, k))
    w = ctx.read(op.inputs[1])
    transposed = op.type == "FCTransposed"
    w2 = (int(np.prod(ws[:axis_w], dtype=np.int64)), int(np.prod(ws[axis_w:], dtype=np.int64)))
    if tuple(ws) != w2:
        w = ctx.reshape(w, w2)
    b = ctx.read(op.inputs[2])
    n = w2[1] if transposed else w2[0]
    if tuple(op.in_shapes[2]) != (n,):
        b = ctx.reshape(b, (n,))
    out = ctx.write(op.outputs[0])
    final = tuple(op.out_shapes[0])
    y = out if final == (m, n) else ctx.fresh(out + "_2d")
    ctx.node("Gemm", [x, w, b], [y], transB=0 if transposed else 1)
    if y != out:
        ctx.reshape(y, final, out)


@register_converter("Softmax", "LogSoftmax")
def _softmax(ctx: ExportContext, op: OpView) -> None:
    shape = op.in_shapes[0]
    nd = len(shape)
    axis = op.arg("axis") % max(nd, 1)
    x = ctx.read(op.inputs[0])
    out = ctx.write(op.outputs[0])
    if ctx.opset < 13 or axis == nd - 1:
        ctx.node(op.type, [x], [out], axis=axis if ctx.opset < 13 else -1)
        return
    n, d = int(np.prod(shape[:axis], dtype=np.int64)), int(np.prod(shape[axis:], dtype=np.int64))
    s = ctx.node(op.type, [ctx.reshape(x, (n, d))], 1, axis=1)[0]
    ctx.reshape(s, shape, out)


@register_converter("SpatialBN")
def _spatial_bn(ctx: ExportContext, op: OpView) -> None:
    if not op.arg("is_test") or len(op.outputs) > 1:
        raise NotExportable("training mode (is_test=0): export the predict net (SpatialBN with is_test=1)")
    nd = len(op.in_shapes[0])
    order = op.arg("order").upper()
    x = nchw_in(ctx, ctx.read(op.inputs[0]), order, nd)
    ins = [x] + [ctx.read(b) for b in op.inputs[1:5]]
    y = nchw_out(ctx, order, nd, ctx.write(op.outputs[0]))
    ctx.node("BatchNormalization", ins, [y], epsilon=float(op.arg("epsilon")))
    flush(ctx)


@register_converter("LRN")
def _lrn(ctx: ExportContext, op: OpView) -> None:
    if len(op.outputs) > 1:
        raise NotExportable("the scale output (training form) has no ONNX expression")
    nd = len(op.in_shapes[0])
    order = op.arg("order").upper()
    x = nchw_in(ctx, ctx.read(op.inputs[0]), order, nd)
    y = nchw_out(ctx, order, nd, ctx.write(op.outputs[0]))
    a = op.args
    ctx.node("LRN", [x], [y], size=int(a.size), alpha=float(a.alpha), beta=float(a.beta), bias=float(a.bias))
    flush(ctx)


@register_converter("InstanceNorm")
def _instance_norm(ctx: ExportContext, op: OpView) -> None:
    if len(op.outputs) > 1:
        raise NotExportable("the mean/inv_stdev outputs have no ONNX expression")
    nd = len(op.in_shapes[0])
    order = op.arg("order").upper()
    x = nchw_in(ctx, ctx.read(op.inputs[0]), order, nd)
    y = nchw_out(ctx, order, nd, ctx.write(op.outputs[0]))
    ins = [x, ctx.read(op.inputs[1]), ctx.read(op.inputs[2])]
    ctx.node("InstanceNormalization", ins, [y], epsilon=float(op.arg("epsilon")))
    flush(ctx)


@register_converter("LayerNorm")
def _layer_norm(ctx: ExportContext, op: OpView) -> None:
    shape = op.in_shapes[0]
    nd = len(shape)
    axis = op.arg("axis") % max(nd, 1)
    dt = op.in_dtypes[0]
    axes = list(range(axis, nd))
    x = ctx.read(op.inputs[0])
    mean = ctx.reduce("ReduceMean", x, axes, 1)
    d = ctx.node("Sub", [x, mean])[0]
    var = ctx.reduce("ReduceMean", ctx.node("Mul", [d, d])[0], axes, 1)
    std = ctx.node("Sqrt", [ctx.node("Add", [var, ctx.const(op.arg("epsilon"), "eps", dt)])[0]])[0]
    affine = len(op.inputs) == 3
    y_out = ctx.write(op.outputs[0])
    y = ctx.node("Div", [d, std], 1 if affine else [y_out])[0]
    if affine:
        g = ctx.read(op.inputs[1])
        b = ctx.read(op.inputs[2])
        if tuple(op.in_shapes[1]) != tuple(shape[axis:]):
            g = ctx.reshape(g, shape[axis:])
        if tuple(op.in_shapes[2]) != tuple(shape[axis:]):
            b = ctx.reshape(b, shape[axis:])
        ctx.node("Add", [ctx.node("Mul", [y, g])[0], b], [y_out])
    for i, t in ((1, mean), (2, std)):
        if i < len(op.outputs):
            ctx.reshape(t, op.out_shapes[i], ctx.write(op.outputs[i]))


@register_converter("Dropout")
def _dropout(ctx: ExportContext, op: OpView) -> None:
    if not op.arg("is_test"):
        raise NotExportable("training mode (is_test=0) drops at random: export the predict net (is_test=1)")
    if len(op.outputs) > 1:  # test mode writes an all-true mask: ONNX Dropout in inference mode does too
        ctx.node("Dropout", [ctx.read(op.inputs[0])], [ctx.write(op.outputs[0]), ctx.write(op.outputs[1])])
        return
    ctx.node("Identity", [ctx.read(op.inputs[0])], [ctx.write(op.outputs[0])])


@register_converter("PRelu")
def _prelu(ctx: ExportContext, op: OpView) -> None:
    nd = len(op.in_shapes[0])
    order = op.arg("order").upper()
    slope = ctx.read(op.inputs[1])
    n = int(np.prod(op.in_shapes[1], dtype=np.int64))
    if order == "NCHW" and nd > 2 and n > 1:
        slope = ctx.reshape(slope, (n,) + (1,) * (nd - 2))
    elif n == 1 and len(op.in_shapes[1]) != 1:
        slope = ctx.reshape(slope, (1,))
    ctx.node("PRelu", [ctx.read(op.inputs[0]), slope], [ctx.write(op.outputs[0])])


@register_converter("ChannelShuffle")
def _channel_shuffle(ctx: ExportContext, op: OpView) -> None:
    shape = op.in_shapes[0]
    nd = len(shape)
    g = op.arg("group")
    order = op.arg("order").upper()
    x = ctx.read(op.inputs[0])
    if order == "NCHW":
        c = shape[1]
        split = (shape[0], g, c // g, *shape[2:])
        perm = [0, 2, 1, *range(3, nd + 1)]
    else:
        c = shape[-1]
        split = (*shape[:-1], g, c // g)
        perm = [*range(nd - 1), nd, nd - 1]
    t = ctx.transpose(ctx.reshape(x, split), perm)
    ctx.reshape(t, shape, ctx.write(op.outputs[0]))


@register_converter("PadImage")
def _pad_image(ctx: ExportContext, op: OpView) -> None:
    spec = parse_conv_pool(op.args, op.type, op.type, need_kernel=False)
    nd = len(op.in_shapes[0])
    r = nd - 2
    p = spec.pads if isinstance(spec.pads, tuple) else (spec.pads,) * (2 * r)
    if spec.order == "NCHW":
        pads = [0, 0, *p[:r], 0, 0, *p[r:]]
    else:
        pads = [0, *p[:r], 0, 0, *p[r:], 0]
    mode = op.arg("mode")
    if mode not in ("constant", "reflect", "edge"):
        raise NotExportable(f"mode '{mode}'")
    ins = [ctx.read(op.inputs[0]), ctx.ints(pads, "pads")]
    if mode == "constant":
        ins.append(ctx.const(op.arg("value"), "value", op.in_dtypes[0]))
    ctx.node("Pad", ins, [ctx.write(op.outputs[0])], mode=mode)


@register_converter("ResizeNearest", "UpsampleBilinear")
def _resize(ctx: ExportContext, op: OpView) -> None:
    nd = len(op.in_shapes[0])
    order = op.arg("order", "NCHW").upper()
    if nd != 4 or len(op.inputs) > 1:
        raise NotExportable("only 4-D inputs with the scales given as arguments")
    x = nchw_in(ctx, ctx.read(op.inputs[0]), order, nd)
    y = nchw_out(ctx, order, nd, ctx.write(op.outputs[0]))
    hs, ws = float(op.arg("height_scale")), float(op.arg("width_scale"))
    if op.type == "ResizeNearest":
        scales = ctx.const(np.array([1, 1, hs, ws], np.float32), "scales")
        ctx.node(
            "Resize", [x, "", scales], [y], mode="nearest", coordinate_transformation_mode="asymmetric",
            nearest_mode="floor",
        )  # fmt: skip
    else:
        out = op.out_shapes[0]
        sizes = ctx.ints(out if order == "NCHW" else (out[0], out[3], out[1], out[2]), "sizes")
        ctx.node("Resize", [x, "", "", sizes], [y], mode="linear", coordinate_transformation_mode="align_corners")
    flush(ctx)


@register_converter("AveragedLoss")
def _averaged_loss(ctx: ExportContext, op: OpView) -> None:
    ctx.reduce("ReduceMean", ctx.read(op.inputs[0]), None, 0, ctx.write(op.outputs[0]))
