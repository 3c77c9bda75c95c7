"""Inference rewrite: a squeeze-excitation block becomes one SqueezeExcite op (framework/ops/nn/squeeze_excite.py).

MobileNetV3, EfficientNet and their kin scale a block's channels by a gate computed from the block itself:

    s = AveragePool(X, global_pooling=1)
    h = Conv(s, W1, b1)            1x1, maybe with its activation fused (ConvFusion: Relu, Relu6, Swish, HardSwish)
    c = Conv(h, W2, b2)            1x1
    g = Sigmoid(c) or HardSigmoid(c, alpha, beta)
    Y = Mul(X, g) (either order; numpy broadcasting over the spatial positions)

Five ops, three of them on a single pixel, cost more in dispatch than in sums; SqueezeExcite(X, W1, b1, W2, b2)
does the same in one op at the Mul's place. Rewritten where s, h, c and g are read by the next op of the chain
alone and none of them is observable, X is not written between the pooling and the Mul, the filters and
biases are constants of the workspace with the shapes of 1x1 convs from X's C channels to R and back
((R, C, 1, 1), (R,), (C, R, 1, 1), (C,)), and the convs have group 1 and no padding. Results equal the five
ops' within float32 rounding.
"""

from __future__ import annotations

from framework.net.optimize import _arg, _Net, _producer
from framework.proto.framework_pb2 import OperatorDef

_PADS = ("pad", "pad_t", "pad_l", "pad_b", "pad_r")


def _one_by_one(op: OperatorDef, net: _Net):
    """(W, b) constants of a 1x1 conv with group 1, no padding and a bias, NCHW, or None."""
    if len(op.input) != 3 or len(op.output) != 1 or str(_arg(op, "order", "NCHW")).upper() != "NCHW":
        return None
    if _arg(op, "group", 1) != 1 or any(_arg(op, p, 0) for p in _PADS) or any(_arg(op, "pads", []) or []):
        return None
    if _arg(op, "out_channels", 0) or _arg(op, "out_channel_offset", 0):
        return None
    w, b = net.constant(op.input[1]), net.constant(op.input[2])
    if w is None or b is None or w.ndim != 4 or w.shape[2:] != (1, 1) or b.shape != (w.shape[0],):
        return None
    return w, b


def _reduce_activation(op: OperatorDef) -> str | None:
    """The activation the reducing conv applies: 'identity', 'Relu', 'Relu6', 'Swish', 'HardSwish'; None if
    the op is no such conv."""
    if op.type == "Conv":
        return "identity" if str(_arg(op, "activation", "identity")) == "identity" else None
    if op.type != "ConvFusion":
        return None
    kind = _arg(op, "fusion_type", 0)
    if kind == 1:
        return "Relu6" if _arg(op, "relu6", 0) else "Relu"
    act = str(_arg(op, "activation", "identity"))
    return act if kind == 0 and act in ("identity", "Swish", "HardSwish") else None


def _only_reader(net: _Net, i: int, j: int) -> bool:
    """Op ``i``'s single output is read by op ``j`` alone and is not observable."""
    out = net.ops[i].output
    return len(out) == 1 and net.readers(i, out[0]) == [j] and out[0] not in net.observable


def _fuse_at(net: _Net, j: int) -> int | None:
    """Rewrite the block ending at the Mul ``j``; the index of the SqueezeExcite op, or None."""
    mul = net.ops[j]
    if mul.type != "Mul" or len(mul.input) != 2 or len(mul.output) != 1 or _arg(mul, "broadcast", 0):
        return None
    for k in (0, 1):
        x, g = mul.input[k], mul.input[1 - k]
        gi = _producer(net, j, g)
        if gi is None or net.ops[gi].type not in ("Sigmoid", "HardSigmoid") or len(net.ops[gi].input) != 1:
            continue
        gate = net.ops[gi]
        c2 = _producer(net, gi, gate.input[0])
        if c2 is None or net.ops[c2].type != "Conv" or _reduce_activation(net.ops[c2]) != "identity":
            continue
        c1 = _producer(net, c2, net.ops[c2].input[0])
        act = _reduce_activation(net.ops[c1]) if c1 is not None else None
        if c1 is None or act is None:
            continue
        pi = _producer(net, c1, net.ops[c1].input[0])
        if pi is None:
            continue
        pool = net.ops[pi]
        if pool.type != "AveragePool" or list(pool.input) != [x] or not _arg(pool, "global_pooling", 0):
            continue
        if str(_arg(pool, "order", "NCHW")).upper() != "NCHW" or net.written_between(x, pi, j):
            continue
        if not all(_only_reader(net, a, b) for a, b in ((pi, c1), (c1, c2), (c2, gi), (gi, j))):
            continue
        first, second = _one_by_one(net.ops[c1], net), _one_by_one(net.ops[c2], net)
        if first is None or second is None:
            continue
        (w1, _), (w2, _) = first, second
        if w2.shape[:2] != (w1.shape[1], w1.shape[0]):
            continue
        fused = OperatorDef(
            type="SqueezeExcite",
            name=mul.name,
            input=[x, *net.ops[c1].input[1:], *net.ops[c2].input[1:]],
            output=list(mul.output),
        )
        for name, value in (("activation", act), ("gate", gate.type)):
            a = fused.arg.add()
            a.name, a.s = name, value.encode()
        if gate.type == "HardSigmoid":
            for name, default in (("alpha", 0.2), ("beta", 0.5)):
                a = fused.arg.add()
                a.name, a.f = name, float(_arg(gate, name, default))
        net.flow.replace(j, fused)
        for i in sorted((pi, c1, c2, gi), reverse=True):
            net.flow.delete(i)
        return j - 4
    return None


def fuse_squeeze_excite(net: _Net) -> int:
    """Apply the rewrite of the module doc; returns how many blocks became SqueezeExcite."""
    n, j = 0, 0
    while j < len(net.ops):
        at = _fuse_at(net, j)
        if at is not None:
            n += 1
            j = at
        j += 1
    return n
