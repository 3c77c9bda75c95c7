"""ONNX -> our ops: linear quantization (QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear)
and the integer products (MatMulInteger, QLinearMatMul) onto ``framework/ops/onnx``'s ops, for the
8- and 16-bit integer types. 2/4-bit integers and float8/float4 (no numpy type) stay unsupported."""

from __future__ import annotations

import numpy as np

from framework.onnx.import_attention import FLOATS16
from framework.onnx.importer import ImportContext, Node, Unsupported, translator

Q8 = (np.dtype(np.uint8), np.dtype(np.int8))
Q16 = Q8 + (np.dtype(np.uint16), np.dtype(np.int16))
_ONNX_TYPE = {np.dtype(np.uint8): 2, np.dtype(np.int8): 3, np.dtype(np.uint16): 4, np.dtype(np.int16): 5}
F32 = (np.dtype(np.float32),)


def _quant_type(ctx: ImportContext, name: str) -> None:
    from framework.ops.onnx.quantize import QUANT_NAMES

    dt = ctx.dtype(name)
    if dt is None or dt.name not in QUANT_NAMES:
        raise Unsupported(f"'{name}' of type {dt} (not a quantized type we run)")


def _onnx_type(dt: np.dtype) -> int:
    from onnx import helper

    return int(helper.np_dtype_to_tensor_dtype(dt))


def _axis_args(node: Node) -> dict:
    return {"axis": int(node.attr("axis", 1)), "block_size": int(node.attr("block_size", 0))}


@translator("QuantizeLinear", opsets=(10, 10_000))
def _quantize(ctx: ImportContext, node: Node) -> None:
    ctx.require(node, FLOATS16, [0, 1])
    if node.attr("precision"):
        raise Unsupported("precision")
    args = _axis_args(node)
    args["saturate"] = int(node.attr("saturate", 1))
    zp = node.input(2)
    if zp:
        _quant_type(ctx, zp)
        if node.attr("output_dtype") and node.attr("output_dtype") != _onnx_type(ctx.dtype(zp)):
            raise Unsupported("output_dtype and zero point types differ")
    else:
        to = int(node.attr("output_dtype", 2) or 2)
        if to not in _ONNX_TYPE.values():
            raise Unsupported(f"output type {to}")
        args["to"] = to
    ctx.op("ONNXQuantizeLinear", [n for n in node.inputs[:3] if n], [node.outputs[0]], **args)


@translator("DequantizeLinear", opsets=(10, 10_000))
def _dequantize(ctx: ImportContext, node: Node) -> None:
    for i in (0, 2):
        if node.input(i) and ctx.dtype(node.input(i)) != np.dtype(np.int32):
            _quant_type(ctx, node.input(i))
    ctx.require(node, FLOATS16, [1])
    out_type = node.attr("output_dtype")
    if out_type:
        from onnx import helper

        if np.dtype(helper.tensor_dtype_to_np_dtype(int(out_type))) != ctx.dtype(node.input(1)):
            raise Unsupported("output_dtype other than the scale's type")
    if node.input(2) and ctx.dtype(node.input(2)) != ctx.dtype(node.input(0)):
        raise Unsupported("zero point of another type than x")
    ctx.op("ONNXDequantizeLinear", [n for n in node.inputs[:3] if n], [node.outputs[0]], **_axis_args(node))


@translator("DynamicQuantizeLinear", opsets=(11, 10_000))
def _dynamic_quantize(ctx: ImportContext, node: Node) -> None:
    ctx.require(node, F32)
    ctx.op("ONNXDynamicQuantizeLinear", [node.input(0)], [o or ctx.fresh("dql_unused") for o in node.outputs[:3]])


def _zero_like(ctx: ImportContext, name: str) -> str:
    z = ctx.fresh("zero_point")
    ctx.values[z] = np.zeros((), ctx.dtype(name))
    return z


@translator("MatMulInteger", opsets=(10, 10_000))
def _matmul_integer(ctx: ImportContext, node: Node) -> None:
    ctx.require(node, Q8)
    a, b, za, zb = node.input(0), node.input(1), node.input(2), node.input(3)
    ins = [a, b]
    if za or zb:
        ins.append(za or _zero_like(ctx, a))
    if zb:
        ins.append(zb)
    ctx.op("ONNXMatMulInteger", ins, [node.outputs[0]])


@translator("QLinearMatMul", opsets=(10, 10_000))
def _qlinear_matmul(ctx: ImportContext, node: Node) -> None:
    ctx.require(node, Q8, [0, 2, 3, 5, 7])
    ctx.require(node, FLOATS16, [1, 4, 6])
    ins = list(node.inputs[:8])
    for i, src in ((2, 0), (5, 3), (7, 0)):
        if not ins[i]:
            ins[i] = _zero_like(ctx, ins[src])
    ctx.op("ONNXQLinearMatMul", ins, [node.outputs[0]])


def _centred_f64(ctx: ImportContext, x: str, z: str, channel_axis: bool) -> str:
    """float64 (x - z): exact for 8-bit integers; z a scalar, or one per output channel (axis 0)."""
    xf = ctx.fresh("int_as_double")
    ctx.op("Cast", [x], [xf], to=13)
    if not z:
        return xf
    zs = ctx.shape(z)
    if zs is None or (int(np.prod(zs)) != 1 and not (channel_axis and len(zs) == 1)):
        raise Unsupported(f"zero point '{z}' of shape {zs}")
    zf, out = ctx.fresh("zero_point_double"), ctx.fresh("centred")
    ctx.op("Cast", [z], [zf], to=13)
    if int(np.prod(zs)) == 1:
        zr = ctx.fresh("zero_point_scalar")
        ctx.op("Reshape", [zf], [zr, ctx.fresh("old_shape")], shape=[1])
        zf = zr
    ctx.op("Sub", [xf, zf], [out], broadcast=1, axis=0 if int(np.prod(zs)) != 1 else -1)
    return out


