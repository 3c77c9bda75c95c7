"""ONNX -> our ops: Cast and CastLike for every element type (Caffe2's Cast where both types are
Caffe2's, else ONNXCast: bfloat16, float8, float4, int4/int2, uint32/uint64, saturation)."""

from __future__ import annotations

import numpy as np

from framework.onnx.importer import ImportContext, Node, Unsupported, translator

# Caffe2 DataType codes of the dtypes Caffe2's Cast handles exactly (numpy astype semantics).
CAFFE2_TYPE = {
    np.dtype(np.float32): 1,
    np.dtype(np.int32): 2,
    np.dtype(bool): 5,
    np.dtype(np.uint8): 6,
    np.dtype(np.int8): 7,
    np.dtype(np.uint16): 8,
    np.dtype(np.int16): 9,
    np.dtype(np.int64): 10,
    np.dtype(np.float16): 12,
    np.dtype(np.float64): 13,
}


def emit_cast(ctx: ImportContext, x: str, out: str, dst: np.dtype, saturate: int = 1, round_mode: str = "up") -> None:
    """Cast ``x`` to ``dst`` into ``out`` (Caffe2's Cast when it is exact, else ONNXCast)."""
    src = ctx.dtype(x)
    if src is None:
        raise Unsupported(f"input '{x}' of unknown type")
    if src.kind in "OSU" or dst.kind in "OSU":
        raise Unsupported(f"cast {src} -> {dst}: string conversions")
    if src in CAFFE2_TYPE and dst in CAFFE2_TYPE:
        ctx.op("Cast", [x], [out], to=CAFFE2_TYPE[dst])
        return
    ctx.op("ONNXCast", [x], [out], to=dst.name, saturate=int(saturate), round_mode=round_mode)


@translator("Cast")
def _cast(ctx: ImportContext, node: Node) -> None:
    from onnx import helper

    try:
        dst = np.dtype(helper.tensor_dtype_to_np_dtype(int(node.attr("to"))))
    except Exception as e:
        raise Unsupported(f"target type {node.attr('to')}") from e
    emit_cast(ctx, node.input(0), node.outputs[0], dst, node.attr("saturate", 1), node.attr("round_mode", "up"))


@translator("CastLike")
def _cast_like(ctx: ImportContext, node: Node) -> None:
    dst = ctx.dtype(node.input(1))
    if dst is None:
        raise Unsupported(f"target '{node.input(1)}' of unknown type")
    emit_cast(ctx, node.input(0), node.outputs[0], dst, node.attr("saturate", 1), node.attr("round_mode", "up"))


@translator("BitCast")
def _bitcast(ctx: ImportContext, node: Node) -> None:
    from onnx import helper

    src = ctx.dtype(node.input(0))
    try:
        dst = np.dtype(helper.tensor_dtype_to_np_dtype(int(node.attr("to"))))
    except Exception as e:
        raise Unsupported(f"target type {node.attr('to')}") from e
    if src is None or src.kind in "OSU" or dst.kind in "OSU" or src.itemsize != dst.itemsize:
        raise Unsupported(f"bit-cast {src} -> {dst}")
    ctx.op("ONNXBitCast", [node.input(0)], [node.outputs[0]], to=dst.name)
