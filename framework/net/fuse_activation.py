"""Inference rewrite: the activation after a convolution goes into the conv's stores.

MobileNets follow every expand and depthwise conv with Relu6 (torch exports it as Clip(0, 6), Caffe2 nets write
Clip(min=0, max=6)); MobileNetV3 with HardSwish (ONNX HardSwish, or in a Caffe2 net x * HardSigmoid(x) with
alpha 1/6, beta 1/2); EfficientNet with SiLU (Caffe2's Swish, or x * Sigmoid(x) as torch exports it); MnasNet's
depthwise convs with Relu. A separate op is a full pass over the conv's output (two for the Mul forms); fused,
the kernel applies it in the same stores (framework/kernels/conv_nchw.py; ConvFusion's ``relu6`` and
``activation``).

Rewrites, each where the activation's ops are the only readers of the conv's output and none of it is
observable, as framework/net/optimize.py's ``fuse_relu``:

- Conv (NCHW, 2-D, constant 4-D filter, depthwise included) + Clip(0, 6) -> ConvFusion fusion_type 1, relu6 1;
- ConvFusion fusion_type 1 (Conv + Relu) + Clip(0, 6) -> the same with relu6 1;
- a depthwise Conv + Relu -> ConvFusion fusion_type 1 (``fuse_relu`` leaves depthwise convs out);
- Conv + Swish / ONNXSwish (alpha 1) / Mul(y, Sigmoid(y)) -> ConvFusion fusion_type 0, activation 'Swish';
- Conv + ONNXHardSwish / Mul(y, HardSigmoid(y, alpha 1/6, beta 1/2)) -> activation 'HardSwish'.

Relu6 gives the unfused net's values exactly; Swish and HardSwish within float32 rounding (the kernels
evaluate the same formula with their own exp and operation order).
"""

from __future__ import annotations

from framework.net.optimize import _arg, _fusable_conv, _Net, _producer, _set_arg
from framework.proto.framework_pb2 import OperatorDef


def _is_relu6(op: OperatorDef) -> bool:
    return op.type == "Clip" and len(op.input) == 1 and _arg(op, "min", None) == 0.0 and _arg(op, "max", None) == 6.0


def _plain_conv(op: OperatorDef, net: _Net) -> bool:
    """A Conv ConvFusion can run: NCHW, a constant 4-D filter, no activation of its own; depthwise ones included."""
    if op.type not in ("Conv", "Conv2D") or str(_arg(op, "order", "NCHW")).upper() != "NCHW":
        return False
    if str(_arg(op, "activation", "identity")) != "identity":
        return False
    w = net.constant(op.input[1])
    return w is not None and w.ndim == 4


def _unary_activation(op: OperatorDef) -> str | None:
    """'Swish' / 'HardSwish' if ``op`` is one of them as a single op on one input."""
    if len(op.input) != 1 or len(op.output) != 1:
        return None
    if op.type == "Swish" or (op.type == "ONNXSwish" and abs(_arg(op, "alpha", 1.0) - 1.0) < 1e-7):
        return "Swish"
    return "HardSwish" if op.type == "ONNXHardSwish" else None


def _gate(op: OperatorDef) -> str | None:
    """'Swish' / 'HardSwish' if ``op`` is the gate g of y * g(y): Sigmoid, or HardSigmoid(alpha 1/6, beta 1/2)."""
    if len(op.input) != 1 or len(op.output) != 1:
        return None
    if op.type == "Sigmoid":
        return "Swish"
    if op.type == "HardSigmoid":
        alpha, beta = _arg(op, "alpha", 0.2), _arg(op, "beta", 0.5)
        return "HardSwish" if abs(alpha - 1 / 6) < 1e-7 and abs(beta - 0.5) < 1e-7 else None
    return None


def _plain_mul(op: OperatorDef) -> bool:
    return op.type == "Mul" and len(op.input) == 2 and not _arg(op, "broadcast", 0) and len(op.output) == 1


def _into_conv(net: _Net, i: int, drop: list[int], z: str, act: str | None, relu6: bool) -> None:
    """Conv ``i`` becomes ConvFusion writing ``z`` with ``act`` (or Relu(6)); the ops ``drop`` go."""
    prod = net.ops[i]
    if prod.type != "ConvFusion":
        prod.type = "ConvFusion"
        _set_arg(prod, "fusion_type", 0 if act else 1)
    if act:
        for old in [a for a in prod.arg if a.name == "activation"]:
            prod.arg.remove(old)
        a = prod.arg.add()
        a.name, a.s = "activation", act.encode()
    if relu6:
        _set_arg(prod, "relu6", 1)
    with net.flow.edit(i):
        prod.output[0] = z
    for j in sorted(drop, reverse=True):
        net.flow.delete(j)


def _fuse_clip_relu(net: _Net, j: int) -> bool:
    op = net.ops[j]
    relu6 = _is_relu6(op)
    if not relu6 and not (op.type == "Relu" and len(op.input) == 1):
        return False
    x, z = op.input[0], op.output[0]
    i = _producer(net, j, x)
    if i is None or net.readers(i, x) != [j] or (x in net.observable and x != z):
        return False
    prod = net.ops[i]
    kind = _arg(prod, "fusion_type", 0) if prod.type == "ConvFusion" else None
    onto_fusion = relu6 and kind == 1 and not _arg(prod, "relu6", 0)
    onto_conv = kind is None and _plain_conv(prod, net) and (relu6 or not _fusable_conv(prod, net))
    clash = z != x and net.flow.touched_between((z,), i, j)
    if prod.output[0] != x or clash or not (onto_fusion or onto_conv):
        return False
    _into_conv(net, i, [j], z, None, relu6)
    return True


def _fuse_swish(net: _Net, j: int) -> bool:
    """Op ``j`` is the last op of a Swish/HardSwish (the op itself, or the Mul of y * g(y)) after a Conv."""
    op = net.ops[j]
    act = _unary_activation(op)
    drop = [j]
    if act is None and _plain_mul(op) and op.input[0] != op.input[1]:
        for k in (0, 1):
            x, g = op.input[k], op.input[1 - k]
            gi = _producer(net, j, g)
            if gi is None or net.ops[gi].input[0] != x or net.readers(gi, g) != [j] or g in net.observable:
                continue
            act = _gate(net.ops[gi])
            if act is not None:
                drop = [gi, j]
                break
    if act is None:
        return False
    x = net.ops[drop[0]].input[0]
    z = op.output[0]
    i = _producer(net, drop[0], x)
    if i is None or sorted(net.readers(i, x)) != drop or x in net.observable or net.ops[i].output[0] != x:
        return False
    if not _plain_conv(net.ops[i], net) or (z != x and net.flow.touched_between((z,), i, j)):
        return False
    _into_conv(net, i, drop, z, act, False)
    return True


def fuse_activations(net: _Net) -> int:
    """Apply the rewrites of the module doc; returns how many activations were fused."""
    n = 0
    j = 0
    while j < len(net.ops):
        if _fuse_clip_relu(net, j) or _fuse_swish(net, j):
            n += 1
            j = 0 if j < 2 else j - 2  # the fused ops before j went: look again from a little earlier
            continue
        j += 1
    return n
