"""Generated single-op nets for the export tests: for each exportable Caffe2 op type, a function
``rng -> (inputs, args, n_outputs)`` drawing random shapes, values and arguments.

``inputs`` is a list of arrays (the first ones are graph inputs; names ``in0``, ``in1``...);
``args`` the op's arguments. Every converter in ``framework.onnx`` has at least one case here
(``test_every_converter_has_a_case``).
"""

from __future__ import annotations

import numpy as np

F = np.float32


def _f(rng, *shape, lo=-2.0, hi=2.0):
    return rng.uniform(lo, hi, size=shape).astype(F)


def _shape(rng, lo_rank=1, hi_rank=4, lo=1, hi=5):
    return tuple(int(d) for d in rng.integers(lo, hi + 1, size=int(rng.integers(lo_rank, hi_rank + 1))))


def unary(pos=False):
    def gen(rng):
        x = _f(rng, *_shape(rng), lo=0.1 if pos else -2.0)
        return [x], {}, 1

    return gen


def with_args(**spec):
    def gen(rng):
        return [_f(rng, *_shape(rng))], {k: float(rng.uniform(*v)) for k, v in spec.items()}, 1

    return gen


def binary(kind="f"):
    def gen(rng):
        a_shape = _shape(rng, 1, 4)
        mode = int(rng.integers(0, 3))
        args = {}
        if mode == 0:  # numpy broadcasting: B a suffix with some 1s
            b_shape = tuple(1 if rng.random() < 0.3 else d for d in a_shape[int(rng.integers(0, len(a_shape))) :])
        elif mode == 1:  # legacy broadcast at an axis
            axis = int(rng.integers(0, len(a_shape)))
            end = int(rng.integers(axis + 1, len(a_shape) + 1))
            b_shape = a_shape[axis:end]
            args = {"broadcast": 1, "axis": axis}
        else:
            b_shape = a_shape
        if kind == "b":
            return [rng.random(a_shape) < 0.5, rng.random(b_shape) < 0.5], args, 1
        if kind == "pos":
            return [_f(rng, *a_shape, lo=0.5, hi=2.0), _f(rng, *b_shape, lo=-2, hi=2)], args, 1
        b = _f(rng, *b_shape, lo=0.5, hi=2.0) * np.where(rng.random(b_shape) < 0.5, -1, 1).astype(F)
        if kind == "cmp":
            b = np.round(b)
            return [np.round(_f(rng, *a_shape)), b], args, 1
        return [_f(rng, *a_shape), b], args, 1

    return gen


def nary(rng):
    shape = _shape(rng)
    return [_f(rng, *shape) for _ in range(int(rng.integers(1, 4)))], {}, 1


def reduce_op(rng):
    shape = _shape(rng, 1, 4)
    k = int(rng.integers(0, len(shape) + 1))
    axes = sorted(rng.choice(len(shape), size=k, replace=False).tolist()) if k else None
    args = {"keepdims": int(rng.integers(0, 2))}
    if axes:
        args["axes"] = axes
    return [_f(rng, *shape)], args, 1


def front_back(rng):
    shape = _shape(rng, 2, 4)
    return [_f(rng, *shape)], {"num_reduce_dim": int(rng.integers(1, len(shape)))}, 1


def elements(rng):
    return [_f(rng, *_shape(rng))], {"average": int(rng.integers(0, 2))}, 1


def matrix(rng):
    return [_f(rng, *_shape(rng, 3, 3))], {}, 1


def arg_max(rng):
    shape = _shape(rng)
    return (
        [_f(rng, *shape)],
        {"axis": int(rng.integers(-len(shape), len(shape))), "keepdims": int(rng.integers(0, 2))},
        1,
    )


def pair_rows(rng):
    shape = _shape(rng, 1, 3)
    return [_f(rng, *shape), _f(rng, *shape)], {}, 1


def clip(rng):
    lo = float(rng.uniform(-1.5, 0))
    return [_f(rng, *_shape(rng))], {"min": lo, "max": lo + float(rng.uniform(0.1, 2))}, 1


def pow_op(rng):
    if rng.random() < 0.5:
        return [_f(rng, *_shape(rng), lo=0.5, hi=2)], {"exponent": float(rng.choice([2.0, 0.5, -1.0, 3.0]))}, 1
    return binary("pos")(rng)