@translator("ConvInteger", opsets=(10, 10_000))
def _conv_integer(ctx: ImportContext, node: Node) -> None:
    """The int32 convolution of the centred 8-bit operands, run in float64 (every partial sum is an
    integer below 2^53, so exact) and cast back."""
    from framework.onnx.import_nn import _spatial

    ctx.require(node, Q8)
    w_shape = ctx.shape(node.input(1))
    if w_shape is None or len(w_shape) < 3:
        raise Unsupported("filter of unknown shape")
    kernel = list(node.attr("kernel_shape", w_shape[2:]))
    args = _spatial(ctx, node, kernel)
    group = int(node.attr("group", 1))
    if group != 1:
        args["group"] = group
    x = _centred_f64(ctx, node.input(0), node.input(2), False)
    w = _centred_f64(ctx, node.input(1), node.input(3), True)
    y = ctx.fresh("conv_double")
    ctx.op("Conv", [x, w], [y], **args)
    ctx.op("Cast", [y], [node.outputs[0]], to=2)


@translator("QLinearConv", opsets=(10, 10_000))
def _qlinear_conv(ctx: ImportContext, node: Node) -> None:
    """ConvInteger's exact float64 convolution, requantized as onnx's reference does:
    ``saturate(round_half_even(C * (x_scale * w_scale / y_scale) + y_zero_point))`` with the scale
    ratio in float32 (per output channel when w_scale is a vector)."""
    from framework.onnx.import_nn import _spatial

    ctx.require(node, Q8, [0, 2, 3, 5, 7])
    ctx.require(node, F32, [1, 4, 6])
    if not node.input(7) or any(not node.input(i) for i in (2, 5)):
        raise Unsupported("absent zero points")
    w_shape, yz = ctx.shape(node.input(3)), ctx.dtype(node.input(7))
    if w_shape is None or len(w_shape) < 3 or any(ctx.shape(node.input(i)) is None for i in (1, 4, 6)):
        raise Unsupported("filter or scales of unknown shape")
    m = w_shape[0]
    ws_size = int(np.prod(ctx.shape(node.input(4))))
    if (
        ws_size not in (1, m)
        or int(np.prod(ctx.shape(node.input(1)))) != 1
        or int(np.prod(ctx.shape(node.input(6)))) != 1
    ):
        raise Unsupported("scales other than scalars (and a per-channel w_scale)")
    kernel = list(node.attr("kernel_shape", w_shape[2:]))
    args = _spatial(ctx, node, kernel)
    if int(node.attr("group", 1)) != 1:
        args["group"] = int(node.attr("group", 1))
    x = _centred_f64(ctx, node.input(0), node.input(2), False)
    w = _centred_f64(ctx, node.input(3), node.input(5), True)
    conv = ctx.fresh("qconv_double")
    ins = [x, w]
    if len(node.inputs) > 8 and node.input(8):  # int32 bias: exact in float64
        b = ctx.fresh("qconv_bias")
        ctx.op("Cast", [node.input(8)], [b], to=13)
        ins.append(b)
    ctx.op("Conv", ins, [conv], **args)
    # the float32 ratio x_scale * w_scale / y_scale, as a float64 (per channel: (M, 1, ..., 1))
    xs, ys = _flat(ctx, node.input(1), [1]), _flat(ctx, node.input(6), [1])
    wsh = [m] + [1] * len(kernel) if ws_size == m else [1]
    ws = _flat(ctx, node.input(4), wsh)
    prod, ratio, ratio64 = ctx.fresh("q_scale"), ctx.fresh("q_ratio"), ctx.fresh("q_ratio64")
    ctx.op("Mul", [ws, xs], [prod])
    ctx.op("Div", [prod, ys], [ratio])
    ctx.op("Cast", [ratio], [ratio64], to=13)
    scaled, zf, zf1, shifted = ctx.fresh("q_scaled"), ctx.fresh("q_zp"), ctx.fresh("q_zp1"), ctx.fresh("q_shifted")
    ctx.op("Mul", [conv, ratio64], [scaled])
    ctx.op("Cast", [node.input(7)], [zf], to=13)
    ctx.op("Reshape", [zf], [zf1, ctx.fresh("old_shape")], shape=[1])
    ctx.op("Add", [scaled, zf1], [shifted])
    lo, hi = (0.0, 255.0) if yz == np.dtype(np.uint8) else (-128.0, 127.0)
    clipped, rounded = ctx.fresh("q_clipped"), ctx.fresh("q_rounded")
    ctx.op("Clip", [shifted], [clipped], min=lo, max=hi)
    ctx.op("ONNXRound", [clipped], [rounded])
    ctx.op("Cast", [rounded], [node.outputs[0]], to=6 if yz == np.dtype(np.uint8) else 7)


def _flat(ctx: ImportContext, name: str, shape: list) -> str:
    out = ctx.fresh("q_param")
    ctx.op("Reshape", [name], [out, ctx.fresh("old_shape")], shape=shape)
    return out
