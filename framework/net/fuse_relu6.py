"""Inference rewrite: Relu6 (Clip min=0 max=6) and Relu after a convolution go into the conv's stores.

MobileNets follow every expand and depthwise conv with Relu6, exported by torch as Clip(0, 6) and written in
Caffe2 as Clip(min=0, max=6); MnasNet's depthwise convs are followed by Relu. A separate op is a full pass
over the conv's output; fused, the kernel applies it in the same stores (framework/kernels/conv_nchw.py,
ConvFusion's ``relu6``).

Rewrites (each where the Clip/Relu is the only reader of the conv's output, as framework/net/optimize.py's
``fuse_relu``; the result equals the unfused net's bit for bit: the conv's values are the same and
min(max(0, v), 6) is what Clip gives, NaN kept):

- Conv (NCHW, 2-D, constant 4-D filter, depthwise included) + Clip(0, 6) -> ConvFusion fusion_type 1, relu6 1;
- ConvFusion fusion_type 1 (Conv + Relu) + Clip(0, 6) -> the same with relu6 1;
- a depthwise Conv + Relu -> ConvFusion fusion_type 1 (``fuse_relu`` leaves depthwise convs out).
"""

from __future__ import annotations

from framework.net.optimize import _arg, _fusable_conv, _Net, _producer, _set_arg
from framework.proto.framework_pb2 import OperatorDef


def _is_relu6(op: OperatorDef) -> bool:
    return op.type == "Clip" and len(op.input) == 1 and _arg(op, "min", None) == 0.0 and _arg(op, "max", None) == 6.0


def _plain_conv(op: OperatorDef, net: _Net) -> bool:
    """A Conv ConvFusion can run: NCHW, a constant 4-D filter; depthwise ones included."""
    if op.type not in ("Conv", "Conv2D") or str(_arg(op, "order", "NCHW")).upper() != "NCHW":
        return False
    w = net.constant(op.input[1])
    return w is not None and w.ndim == 4


def fuse_relu6(net: _Net) -> int:
    """Apply the rewrites of the module doc; returns how many ops were removed."""
    n = 0
    j = 0
    while j < len(net.ops):
        op = net.ops[j]
        relu6 = _is_relu6(op)
        if not relu6 and not (op.type == "Relu" and len(op.input) == 1):
            j += 1
            continue
        x, z = op.input[0], op.output[0]
        i = _producer(net, j, x)
        if i is None or net.readers(i, x) != [j] or (x in net.observable and x != z):
            j += 1
            continue
        prod = net.ops[i]
        kind = _arg(prod, "fusion_type", 0) if prod.type == "ConvFusion" else None
        onto_fusion = relu6 and kind == 1 and not _arg(prod, "relu6", 0)
        onto_conv = kind is None and _plain_conv(prod, net) and (relu6 or not _fusable_conv(prod, net))
        clash = z != x and net.flow.touched_between((z,), i, j)
        if prod.output[0] != x or clash or not (onto_fusion or onto_conv):
            j += 1
            continue
        if not onto_fusion:
            prod.type = "ConvFusion"
            _set_arg(prod, "fusion_type", 1)
        if relu6:
            _set_arg(prod, "relu6", 1)
        with net.flow.edit(i):
            prod.output[0] = z
        net.flow.delete(j)
        n += 1
    return n