def _image(rng, nhwc=False, rank=2, c=None):
    n, c = int(rng.integers(1, 3)), c or int(rng.integers(1, 5))
    sp = tuple(int(d) for d in rng.integers(3, 9, size=rank))
    return (n, *sp, c) if nhwc else (n, c, *sp)


def conv(rng):
    nhwc = rng.random() < 0.4
    rank = 2 if nhwc else int(rng.integers(1, 4))
    group = int(rng.choice([1, 2])) if not nhwc else 1
    c = 2 * int(rng.integers(1, 3))
    xs = _image(rng, nhwc, rank, c)
    m = group * int(rng.integers(1, 4))
    k = tuple(int(d) for d in rng.integers(1, 4, size=rank))
    args = {"order": "NHWC" if nhwc else "NCHW", "kernels": list(k), "strides": rng.integers(1, 3, size=rank).tolist()}
    legacy = int(rng.choice([0, 0, 1, 2]))
    if legacy:
        args["legacy_pad"] = legacy
    else:
        args["pads"] = rng.integers(0, 2, size=2 * rank).tolist()
        if group == 1:
            args["dilations"] = rng.integers(1, 3, size=rank).tolist()
    if group > 1:
        args["group"] = group
    ws = (m, *k, c // group) if nhwc else (m, c // group, *k)
    return [_f(rng, *xs), _f(rng, *ws), _f(rng, m)], args, 1


def conv_transpose(rng):
    nhwc = rng.random() < 0.4
    c, m = int(rng.integers(1, 4)), int(rng.integers(1, 4))
    xs = _image(rng, nhwc, 2, c)
    k = int(rng.integers(1, 4))
    stride = int(rng.integers(1, 3))
    args = {"order": "NHWC" if nhwc else "NCHW", "kernel": k, "stride": stride, "pad": int(rng.integers(0, k))}
    if stride > 1:
        args["adj"] = int(rng.integers(0, stride))
    ws = (c, k, k, m) if nhwc else (c, m, k, k)
    return [_f(rng, *xs), _f(rng, *ws), _f(rng, m)], args, 1


def pool(kind):
    def gen(rng):
        nhwc = rng.random() < 0.4
        rank = 2 if nhwc else int(rng.integers(1, 4))
        xs = _image(rng, nhwc, rank)
        args = {"order": "NHWC" if nhwc else "NCHW"}
        if rng.random() < 0.2:
            args["global_pooling"] = 1
            return [_f(rng, *xs)], args, 1
        k = int(rng.integers(2, 4))
        args.update(kernel=k, stride=int(rng.integers(1, 3)))
        legacy = int(rng.choice([0, 0, 1, 2, 3]))
        if legacy:
            args["legacy_pad"] = legacy
        if legacy in (0, 3):
            args["pad"] = int(rng.integers(0, k - 1)) if legacy == 0 else int(rng.integers(0, 1))
        if kind == "AveragePool" and rng.random() < 0.3 and legacy != 3:
            args["count_include_pad"] = 1
        if kind == "LpPool":
            args["p"] = float(rng.choice([1.0, 2.0, 3.0]))
        return [_f(rng, *xs)], args, 1

    return gen


def fc(rng, transposed=False):
    xs = _shape(rng, 2, 4)
    axis = int(rng.integers(1, len(xs)))
    k = int(np.prod(xs[axis:]))
    n = int(rng.integers(1, 6))
    if rng.random() < 0.3 and k % 2 == 0:  # W with 3 dims flattened at axis_w
        w_shape = (n, 2, k // 2) if not transposed else (k, n)
        args = {"axis": axis, "axis_w": 1}
    else:
        w_shape = (k, n) if transposed else (n, k)
        args = {"axis": axis}
    return [_f(rng, *xs), _f(rng, *w_shape), _f(rng, n)], args, 1


def softmax(rng):
    shape = _shape(rng, 1, 4)
    return [_f(rng, *shape)], {"axis": int(rng.integers(0, len(shape)))}, 1


def spatial_bn(rng):
    nhwc = rng.random() < 0.4
    xs = _image(rng, nhwc, int(rng.integers(1, 3)) if not nhwc else 2)
    c = xs[-1] if nhwc else xs[1]
    ins = [_f(rng, *xs), _f(rng, c), _f(rng, c), _f(rng, c), _f(rng, c, lo=0.5, hi=2)]
    return ins, {"is_test": 1, "epsilon": float(rng.uniform(1e-5, 1e-2)), "order": "NHWC" if nhwc else "NCHW"}, 1


def lrn(rng):
    nhwc = rng.random() < 0.4
    xs = _image(rng, nhwc, 2)
    args = {"size": int(rng.choice([1, 3, 5])), "alpha": float(rng.uniform(1e-4, 1e-1)), "beta": 0.75}
    args.update(bias=float(rng.uniform(1, 2)), order="NHWC" if nhwc else "NCHW")
    return [_f(rng, *xs)], args, 1


def instance_norm(rng):
    nhwc = rng.random() < 0.4
    xs = _image(rng, nhwc, 2)
    c = xs[-1] if nhwc else xs[1]
    return [_f(rng, *xs), _f(rng, c), _f(rng, c)], {"order": "NHWC" if nhwc else "NCHW"}, 1


def layer_norm(rng):
    shape = _shape(rng, 2, 4, lo=2)
    axis = int(rng.integers(1, len(shape)))
    if rng.random() < 0.5:
        return [_f(rng, *shape)], {"axis": axis}, 3
    inner = shape[axis:]
    args = {"axis": axis, "elementwise_affine": 1}
    return [_f(rng, *shape), _f(rng, *inner), _f(rng, *inner)], args, 3


def dropout(rng):
    return [_f(rng, *_shape(rng))], {"is_test": 1, "ratio": float(rng.uniform(0, 0.9))}, 1 + int(rng.random() < 0.5)


def prelu(rng):
    nhwc = rng.random() < 0.4
    xs = _image(rng, nhwc, 2)
    c = xs[-1] if nhwc else xs[1]
    return [_f(rng, *xs), _f(rng, c if rng.random() < 0.7 else 1)], {"order": "NHWC" if nhwc else "NCHW"}, 1


def channel_shuffle(rng):
    nhwc = rng.random() < 0.4
    g = int(rng.integers(1, 4))
    xs = _image(rng, nhwc, 2, c=g * int(rng.integers(1, 4)))
    return [_f(rng, *xs)], {"group": g, "order": "NHWC" if nhwc else "NCHW"}, 1


def pad_image(rng):
    nhwc = rng.random() < 0.4
    xs = _image(rng, nhwc, 2)
    mode = str(rng.choice(["constant", "reflect", "edge"]))
    args = {"order": "NHWC" if nhwc else "NCHW", "mode": mode, "pads": rng.integers(0, 3, size=4).tolist()}
    if mode == "constant":
        args["value"] = float(rng.uniform(-1, 1))
    return [_f(rng, *xs)], args, 1


def resize_nearest(rng):
    nhwc = rng.random() < 0.4
    xs = _image(rng, nhwc, 2)
    args = {"order": "NHWC" if nhwc else "NCHW"}
    args.update(height_scale=float(rng.choice([0.5, 1.0, 2.0, 3.0])), width_scale=float(rng.choice([0.5, 1.0, 2.0])))
    return [_f(rng, *xs)], args, 1


def upsample_bilinear(rng):
    xs = _image(rng, False, 2)
    return [_f(rng, *xs)], {"height_scale": float(rng.choice([1.0, 2.0, 3.0])), "width_scale": 2.0}, 1


def reshape(rng):
    shape = _shape(rng, 1, 4)
    n = int(np.prod(shape))
    new = [n] if rng.random() < 0.3 else [-1, shape[-1]]
    return [_f(rng, *shape)], {"shape": new}, 2


def flatten(rng):
    shape = _shape(rng, 2, 4)
    return [_f(rng, *shape)], {"axis": int(rng.integers(0, len(shape) + 1))}, 1


def transpose(rng):
    shape = _shape(rng, 1, 4)
    args = {"axes": rng.permutation(len(shape)).tolist()} if rng.random() < 0.7 else {}
    return [_f(rng, *shape)], args, 1


def layout(rng):
    return [_f(rng, *_image(rng, False, int(rng.integers(1, 3))))], {}, 1


def concat(rng):
    shape = list(_shape(rng, 1, 4))
    axis = int(rng.integers(0, len(shape)))
    add_axis = rng.random() < 0.3
    ins = []
    for _ in range(int(rng.integers(1, 4))):
        s = list(shape)
        if not add_axis:
            s[axis] = int(rng.integers(1, 4))
        ins.append(_f(rng, *s))
    return ins, {"axis": axis, "add_axis": int(add_axis)}, 2


def split(rng):
    shape = list(_shape(rng, 1, 4, lo=2))
    axis = int(rng.integers(0, len(shape)))
    if rng.random() < 0.5:
        k = int(rng.integers(1, 3))
        shape[axis] = k * int(rng.integers(1, 3))
        return [_f(rng, *shape)], {"axis": axis}, k
    parts = [int(rng.integers(0, 3)) for _ in range(int(rng.integers(1, 4)))]
    shape[axis] = sum(parts)
    return [_f(rng, *shape)], {"axis": axis, "split": parts}, len(parts)


def squeeze(rng):
    shape = list(_shape(rng, 1, 3))
    dims = sorted(rng.choice(len(shape) + 1, size=int(rng.integers(1, 3)), replace=False).tolist())
    for d in dims:
        shape.insert(d, 1)
    return [_f(rng, *shape)], {"dims": dims}, 1


def expand_dims(rng):
    shape = _shape(rng, 1, 3)
    dims = sorted(rng.choice(len(shape) + 1, size=int(rng.integers(1, 3)), replace=False).tolist())
    return [_f(rng, *shape)], {"dims": dims}, 1


def slice_op(rng):
    shape = _shape(rng, 1, 3, lo=2, hi=6)
    starts, ends = [], []
    for d in shape:
        s = int(rng.integers(0, d))
        starts.append(s)
        ends.append(-1 if rng.random() < 0.3 else int(rng.integers(s, d + 1)))
    return [_f(rng, *shape)], {"starts": starts, "ends": ends}, 1


def gather(rng):
    shape = _shape(rng, 1, 3)
    idx = rng.integers(0, shape[0], size=_shape(rng, 1, 2)).astype(np.int64)
    return [_f(rng, *shape), idx], {}, 1


def tile(rng):
    shape = _shape(rng, 1, 3)
    return [_f(rng, *shape)], {"tiles": int(rng.integers(1, 4)), "axis": int(rng.integers(0, len(shape)))}, 1


def shape_op(rng):
    shape = _shape(rng, 1, 4)
    args = {"axes": [int(rng.integers(0, len(shape)))]} if rng.random() < 0.5 else {}
    return [_f(rng, *shape)], args, 1


def cast(rng):
    to = int(rng.choice([1, 2, 10, 13, 5]))
    return [_f(rng, *_shape(rng), lo=-5, hi=5)], {"to": to}, 1


def matmul(rng):
    m, k, n = (int(d) for d in rng.integers(1, 5, size=3))
    ta, tb = int(rng.integers(0, 2)), int(rng.integers(0, 2))
    a = _f(rng, *((k, m) if ta else (m, k)))
    b = _f(rng, *((n, k) if tb else (k, n)))
    return [a, b], {"trans_a": ta, "trans_b": tb}, 1


def batch_matmul(rng):
    batch = _shape(rng, 1, 2)
    m, k, n = (int(d) for d in rng.integers(1, 5, size=3))
    ta, tb = int(rng.integers(0, 2)), int(rng.integers(0, 2))
    a = _f(rng, *batch, *((k, m) if ta else (m, k)))
    b = _f(rng, *batch, *((n, k) if tb else (k, n)))
    return [a, b], {"trans_a": ta, "trans_b": tb}, 1


def where(rng):
    shape = _shape(rng, 1, 3)
    if rng.random() < 0.4 and len(shape) > 1:
        return [rng.random(shape[0]) < 0.5, _f(rng, *shape), _f(rng, *shape)], {"broadcast_on_rows": 1}, 1
    return [rng.random(shape) < 0.5, _f(rng, *shape), _f(rng, *shape)], {}, 1


def fills(kind):
    def gen(rng):
        shape = _shape(rng, 1, 3)
        if kind == "GivenTensorFill":
            return [], {"shape": list(shape), "values": _f(rng, int(np.prod(shape))).tolist()}, 1
        if kind == "GivenTensorIntFill":
            return [], {"shape": list(shape), "values": rng.integers(-5, 5, int(np.prod(shape))).tolist()}, 1
        if kind == "ConstantFill":
            return [], {"shape": list(shape), "value": float(rng.uniform(-3, 3))}, 1
        return [], {"shape": list(shape)}, 1

    return gen


CASES = {
    **{t: unary() for t in ("Abs", "Exp", "Negative", "Sigmoid", "Tanh", "Relu", "Sin", "Cos", "Sign", "Softsign")},
    **{t: unary() for t in ("Softplus", "Copy", "Alias", "StopGradient", "EnsureCPUOutput", "Sqr", "Swish", "Gelu")},
    **{t: unary(pos=True) for t in ("Log", "Sqrt", "Reciprocal", "Rsqrt")},
    "Not": lambda rng: ([rng.random(_shape(rng)) < 0.5], {}, 1),
    "Elu": with_args(alpha=(0.1, 2)),
    "LeakyRelu": with_args(alpha=(0.001, 0.5)),
    "HardSigmoid": with_args(alpha=(0.1, 0.5), beta=(0.2, 0.7)),
    "Selu": with_args(alpha=(1, 2), scale=(1, 1.2)),
    "Scale": with_args(scale=(-3, 3)),
    "Clip": clip,
    **{t: binary() for t in ("Add", "Sub", "Mul", "Div")},
    **{t: binary("cmp") for t in ("EQ", "NE", "LT", "LE", "GT", "GE")},
    **{t: binary("b") for t in ("And", "Or", "Xor")},
    "Pow": pow_op,
    **{t: nary for t in ("Sum", "Mean", "Max", "Min")},
    **{t: reduce_op for t in ("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin")},
    **{f"Reduce{a}{b}": front_back for a in ("Front", "Back") for b in ("Sum", "Mean", "Max")},
    "SumElements": elements,
    "SumSqrElements": elements,
    "RowwiseMax": matrix,
    "ColwiseMax": matrix,
    "ArgMax": arg_max,
    "ArgMin": arg_max,
    "DotProduct": pair_rows,
    "SquaredL2Distance": pair_rows,
    "L1Distance": pair_rows,
    "AveragedLoss": unary(),
    "Conv": conv,
    "ConvTranspose": conv_transpose,
    "MaxPool": pool("MaxPool"),
    "AveragePool": pool("AveragePool"),
    "LpPool": pool("LpPool"),
    "FC": fc,
    "FCTransposed": lambda rng: fc(rng, True),
    "Softmax": softmax,
    "LogSoftmax": softmax,
    "SpatialBN": spatial_bn,
    "LRN": lrn,
    "InstanceNorm": instance_norm,
    "LayerNorm": layer_norm,
    "Dropout": dropout,
    "PRelu": prelu,
    "ChannelShuffle": channel_shuffle,
    "PadImage": pad_image,
    "ResizeNearest": resize_nearest,
    "UpsampleBilinear": upsample_bilinear,
    "Reshape": reshape,
    "Flatten": flatten,
    "FlattenToVec": unary(),
    "ResizeLike": lambda rng: ([_f(rng, 2, 6), _f(rng, 3, 4)], {}, 1),
    "Transpose": transpose,
    "NCHW2NHWC": layout,
    "NHWC2NCHW": layout,
    "Concat": concat,
    "Split": split,
    "Squeeze": squeeze,
    "ExpandDims": expand_dims,
    "Slice": slice_op,
    "Gather": gather,
    "Tile": tile,
    "Shape": shape_op,
    "Size": unary(),
    "Cast": cast,
    "MatMul": matmul,
    "BatchMatMul": batch_matmul,
    "Where": where,
    "GivenTensorFill": fills("GivenTensorFill"),
    "GivenTensorIntFill": fills("GivenTensorIntFill"),
    "ConstantFill": fills("ConstantFill"),
    "RangeFill": fills("RangeFill"),
}

# Spellings sharing a converter with a type above (same kernels): tested through it.
ALIASES = {
    "Conv1D": "Conv", "Conv2D": "Conv", "Conv3D": "Conv", "MaxPool1D": "MaxPool", "MaxPool2D": "MaxPool",
    "MaxPool3D": "MaxPool", "AveragePool1D": "AveragePool", "AveragePool2D": "AveragePool",
    "AveragePool3D": "AveragePool", "LpPool1D": "LpPool", "LpPool2D": "LpPool", "LpPool3D": "LpPool",
    "EnsureDense": "Copy", "CopyCPUToGPU": "Copy", "CopyGPUToCPU": "Copy", "CopyFromCPUInput": "Copy",
    "GivenTensorDoubleFill": "GivenTensorFill", "GivenTensorInt64Fill": "GivenTensorIntFill",
    "GivenTensorBoolFill": "GivenTensorIntFill", "DiagonalFill": "ConstantFill",
}  # fmt: skip
