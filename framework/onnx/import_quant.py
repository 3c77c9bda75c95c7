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


def _conv_args(ctx: ImportContext, node: Node, x: str, w: str) -> dict:
    """Caffe2 conv arguments of an integer conv node whose x and w have known ranks (>= 3, equal)."""
    from framework.onnx.import_nn import _spatial

    xs, ws = ctx.shape(x), ctx.shape(w)
    if ws is None or len(ws) < 3 or (xs is not None and len(xs) != len(ws)):
        raise Unsupported("filter of unknown shape, or x and w of different ranks")
    args = _spatial(ctx, node, list(node.attr("kernel_shape", ws[2:])))
    args.pop("kernels")  # the ops take the kernel from w
    if int(node.attr("group", 1)) != 1:
        args["group"] = int(node.attr("group", 1))
    return args


@translator("ConvInteger", opsets=(10, 10_000))
def _conv_integer(ctx: ImportContext, node: Node) -> None:
    """The exact int32 convolution of the centred 8-bit codes (``ONNXConvInteger``)."""
    ctx.require(node, Q8)
    args = _conv_args(ctx, node, node.input(0), node.input(1))
    ins = [node.input(0), node.input(1)]
    if node.input(2) or node.input(3):
        ins.append(node.input(2) or _zero_like(ctx, node.input(0)))
    if node.input(3):
        ins.append(node.input(3))
    ctx.op("ONNXConvInteger", ins, [node.outputs[0]], **args)


@translator("QLinearConv", opsets=(10, 10_000))
def _qlinear_conv(ctx: ImportContext, node: Node) -> None:
    """``ONNXQLinearConv``: the exact integer convolution requantized as onnx's reference does (round half to
    even of the float rescale, saturated to y_zero_point's type)."""
    ctx.require(node, Q8, [0, 2, 3, 5, 7])
    ctx.require(node, F32, [1, 4, 6])
    args = _conv_args(ctx, node, node.input(0), node.input(3))
    ins = list(node.inputs[:9])
    for i, src in ((2, 0), (5, 3), (7, 0)):
        if not ins[i]:
            ins[i] = _zero_like(ctx, ins[src])
    if len(ins) == 9 and not ins[8]:
        ins.pop()
    ctx.op("ONNXQLinearConv", ins, [node.outputs[0]], **args)
