"""ONNX -> our ops: constants, reshaping, layout, Concat/Split, slicing, gathering, shapes."""

from __future__ import annotations

import numpy as np

from framework.onnx.importer import (
    BOOL,
    FLOATS,
    INTS,
    NUMERIC,
    ImportContext,
    NeedsRuntime,
    Node,
    Unsupported,
    translator,
)

ANY = NUMERIC + BOOL
# Data movement (no arithmetic): every plain numpy type.
MOVE = ANY + tuple(np.dtype(t) for t in (np.float16, np.int8, np.int16, np.uint8, np.uint16, np.uint32, np.uint64))


@translator("Constant")
def _constant(ctx: ImportContext, node: Node) -> None:
    from onnx import numpy_helper

    if "value" in node.attrs:
        value = numpy_helper.to_array(node.proto.attribute[0].t)
    elif "value_float" in node.attrs:
        value = np.array(node.attrs["value_float"], np.float32)
    elif "value_floats" in node.attrs:
        value = np.array(node.attrs["value_floats"], np.float32)
    elif "value_int" in node.attrs:
        value = np.array(node.attrs["value_int"], np.int64)
    elif "value_ints" in node.attrs:
        value = np.array(node.attrs["value_ints"], np.int64)
    else:
        raise Unsupported("sparse or string constants")
    if value.dtype.kind in "OUS":
        raise Unsupported("string constants")
    ctx.values[node.outputs[0]] = value


@translator("Reshape")
def _reshape(ctx: ImportContext, node: Node) -> None:
    ctx.require(node, MOVE, [0])
    shape = node.attr("shape") if ctx.opset < 5 else ctx.const(node.input(1)).reshape(-1).tolist()
    shape = [int(d) for d in shape]
    if node.attr("allowzero", 0) and 0 in shape:  # a literal 0 dim: the data must be empty
        in_shape = ctx.shape(node.input(0))
        if -1 in shape:
            raise Unsupported("allowzero=1 with both 0 and -1 in the shape (invalid in ONNX)")
        if in_shape is None or int(np.prod(in_shape)) != 0:
            raise NeedsRuntime("allowzero=1 with a 0 in the shape needs an empty input of known shape")
        out = shape
        dt = ctx.dtype(node.input(0))
        if dt is None:
            raise Unsupported("input of unknown type")
        ctx.values[node.outputs[0]] = np.zeros(out, dt)
        return
    ctx.op("Reshape", [node.input(0)], [node.outputs[0], ctx.fresh("old_shape")], shape=shape)


@translator("Flatten")
def _flatten(ctx: ImportContext, node: Node) -> None:
    ctx.require(node, MOVE)
    rank = ctx.rank(node.input(0))
    axis = int(node.attr("axis", 1))
    axis = axis + rank if axis < 0 else axis
    shape = ctx.shape(node.input(0))
    outer = int(np.prod(shape[:axis], dtype=np.int64))
    ctx.op("Reshape", [node.input(0)], [node.outputs[0], ctx.fresh("old_shape")], shape=[outer, -1])


@translator("Transpose")
def _transpose(ctx: ImportContext, node: Node) -> None:
    ctx.require(node, MOVE)
    perm = node.attr("perm")
    args = {"axes": [int(p) for p in perm]} if perm is not None else {}
    ctx.op("Transpose", [node.input(0)], [node.outputs[0]], **args)


@translator("Concat")
def _concat(ctx: ImportContext, node: Node) -> None:
    ctx.require(node, MOVE)
    rank = ctx.rank(node.input(0))
    axis = int(node.attr("axis", 1)) % rank
    ctx.op("Concat", node.inputs, [node.outputs[0], ctx.fresh("split_info")], axis=axis)


