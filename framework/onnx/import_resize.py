"""ONNX Resize / Upsample -> ONNXResize (``framework/ops/onnx/resize.py``). The roi, scales and
sizes inputs must be constants (the backend specializes small fed integer inputs at run time;
float scales fed as inputs stay unsupported)."""

from __future__ import annotations

import numpy as np

from framework.onnx.importer import FLOATS, INTS, ImportContext, NeedsRuntime, Node, Unsupported, translator

NUMBERS = FLOATS + INTS + tuple(np.dtype(t) for t in (np.float16, np.int8, np.uint8, np.int16, np.uint16))


def _floats32(ctx: ImportContext, name: str, what: str) -> list[float]:
    v = ctx.const(name).reshape(-1)
    if v.dtype.kind != "f" or not np.array_equal(v.astype(np.float32).astype(v.dtype), v, equal_nan=True):
        raise Unsupported(f"{what} not exactly float32")
    return [float(x) for x in v.astype(np.float32)]


@translator("Resize")
def _resize(ctx: ImportContext, node: Node) -> None:
    ctx.require(node, NUMBERS, [0])
    rank = ctx.rank(node.input(0))
    args = {k: node.attr(k) for k in ("mode", "coordinate_transformation_mode", "nearest_mode", "cubic_coeff_a",
                                      "exclude_outside", "extrapolation_value", "antialias",
                                      "keep_aspect_ratio_policy", "axes")}  # fmt: skip
    args = {k: v for k, v in args.items() if v is not None}
    if ctx.opset < 11:  # Resize-10: X, scales; asymmetric coordinates, rounding unspecified
        scales = _floats32(ctx, node.input(1), "scales")
        if args.get("mode", "nearest") != "nearest" or any(s != int(s) for s in scales):
            raise Unsupported("Resize-10 other than nearest with integer scales")
        args.update(coordinate_transformation_mode="asymmetric", nearest_mode="floor", scales=scales)
    else:
        roi, scales, sizes = node.input(1), node.input(2), node.input(3)
        missing = [n for n in (roi, scales, sizes) if n and n not in ctx.values]
        if missing:  # ask for all of them at once (the backend feeds them as constants at run time)
            ctx.wanted.update(missing)
            raise NeedsRuntime(f"inputs {missing} must be constants")
        if scales and ctx.const(scales).size:
            args["scales"] = _floats32(ctx, scales, "scales")
        if sizes and ctx.const(sizes).size:
            args["sizes"] = [int(s) for s in ctx.const(sizes).reshape(-1)]
        if args.get("coordinate_transformation_mode") == "tf_crop_and_resize":
            if not roi:
                raise Unsupported("tf_crop_and_resize without roi")
            args["roi"] = _floats32(ctx, roi, "roi")
    n_axes = len(args.get("axes") or range(rank))
    if ("scales" in args) == ("sizes" in args) or len(args.get("scales") or args.get("sizes")) != n_axes:
        raise Unsupported("exactly one of scales/sizes with one value per axis")
    if "axes" in args:
        args["axes"] = [int(a) % rank for a in args["axes"]]
    ctx.op("ONNXResize", [node.input(0)], [node.outputs[0]], **args)


@translator("Upsample")
def _upsample(ctx: ImportContext, node: Node) -> None:
    ctx.require(node, NUMBERS, [0])
    scales = node.attr("scales") if ctx.opset < 9 else _floats32(ctx, node.input(1), "scales")
    scales = [float(s) for s in scales]
    if node.attr("mode", "nearest") != "nearest" or any(s != int(s) for s in scales):
        raise Unsupported("Upsample other than nearest with integer scales (ONNX leaves the rest loose)")
    args = {"coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"}
    ctx.op("ONNXResize", [node.input(0)], [node.outputs[0]], mode="nearest", scales=scales, **args)


@translator("GridSample")
def _grid_sample(ctx: ImportContext, node: Node) -> None:
    ctx.require(node, FLOATS + (np.dtype(np.float16),))
    if ctx.dtype(node.input(0)) != ctx.dtype(node.input(1)):
        raise Unsupported("X and grid of different types")
    mode = {"bilinear": "linear", "bicubic": "cubic"}.get(node.attr("mode", "linear"), node.attr("mode", "linear"))
    args = {"padding_mode": node.attr("padding_mode", "zeros"), "align_corners": int(node.attr("align_corners", 0))}
    ctx.op("ONNXGridSample", node.inputs[:2], [node.outputs[0]], mode=mode, **args)


@translator("AffineGrid")
def _affine_grid(ctx: ImportContext, node: Node) -> None:
    ctx.require(node, FLOATS, [0])
    ctx.require(node, INTS, [1])
    args = {"align_corners": int(node.attr("align_corners", 0))}
    ctx.op("ONNXAffineGrid", node.inputs[:2], [node.outputs[0]], **args)
