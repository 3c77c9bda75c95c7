"""ONNX -> our ops: NonMaxSuppression (ONNXNonMaxSuppression), RoiAlign (Caffe2's RoIAlign; max mode ONNXRoiAlign)."""

from __future__ import annotations

import numpy as np

from framework.onnx.importer import FLOATS, INTS, ImportContext, Node, Unsupported, translator


@translator("NonMaxSuppression", opsets=(10, 10_000))
def _nms(ctx: ImportContext, node: Node) -> None:
    ctx.require(node, FLOATS, [0, 1, 3, 4])
    ctx.require(node, INTS, [2])
    ins = [node.input(i) for i in range(5)]
    while ins and not ins[-1]:
        ins.pop()
    for i, name in enumerate(ins):
        if not name:
            ins[i] = ctx.fresh("nms_absent")
            ctx.values[ins[i]] = np.zeros(0, np.int64 if i == 2 else np.float32)
    ctx.op("ONNXNonMaxSuppression", ins, [node.outputs[0]], center_point_box=int(node.attr("center_point_box", 0)))


@translator("RoiAlign", opsets=(10, 10_000))
def _roi_align(ctx: ImportContext, node: Node) -> None:
    """RoIAlign on [batch index, x1, y1, x2, y2] rows; half_pixel is Caffe2's aligned=1 and
    output_half_pixel (opset 10's only mode) aligned=0 (RoIs at least 1 x 1), as ONNX specifies."""
    ctx.require(node, (np.dtype(np.float32),), [0, 1])
    ctx.require(node, INTS, [2])
    default = "half_pixel" if ctx.opset >= 16 else "output_half_pixel"
    coord = node.attr("coordinate_transformation_mode", default)
    if coord not in ("half_pixel", "output_half_pixel"):
        raise Unsupported(f"coordinate_transformation_mode={coord}")
    if node.attr("mode", "avg") != "avg":  # ONNX's max mode has no Caffe2 counterpart
        args = {k: node.attr(k) for k in ("output_height", "output_width", "sampling_ratio", "spatial_scale")}
        ctx.op("ONNXRoiAlign", node.inputs[:3], node.outputs[:1], mode=node.attr("mode"),
               coordinate_transformation_mode=coord, **args)  # fmt: skip
        return
    bf, bcol = ctx.fresh("roi_batch_f"), ctx.fresh("roi_batch_col")
    rois5 = ctx.fresh("rois5")
    ctx.op("Cast", [node.input(2)], [bf], to=1)
    ctx.op("ExpandDims", [bf], [bcol], dims=[1])
    ctx.op("Concat", [bcol, node.input(1)], [rois5, ctx.fresh("split_info")], axis=1)
    ctx.op(
        "RoIAlign",
        [node.input(0), rois5],
        [node.outputs[0]],
        pooled_h=int(node.attr("output_height", 1)),
        pooled_w=int(node.attr("output_width", 1)),
        sampling_ratio=int(node.attr("sampling_ratio", 0)),
        spatial_scale=float(node.attr("spatial_scale", 1.0)),
        aligned=int(coord == "half_pixel"),
    )