@translator("Split")
def _split(ctx: ImportContext, node: Node) -> None:
    ctx.require(node, MOVE, [0])
    shape = ctx.shape(node.input(0))
    if shape is None:
        raise NeedsRuntime("input of unknown shape")
    axis = int(node.attr("axis", 0)) % len(shape)
    split = node.attr("split")
    if split is None and node.input(1):
        split = ctx.const(node.input(1)).reshape(-1).tolist()
    n = len(node.outputs)
    if split is None:
        if node.attr("num_outputs") is not None:
            n = int(node.attr("num_outputs"))
            chunk = -(-shape[axis] // n)
            split = [chunk] * (n - 1) + [shape[axis] - chunk * (n - 1)]
        elif shape[axis] % n:
            raise Unsupported("uneven split without sizes")
        else:
            split = [shape[axis] // n] * n
    ctx.op("Split", [node.input(0)], node.outputs, axis=axis, split=[int(s) for s in split])


def _axes_of(ctx: ImportContext, node: Node) -> list[int] | None:
    axes = node.attr("axes")
    if axes is None and node.input(1):
        axes = ctx.const(node.input(1)).reshape(-1).tolist()
    return None if axes is None else [int(a) for a in axes]


@translator("Squeeze")
def _squeeze(ctx: ImportContext, node: Node) -> None:
    ctx.require(node, MOVE, [0])
    shape = ctx.shape(node.input(0))
    axes = _axes_of(ctx, node)
    if shape is None and axes:  # rank known at run time only: negative axes resolved there
        if all(a >= 0 for a in axes):  # Caffe2's Squeeze checks those dims are 1
            ctx.op("Squeeze", [node.input(0)], [node.outputs[0]], dims=sorted(axes))
        else:
            ctx.op("ONNXSqueeze", [node.input(0)], [node.outputs[0]], axes=axes)
        return
    if shape is None:
        raise NeedsRuntime("input of unknown shape")
    dims = [i for i, d in enumerate(shape) if d == 1] if axes is None else sorted(a % len(shape) for a in axes)
    ctx.op("Squeeze", [node.input(0)], [node.outputs[0]], dims=dims)


@translator("Unsqueeze")
def _unsqueeze(ctx: ImportContext, node: Node) -> None:
    ctx.require(node, MOVE, [0])
    axes = _axes_of(ctx, node)
    out_rank = ctx.rank(node.input(0)) + len(axes)
    ctx.op("ExpandDims", [node.input(0)], [node.outputs[0]], dims=sorted(a % out_rank for a in axes))


@translator("Gather")
def _gather(ctx: ImportContext, node: Node) -> None:
    ctx.require(node, ANY, [0])
    ctx.require(node, INTS, [1])
    rank = ctx.rank(node.input(0))
    axis = int(node.attr("axis", 0)) % rank
    ctx.op("Gather", node.inputs[:2], [node.outputs[0]], axis=axis)


@translator("Shape")
def _shape(ctx: ImportContext, node: Node) -> None:
    # A known shape is a constant (the backend re-translates when fed shapes differ from the
    # declared ones), so shape arithmetic downstream folds away.
    shape = ctx.shape(node.input(0))
    if shape is not None:
        ctx.values[node.outputs[0]] = np.array(shape, np.int64)[node.attr("start", 0) : node.attr("end")]
        return
    if node.attr("start") is not None or node.attr("end") is not None:
        raise NeedsRuntime("start/end with an input of unknown shape")
    ctx.op("Shape", [node.input(0)], [node.outputs[0]])


@translator("Size")
def _size(ctx: ImportContext, node: Node) -> None:
    shape = ctx.shape(node.input(0))
    if shape is not None:
        ctx.values[node.outputs[0]] = np.array(int(np.prod(shape, dtype=np.int64)), np.int64)
        return
    ctx.op("Size", [node.input(0)], [node.outputs[0]])


@translator("Tile")
def _tile(ctx: ImportContext, node: Node) -> None:
    ctx.require(node, ANY, [0])
    reps = [int(r) for r in ctx.const(node.input(1)).reshape(-1)]
    cur = node.input(0)
    todo = [(a, r) for a, r in enumerate(reps) if r != 1]
    if not todo:
        ctx.op("Copy", [cur], [node.outputs[0]])
        return
    for j, (a, r) in enumerate(todo):
        nxt = node.outputs[0] if j == len(todo) - 1 else ctx.fresh("tile")
        ctx.op("Tile", [cur], [nxt], tiles=r, axis=a)
        cur = nxt


@translator("Expand")
def _expand(ctx: ImportContext, node: Node) -> None:
    ctx.require(node, tuple(d for d in MOVE if d.kind in "iuf"), [0])  # Caffe2's Expand: any number type
    ctx.require(node, INTS, [1])
    ctx.op("Expand", node.inputs[:2], [node.outputs[0]])


@translator("Slice")
def _slice(ctx: ImportContext, node: Node) -> None:
    ctx.require(node, MOVE, [0])
    shape = ctx.shape(node.input(0))
    if ctx.opset >= 10 and (shape is None or any(n and n not in ctx.values for n in node.inputs[1:5])):
        _dynamic_slice(ctx, node)  # starts/ends/... computed at run time (e.g. in a Loop body)
        return
    if shape is None:
        raise NeedsRuntime("input of unknown shape")
    if ctx.opset < 10:
        starts, ends, axes, steps = node.attr("starts"), node.attr("ends"), node.attr("axes"), None
    else:
        starts, ends = ctx.const(node.input(1)).tolist(), ctx.const(node.input(2)).tolist()
        axes = ctx.const(node.input(3)).tolist() if node.input(3) else None
        steps = ctx.const(node.input(4)).tolist() if node.input(4) else None
    axes = list(range(len(starts))) if axes is None else [int(a) % len(shape) for a in axes]
    if steps is not None and any(int(s) != 1 for s in steps):
        _strided_slice(ctx, node, shape, axes, starts, ends, [int(s) for s in steps])
        return
    st, en = [0] * len(shape), [-1] * len(shape)
    for a, s, e in zip(axes, starts, ends):
        d = shape[a]
        s = int(np.clip(s + d if s < 0 else s, 0, d))
        e = int(np.clip(e + d if e < 0 else e, 0, d))
        if e < s:
            e = s
        st[a], en[a] = s, (-1 if e == d else e)
    ctx.op("Slice", [node.input(0)], [node.outputs[0]], starts=st, ends=en)


def _dynamic_slice(ctx: ImportContext, node: Node) -> None:
    """ONNXSlice reads starts/ends/axes/steps at run time (ONNX's clamping, any step)."""
    ins = [node.input(i) for i in range(3)]
    if node.input(4):
        axes = node.input(3)
        if not axes:  # steps without axes: the default axes 0 .. n - 1, n from the starts' shape
            n = ctx.shape(node.input(1))
            if n is None or len(n) != 1:
                raise NeedsRuntime("steps without axes and starts of unknown length")
            axes = ctx.fresh("slice_axes")
            ctx.values[axes] = np.arange(n[0], dtype=np.int64)
        ins += [axes, node.input(4)]
    elif node.input(3):
        ins.append(node.input(3))
    for n in ins[1:]:
        if ctx.dtype(n) not in (np.dtype(np.int32), np.dtype(np.int64)):
            raise Unsupported(f"'{n}' of type {ctx.dtype(n)} (int32/int64 expected)")
    ctx.op("ONNXSlice", ins, [node.outputs[0]])


def _strided_slice(ctx: ImportContext, node: Node, shape: tuple, axes: list, starts: list, ends: list, steps: list):
    """Slice with steps: one Gather of the exact (constant) indices per sliced axis, ONNX's clamping
    (a negative step clamps starts to [0, d-1] and ends to [-1, d-1])."""
    cur = node.input(0)
    todo = []
    for a, s, e, k in zip(axes, starts, ends, steps):
        d = shape[a]
        if k == 0:
            raise Unsupported("a step of 0")
        s, e = int(s), int(e)
        s, e = (s + d if s < 0 else s), (e + d if e < 0 else e)
        if k > 0:
            s, e = min(max(s, 0), d), min(max(e, 0), d)
        else:
            s, e = min(max(s, 0), d - 1), min(max(e, -1), d - 1)
        todo.append((a, np.arange(s, e, k, dtype=np.int64)))
    for j, (a, idx) in enumerate(todo):
        name = ctx.fresh("slice_index")
        ctx.values[name] = idx
        nxt = node.outputs[0] if j == len(todo) - 1 else ctx.fresh("sliced")
        ctx.op("Gather", [cur, name], [nxt], axis=a)
        cur = nxt


@translator("Pad")
def _pad(ctx: ImportContext, node: Node) -> None:
    ctx.require(node, FLOATS, [0])
    shape = ctx.shape(node.input(0))
    if shape is None or len(shape) != 4:
        raise Unsupported("only 4-D inputs (PadImage pads H and W)")
    if ctx.opset < 11:
        pads, value = list(node.attr("pads")), float(node.attr("value", 0.0))
    else:
        pads = [int(p) for p in ctx.const(node.input(1)).reshape(-1)]
        value = float(ctx.const(node.input(2)).reshape(-1)[0]) if node.input(2) else 0.0
        if node.input(3):
            axes = [int(a) % 4 for a in ctx.const(node.input(3)).reshape(-1)]
            full = [0] * 8
            for j, a in enumerate(axes):
                full[a], full[4 + a] = pads[j], pads[len(axes) + j]
            pads = full
    if pads[0] or pads[1] or pads[4] or pads[5]:
        raise Unsupported("padding of the N or C dimension")
    mode = node.attr("mode", "constant")
    if mode not in ("constant", "reflect", "edge"):
        raise Unsupported(f"mode {mode}")
    if mode != "constant" and any(p < 0 for p in pads):
        raise Unsupported("negative pads outside constant mode")
    if mode == "reflect" and (max(pads[2], pads[6]) >= shape[2] or max(pads[3], pads[7]) >= shape[3]):
        raise Unsupported("reflect pads as large as the input")
    args = {"pad_t": pads[2], "pad_l": pads[3], "pad_b": pads[6], "pad_r": pads[7], "mode": mode}
    ctx.op("PadImage", [node.input(0)], [node.outputs[0]], value=value, **args)


@translator("LayerNormalization")
def _layer_norm(ctx: ImportContext, node: Node) -> None:
    ctx.require(node, FLOATS)
    shape = ctx.shape(node.input(0))
    if shape is None:
        raise NeedsRuntime("input of unknown shape")
    axis = int(node.attr("axis", -1)) % len(shape)
    inner = tuple(shape[axis:])
    if ctx.shape(node.input(1)) != inner or (node.input(2) and ctx.shape(node.input(2)) != inner):
        raise Unsupported("scale/bias not of the normalized shape")
    if int(node.attr("stash_type", 1)) != 1:
        raise Unsupported("stash_type other than float")
    bias = node.input(2)
    if not bias:
        bias = ctx.fresh("ln_bias")
        ctx.values[bias] = np.zeros(inner, ctx.dtype(node.input(0)))
    outs = [node.outputs[0], ctx.fresh("ln_mean"), ctx.fresh("ln_std")]
    eps = float(node.attr("epsilon", 1e-5))
    ctx.op("LayerNorm", [node.input(0), node.input(1), bias], outs, axis=axis, epsilon=eps, elementwise_affine=1)
    # ONNX's Mean / InvStdDev keep X's rank: dims[:axis] + [1] * (rank - axis); Caffe2's std is sqrt(var + eps)
    stats_shape = list(shape[:axis]) + [1] * (len(shape) - axis)
    mean_out = node.outputs[1] if len(node.outputs) > 1 else ""
    inv_out = node.outputs[2] if len(node.outputs) > 2 else ""
    if mean_out:
        ctx.op("Reshape", [outs[1]], [mean_out, ctx.fresh("old_shape")], shape=stats_shape)
    if inv_out:
        inv = ctx.fresh("ln_inv_std")
        ctx.op("Reciprocal", [outs[2]], [inv])
        ctx.op("Reshape", [inv], [inv_out, ctx.fresh("old_shape")], shape=stats_shape)
