"""ONNX -> our ops: Conv, ConvTranspose, pooling, Gemm, MatMul, Softmax, normalizations, Dropout."""

from __future__ import annotations

import numpy as np

from framework.onnx.importer import FLOATS, TRANSLATORS, ImportContext, Node, Unsupported, translator


def _spatial(ctx: ImportContext, node: Node, kernel: list[int]) -> dict:
    """Caffe2 conv/pool arguments from ONNX's strides/pads/dilations/auto_pad."""
    r = len(kernel)
    args = {"kernels": list(kernel), "strides": list(node.attr("strides", [1] * r))}
    auto = node.attr("auto_pad", "NOTSET")
    dil = list(node.attr("dilations", [1] * r))
    shape = ctx.shape(node.input(0))
    if auto in ("SAME_UPPER", "SAME_LOWER") and shape is not None and len(shape) == r + 2:
        # explicit pads: out = ceil(in / stride), the odd pad at the end (UPPER) or the start (LOWER)
        head, tail = [], []
        for n, k, st, d in zip(shape[2:], kernel, args["strides"], dil):
            total = max((-(-n // st) - 1) * st + (k - 1) * d + 1 - n, 0)
            small = total // 2
            head.append(small if auto == "SAME_UPPER" else total - small)
            tail.append(total - head[-1])
        args["pads"] = head + tail
    elif auto == "VALID":
        args["legacy_pad"] = 1
    elif auto == "SAME_UPPER":
        args["legacy_pad"] = 2
    elif auto in ("NOTSET", ""):
        args["pads"] = list(node.attr("pads", [0] * (2 * r)))
    else:
        raise Unsupported(f"auto_pad {auto} with an input of unknown shape")
    if any(d != 1 for d in dil):
        if args.get("legacy_pad") == 2:
            raise Unsupported("dilations with SAME padding")
        args["dilations"] = dil
    return args


@translator("Conv")
def _conv(ctx: ImportContext, node: Node) -> None:
    ctx.require(node, FLOATS)
    w_shape = ctx.shape(node.input(1))
    if w_shape is None:
        raise Unsupported("filter of unknown shape")
    kernel = list(node.attr("kernel_shape", w_shape[2:]))
    if len(kernel) == 0:
        raise Unsupported("no spatial dimensions")
    args = _spatial(ctx, node, kernel)
    group = int(node.attr("group", 1))
    if group != 1:
        if "dilations" in args:
            raise Unsupported("group with dilations")
        args["group"] = group
    ins = [n for n in node.inputs[:3] if n]
    ctx.op("Conv", ins, [node.outputs[0]], **args)


def _conv_low_precision(ctx: ImportContext, node: Node) -> None:
    """float16/bfloat16 Conv: the float32 convolution rounded back once (ONNX leaves the
    accumulation type open)."""
    from framework.onnx.import_elementwise import via_float32

    via_float32(_conv, ("float16", "bfloat16"))(ctx, node)


TRANSLATORS["Conv"] = (_conv_low_precision, TRANSLATORS["Conv"][1])
_conv_low_precision.via_float32 = True  # import_elementwise.wrap_low_precision leaves it as it is


@translator("ConvTranspose")
def _conv_transpose(ctx: ImportContext, node: Node) -> None:
    """Caffe2's ConvTranspose: out = stride * (in - 1) + k - pad_head - pad_tail + adj. ONNX's
    output_shape / auto_pad become those pads and adjs the way onnx's reference computes them
    (output_shape with explicit pads: the output zero-extended at the end)."""
    ctx.require(node, FLOATS)
    w_shape, x_shape = ctx.shape(node.input(1)), ctx.shape(node.input(0))
    if w_shape is None or x_shape is None:
        raise Unsupported("input or filter of unknown shape")
    r = len(x_shape) - 2
    kernel = list(node.attr("kernel_shape", w_shape[2:]))
    if r < 1 or len(kernel) != r or list(w_shape[2:]) != kernel:
        raise Unsupported("kernel_shape other than the filter's")
    dil = [int(d) for d in node.attr("dilations", [1] * r)]
    if len(dil) != r or min(dil) < 1:
        raise Unsupported("dilations")
    kernel = [(k - 1) * d + 1 for k, d in zip(kernel, dil)]  # a dilated filter = zeros between the taps
    strides = list(node.attr("strides", [1] * r))
    adj = list(node.attr("output_padding", [0] * r))[:r]
    auto = node.attr("auto_pad", "NOTSET") or "NOTSET"
    out_shape = node.attr("output_shape")
    if out_shape is not None:
        out_shape = list(out_shape)[-r:]
    natural = [st * (n - 1) + k for st, n, k in zip(strides, x_shape[2:], kernel)]
    if auto in ("SAME_UPPER", "SAME_LOWER") and node.attr("pads") is None:
        want = out_shape or [n * st for n, st in zip(x_shape[2:], strides)]
        total = [nat + a - o for nat, a, o in zip(natural, adj, want)]
        small = [t // 2 for t in total]
        head = small if auto == "SAME_UPPER" else [t - s for t, s in zip(total, small)]
        pads = head + [t - h for t, h in zip(total, head)]
    elif auto in ("NOTSET", "VALID"):
        pads = list(node.attr("pads", [0] * (2 * r))) if auto == "NOTSET" else [0] * (2 * r)
        if out_shape is not None:  # the reference's col2im into output_shape: zero-extended at the end
            adj = [0] * r
            for i in range(r):
                delta = out_shape[i] - (natural[i] - pads[i] - pads[r + i])
                if delta < 0:  # onnx's reference has no answer for a smaller output_shape
                    raise Unsupported("output_shape smaller than the convolution's extent")
                adj[i] = delta
    else:
        raise Unsupported(f"auto_pad {auto}")
    if any(p < 0 for p in pads) or any(not 0 <= a < st for a, st in zip(adj, strides)):
        raise Unsupported("negative pads or output padding not below the stride")
    args = {"kernels": kernel, "strides": strides, "pads": pads}
    if any(adj):
        args["adjs"] = adj
    if int(node.attr("group", 1)) != 1:
        args["group"] = int(node.attr("group", 1))
    ins = [n for n in node.inputs[:3] if n]
    if any(d != 1 for d in dil):
        ins[1] = _dilated_filter(ctx, ins[1], list(w_shape), dil)
    ctx.op("ConvTranspose", ins, [node.outputs[0]], **args)


def _dilated_filter(ctx: ImportContext, w: str, shape: list, dil: list) -> str:
    """W (C, M, k1..kr) with d - 1 zeros between taps: (C, M, (k1 - 1) * d1 + 1, ...), exact."""
    r = len(dil)
    split = shape[:2] + [v for k in shape[2:] for v in (k, 1)]
    a, b, c, out = ctx.fresh("w_split"), ctx.fresh("w_spread"), ctx.fresh("w_flat"), ctx.fresh("w_dilated")
    ctx.op("Reshape", [w], [a, ctx.fresh("old_shape")], shape=split)
    tail = [0, 0] + [v for d in dil for v in (0, d - 1)]
    ctx.op("ONNXPad", [a], [b], pads=[0] * len(split) + tail)
    ctx.op("Reshape", [b], [c, ctx.fresh("old_shape")], shape=shape[:2] + [k * d for k, d in zip(shape[2:], dil)])
    ends = [-1, -1] + [(k - 1) * d + 1 for k, d in zip(shape[2:], dil)]
    ctx.op("Slice", [c], [out], starts=[0] * (r + 2), ends=ends)
    return out


_INT8S = {np.dtype(np.uint8): 6, np.dtype(np.int8): 7}  # Caffe2 DataType numbers


def _pool(ctx: ImportContext, node: Node, kind: str) -> None:
    dt = ctx.dtype(node.input(0))
    if kind == "MaxPool" and dt in _INT8S and not (len(node.outputs) > 1 and node.outputs[1]):
        # 8-bit integers: the max of exactly representable float32 values, cast back
        x32, y32 = ctx.fresh("pool_in"), ctx.fresh("pool_out")
        ctx.op("Cast", [node.input(0)], [x32], to=1)
        ctx.types[x32], ctx.shapes[x32] = np.dtype(np.float32), ctx.shape(node.input(0))
        inner = Node(node.proto)
        inner.inputs, inner.outputs = [x32], [y32]
        _pool(ctx, inner, kind)
        ctx.op("Cast", [y32], [node.outputs[0]], to=_INT8S[dt])
        return
    ctx.require(node, FLOATS)
    if len(node.outputs) > 1 and node.outputs[1]:
        raise Unsupported("the Indices output")
    if node.attr("storage_order", 0):
        raise Unsupported("storage_order=1")
    kernel = list(node.attr("kernel_shape"))
    args = _spatial(ctx, node, kernel)
    pads = args.get("pads", [0] * (2 * len(kernel)))
    if any(p >= k for p, k in zip(pads, kernel * 2)):
        raise Unsupported("pads not smaller than the kernel")
    if node.attr("ceil_mode", 0):
        shape = ctx.shape(node.input(0))
        if shape is None or "legacy_pad" in args:
            raise Unsupported("ceil_mode with unknown shapes or auto_pad")
        # ceil mode = floor mode with extra tail padding, when the last window starts inside the input.
        r, st = len(kernel), args["strides"]
        dil = args.get("dilations", [1] * r)
        for i in range(r):
            n, k = shape[2 + i], dil[i] * (kernel[i] - 1) + 1
            total = n + pads[i] + pads[r + i] - k
            out = -(-total // st[i]) + 1
            if (out - 1) * st[i] >= n + pads[i]:
                out -= 1
            extra = (out - 1) * st[i] + k - (n + pads[i] + pads[r + i])
            if extra > 0:
                if kind == "AveragePool" and node.attr("count_include_pad", 0):
                    raise Unsupported("ceil_mode with count_include_pad")
                pads[r + i] += extra
        args["pads"] = pads
    if kind == "AveragePool":
        args["count_include_pad"] = int(node.attr("count_include_pad", 0))
        if "dilations" in args:
            raise Unsupported("AveragePool with dilations")
    if kind == "LpPool":
        args["p"] = float(node.attr("p", 2))
        if "dilations" in args:
            raise Unsupported("LpPool with dilations")
    ctx.op(kind, [node.input(0)], [node.outputs[0]], **args)


@translator("MaxPool")
def _max_pool(ctx: ImportContext, node: Node) -> None:
    if not (len(node.outputs) > 1 and node.outputs[1]):
        _pool(ctx, node, "MaxPool")
        return
    # with the Indices output: ONNXPool (windows as onnx's reference max pool, first maximum)
    ctx.require(node, FLOATS + (np.dtype(np.float16),))
    shape = ctx.shape(node.input(0))
    if shape is None or len(shape) < 3 or node.attr("ceil_mode", 0):
        raise Unsupported("Indices with ceil_mode, or an input of unknown shape")
    auto = node.attr("auto_pad", "NOTSET") or "NOTSET"
    if auto != "NOTSET":
        raise Unsupported("Indices with auto_pad")
    args = {k: list(node.attr(k)) for k in ("kernel_shape", "strides", "dilations", "pads") if node.attr(k)}
    args["storage_order"] = int(node.attr("storage_order", 0))
    ctx.op("ONNXPool", [node.input(0)], node.outputs[:2], mode="max", **args)


def _pool_or_onnx(ctx: ImportContext, node: Node, kind: str) -> None:
    """Caffe2's pooling op where it fits; else ONNXPool (dilations, ceil_mode with count_include_pad)."""
    n = len(ctx.ops)
    try:
        _pool(ctx, node, kind)
        return
    except Unsupported:
        del ctx.ops[n:]
    ctx.require(node, FLOATS + (np.dtype(np.float16),))
    shape = ctx.shape(node.input(0))
    if shape is None or len(shape) < 3:
        raise Unsupported("input of unknown shape or without spatial dimensions")
    args = {k: list(node.attr(k)) for k in ("kernel_shape", "strides", "dilations", "pads") if node.attr(k)}
    args["auto_pad"] = node.attr("auto_pad", "NOTSET") or "NOTSET"
    if args["auto_pad"] != "NOTSET" and node.attr("ceil_mode", 0):
        raise Unsupported("ceil_mode with auto_pad")
    args["ceil_mode"] = int(node.attr("ceil_mode", 0))
    args["count_include_pad"] = int(node.attr("count_include_pad", 0))
    mode = "avg" if kind == "AveragePool" else "lp"
    if mode == "lp":
        args["p"] = float(node.attr("p", 2))
    ctx.op("ONNXPool", [node.input(0)], [node.outputs[0]], mode=mode, **args)


@translator("AveragePool")
def _avg_pool(ctx: ImportContext, node: Node) -> None:
    _pool_or_onnx(ctx, node, "AveragePool")


@translator("LpPool")
def _lp_pool(ctx: ImportContext, node: Node) -> None:
    _pool_or_onnx(ctx, node, "LpPool")


@translator("GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool")
def _global_pool(ctx: ImportContext, node: Node) -> None:
    ctx.require(node, FLOATS)
    if ctx.rank(node.input(0)) < 3:
        raise Unsupported("input without spatial dimensions")
    kind = node.op_type[len("Global") :]
    args = {"global_pooling": 1}
    if kind == "LpPool":
        args["p"] = float(node.attr("p", 2))
    ctx.op(kind, [node.input(0)], [node.outputs[0]], **args)


@translator("Gemm")
def _gemm(ctx: ImportContext, node: Node) -> None:
    ctx.require(node, FLOATS)
    a, b = node.input(0), node.input(1)
    if ctx.rank(a) != 2 or ctx.rank(b) != 2:
        raise Unsupported("Gemm inputs of rank other than 2")
    alpha, beta = float(node.attr("alpha", 1.0)), float(node.attr("beta", 1.0))
    out = node.outputs[0]
    if _gemm_is_fc(ctx, node, alpha, beta):  # torch's Linear: A (M, K), B (N, K), C (N,)
        ctx.op("FC", [a, b, node.input(2)], [out])
        return
    y = out if not node.input(2) and alpha == 1.0 else ctx.fresh("gemm")
    ctx.op("MatMul", [a, b], [y], trans_a=int(node.attr("transA", 0)), trans_b=int(node.attr("transB", 0)))
    if alpha != 1.0:
        z = out if not node.input(2) else ctx.fresh("gemm_scaled")
        ctx.op("Scale", [y], [z], scale=alpha)
        y = z
    if node.input(2):
        c = node.input(2)
        if beta != 1.0:
            cs = ctx.fresh("gemm_c")
            ctx.op("Scale", [c], [cs], scale=beta)
            c = cs
        ctx.op("Add", [y, c], [out])


def _gemm_is_fc(ctx: ImportContext, node: Node, alpha: float, beta: float) -> bool:
    """Is this Gemm Caffe2's FC, Y = A B^T + C with a bias C of N values (the layout torch exports for a
    Linear layer)? FC packs the weights once and adds the bias in the GEMM's output pass."""
    if alpha != 1.0 or beta != 1.0 or node.attr("transA", 0) or not node.attr("transB", 0) or not node.input(2):
        return False
    a, b, c = (ctx.shape(node.input(i)) for i in range(3))
    dtypes = {ctx.dtype(node.input(i)) for i in range(3)}
    if len(dtypes) != 1 or a is None or b is None or c is None:
        return False
    return len(c) == 1 and isinstance(c[0], int) and c[0] == b[0]


@translator("MatMul")
def _matmul(ctx: ImportContext, node: Node) -> None:
    ctx.require(node, FLOATS)
    if ctx.shape(node.input(0)) is None or ctx.shape(node.input(1)) is None:  # ranks known at run time only
        ctx.op("ONNXMatMul", node.inputs[:2], [node.outputs[0]])
        return
    ra, rb = ctx.rank(node.input(0)), ctx.rank(node.input(1))
    if ra == 0 or rb == 0:
        raise Unsupported("0-d MatMul operands")
    a, b, out, drop = node.input(0), node.input(1), node.outputs[0], []
    if ra == 1:  # numpy's rule: a 1-D A is a row [1, K], its dim dropped from the result
        a = ctx.fresh("matmul_row")
        ctx.op("ExpandDims", [node.input(0)], [a], dims=[0])
        ra, drop = 2, [-2]
    if rb == 1:  # a 1-D B is a column [K, 1], its dim dropped from the result
        b = ctx.fresh("matmul_col")
        ctx.op("ExpandDims", [node.input(1)], [b], dims=[1])
        rb, drop = 2, drop + [-1]
    if drop:
        out = ctx.fresh("matmul_2d")
    if ra == 2 and rb == 2:
        ctx.op("MatMul", [a, b], [out])
    else:
        ctx.op("BatchMatMul", [a, b], [out], broadcast=1)
    if drop:
        rank = max(ra, rb)
        ctx.op("Squeeze", [out], [node.outputs[0]], dims=sorted(d % rank for d in drop))


@translator("Softmax", "LogSoftmax")
def _softmax(ctx: ImportContext, node: Node) -> None:
    ctx.require(node, FLOATS)
    rank = ctx.rank(node.input(0))
    if rank == 0:
        raise Unsupported("0-d input")
    if ctx.opset < 13:  # ONNX's old Softmax is Caffe2's: the input coerced to 2-D at axis
        ctx.op(node.op_type, [node.input(0)], [node.outputs[0]], axis=int(node.attr("axis", 1)) % rank)
        return
    axis = int(node.attr("axis", -1)) % rank
    if axis == rank - 1:
        ctx.op(node.op_type, [node.input(0)], [node.outputs[0]], axis=axis)
        return
    perm = [a for a in range(rank) if a != axis] + [axis]
    inv = list(np.argsort(perm))
    t, s = ctx.fresh("softmax_in"), ctx.fresh("softmax_out")
    ctx.op("Transpose", [node.input(0)], [t], axes=perm)
    ctx.op(node.op_type, [t], [s], axis=rank - 1)
    ctx.op("Transpose", [s], [node.outputs[0]], axes=[int(i) for i in inv])


@translator("BatchNormalization")
def _batch_norm(ctx: ImportContext, node: Node) -> None:
    ctx.require(node, FLOATS)
    if node.attr("training_mode", 0) and ctx.opset >= 14 and ctx.rank(node.input(0)) >= 2:
        outs = [o or ctx.fresh("bn_unused") for o in node.outputs[:3]]
        ctx.op(
            "ONNXBatchNormTraining",
            node.inputs[:5],
            outs,
            epsilon=float(node.attr("epsilon", 1e-5)),
            momentum=float(node.attr("momentum", 0.9)),
        )
        return
    if node.attr("training_mode", 0) or len([o for o in node.outputs if o]) > 1:
        raise Unsupported("training mode")
    if ctx.rank(node.input(0)) < 2:
        raise Unsupported("input of rank < 2")
    eps = float(node.attr("epsilon", 1e-5))
    ctx.op("SpatialBN", node.inputs[:5], [node.outputs[0]], is_test=1, epsilon=eps)


@translator("InstanceNormalization")
def _instance_norm(ctx: ImportContext, node: Node) -> None:
    ctx.require(node, FLOATS)
    if ctx.rank(node.input(0)) < 3:
        raise Unsupported("input without spatial dimensions")
    ctx.op("InstanceNorm", node.inputs[:3], [node.outputs[0]], epsilon=float(node.attr("epsilon", 1e-5)))


@translator("LRN")
def _lrn(ctx: ImportContext, node: Node) -> None:
    ctx.require(node, FLOATS)
    size = int(node.attr("size"))
    if size % 2 == 0 or ctx.rank(node.input(0)) != 4:
        raise Unsupported("even size or non-4-D input")
    args = {"size": size, "alpha": float(node.attr("alpha", 1e-4)), "beta": float(node.attr("beta", 0.75))}
    ctx.op("LRN", [node.input(0)], [node.outputs[0]], bias=float(node.attr("bias", 1.0)), **args)


@translator("Dropout")
def _dropout(ctx: ImportContext, node: Node) -> None:
    if node.input(2) and bool(ctx.const(node.input(2)).reshape(-1)[0]):
        ratio = float(ctx.const(node.input(1)).reshape(-1)[0]) if node.input(1) else float(node.attr("ratio", 0.5))
        if ratio != 0.0:  # training with ratio 0 keeps everything: the test-mode output exactly
            raise Unsupported("training mode with a non-zero ratio (random)")
    if node.attr("is_test", 1) == 0 and ctx.opset < 7:
        raise Unsupported("training mode")
    outs = [o for o in node.outputs if o]
    if len(outs) == 1:
        ctx.op("Copy", [node.input(0)], outs)
    else:
        ctx.require(node, FLOATS, [0])
        ctx.op("Dropout", [node.input(0)], outs, is_test=1)


@translator("MaxUnpool", opsets=(9, 10_000))
def _max_unpool(ctx: ImportContext, node: Node) -> None:
    ctx.require(node, FLOATS + (np.dtype(np.float16),), [0])
    args = {k: list(node.attr(k)) for k in ("kernel_shape", "strides", "pads") if node.attr(k)}
    if node.input(2):
        args["output_shape"] = [int(v) for v in ctx.const(node.input(2)).reshape(-1)]
    ctx.op("ONNXMaxUnpool", node.inputs[:2], [node.outputs[0]], **args)


@translator("DeformConv", opsets=(19, 10_000))
def _deform_conv(ctx: ImportContext, node: Node) -> None:
    ctx.require(node, FLOATS + (np.dtype(np.float16),))
    x, w = ctx.shape(node.input(0)), ctx.shape(node.input(1))
    if x is None or w is None or len(x) != 4:
        raise Unsupported("only 2-D DeformConv with known shapes")
    if node.attr("kernel_shape") is not None and list(node.attr("kernel_shape")) != list(w[2:]):
        raise Unsupported("kernel_shape other than the filter's")
    args = {k: list(node.attr(k)) for k in ("strides", "pads", "dilations") if node.attr(k)}
    args["group"], args["offset_group"] = int(node.attr("group", 1)), int(node.attr("offset_group", 1))
    ins = list(node.inputs[:3])
    if node.input(3):
        ins.append(node.input(3))
        args["has_bias"] = 1
    if node.input(4):
        ins.append(node.input(4))
        args["has_mask"] = 1
    ctx.op("ONNXDeformConv", ins, [node.outputs[0]], **args)


@translator("MeanVarianceNormalization", opsets=(9, 10_000))
def _mvn(ctx: ImportContext, node: Node) -> None:
    ctx.require(node, FLOATS + (np.dtype(np.float16),))
    axes = [int(a) for a in node.attr("axes", [0, 2, 3])]
    ctx.op("ONNXMeanVarianceNormalization", [node.input(0)], [node.outputs[0]], axes=axes)
