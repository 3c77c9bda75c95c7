"""ONNX -> our ops: layout nodes expressed with Caffe2's Reshape/Transpose and the
ONNX family: DepthToSpace / SpaceToDepth (both modes), CenterCropPad, ReverseSequence."""

from __future__ import annotations

import numpy as np

from framework.onnx.importer import ImportContext, NeedsRuntime, Node, Unsupported, translator
from framework.ops.onnx.common import MOVABLE, NUM_OR_BOOL


def _reshape(ctx: ImportContext, x: str, shape: list[int], out: str | None = None) -> str:
    out = out or ctx.fresh("reshaped")
    ctx.op("Reshape", [x], [out, ctx.fresh("old_shape")], shape=[int(d) for d in shape])
    return out


def _nchw(ctx: ImportContext, node: Node) -> tuple[int, int, int, int, int]:
    ctx.require(node, NUM_OR_BOOL, [0])
    shape = ctx.shape(node.input(0))
    if shape is None or len(shape) != 4:
        raise NeedsRuntime("needs a 4-D input of known shape")
    return (*shape, int(node.attr("blocksize")))


@translator("DepthToSpace")
def _depth_to_space(ctx: ImportContext, node: Node) -> None:
    b, c, h, w, bs = _nchw(ctx, node)
    if c % (bs * bs):
        raise Unsupported(f"channels {c} not a multiple of blocksize^2")
    mode = node.attr("mode", "DCR")
    if mode not in ("DCR", "CRD"):
        raise Unsupported(f"mode {mode}")
    if mode == "DCR":
        t, perm = _reshape(ctx, node.input(0), [b, bs, bs, c // bs**2, h, w]), [0, 3, 4, 1, 5, 2]
    else:  # CRD
        t, perm = _reshape(ctx, node.input(0), [b, c // bs**2, bs, bs, h, w]), [0, 1, 4, 2, 5, 3]
    tr = ctx.fresh("d2s")
    ctx.op("Transpose", [t], [tr], axes=perm)
    _reshape(ctx, tr, [b, c // bs**2, h * bs, w * bs], node.outputs[0])


@translator("SpaceToDepth")
def _space_to_depth(ctx: ImportContext, node: Node) -> None:
    b, c, h, w, bs = _nchw(ctx, node)
    if h % bs or w % bs:
        raise Unsupported(f"H, W ({h}, {w}) not multiples of blocksize")
    t = _reshape(ctx, node.input(0), [b, c, h // bs, bs, w // bs, bs])
    tr = ctx.fresh("s2d")
    mode = node.attr("mode", "DCR")
    if mode not in ("DCR", "CRD"):
        raise Unsupported(f"mode {mode}")
    ctx.op("Transpose", [t], [tr], axes=[0, 3, 5, 1, 2, 4] if mode == "DCR" else [0, 1, 3, 5, 2, 4])
    _reshape(ctx, tr, [b, c * bs * bs, h // bs, w // bs], node.outputs[0])


@translator("CenterCropPad")
def _center_crop_pad(ctx: ImportContext, node: Node) -> None:
    """Crop (centre, the extra cell at the end) where the target is smaller, pad with zeros (centre,
    the extra cell at the end) where larger: one ONNXPad with per-side (negative) pads."""
    ctx.require(node, MOVABLE, [0])
    shape = ctx.shape(node.input(0))
    if shape is None:
        raise NeedsRuntime("input of unknown shape")
    r = len(shape)
    target = [int(v) for v in ctx.const(node.input(1)).reshape(-1)]
    axes = [int(a) % r for a in (node.attr("axes") or range(r))]
    if len(target) != len(axes) or any(t < 0 for t in target):
        raise Unsupported("shape does not give one size >= 0 per axis")
    pads = [0] * (2 * r)
    for a, t in zip(axes, target):
        d = shape[a]
        if t < d:  # crop: start at (d - t) // 2
            pads[a], pads[r + a] = -((d - t) // 2), -(d - t - (d - t) // 2)
        elif t > d:  # pad: (t - d) // 2 before
            pads[a], pads[r + a] = (t - d) // 2, t - d - (t - d) // 2
    ctx.op("ONNXPad", [node.input(0)], [node.outputs[0]], pads=pads, mode="constant")


@translator("ReverseSequence")
def _reverse_sequence(ctx: ImportContext, node: Node) -> None:
    """Gather each batch entry's first seq_len items reversed: a constant index tensor for
    ONNXGatherElements (the lengths must be constants)."""
    ctx.require(node, MOVABLE, [0])
    shape = ctx.shape(node.input(0))
    if shape is None or len(shape) < 2:
        raise NeedsRuntime("input of unknown shape or rank < 2")
    lens = ctx.const(node.input(1)).reshape(-1).astype(np.int64)
    t_axis, b_axis = int(node.attr("time_axis", 0)), int(node.attr("batch_axis", 1))
    if {t_axis, b_axis} != {0, 1} or lens.size != shape[b_axis]:
        raise Unsupported("time/batch axes other than 0/1, or lengths not one per batch entry")
    if np.any(lens < 0) or np.any(lens > shape[t_axis]):
        raise Unsupported("lengths outside [0, time steps]")
    t = np.arange(shape[t_axis])[:, None]  # [time, batch]
    src = np.where(t < lens[None, :], lens[None, :] - 1 - t, t)
    if t_axis == 1:
        src = src.T
    idx = np.broadcast_to(src.reshape(src.shape + (1,) * (len(shape) - 2)), shape).astype(np.int64)
    name = ctx.fresh("reverse_index")
    ctx.values[name] = np.ascontiguousarray(idx)
    ctx.op("ONNXGatherElements", [node.input(0), name], [node.outputs[0]], axis=t_axis)
