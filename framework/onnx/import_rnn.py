"""ONNX -> our ops: RNN, GRU, LSTM onto ONNXRNN/ONNXGRU/ONNXLSTM (framework/ops/onnx/recurrent.py).

An absent optional input in the middle becomes an empty constant (the op's "absent" convention);
absent outputs get private names.
"""

from __future__ import annotations

import numpy as np

from framework.onnx.importer import FLOATS, INTS, ImportContext, Node, Unsupported, translator


@translator("RNN", "GRU", "LSTM", opsets=(7, 10_000))
def _recurrent(ctx: ImportContext, node: Node) -> None:
    ctx.require(node, FLOATS, [0, 1, 2, 3, 5, 6, 7])
    ctx.require(node, INTS, [4])
    n_in = 8 if node.op_type == "LSTM" else 6
    ins = [node.input(i) for i in range(n_in)]
    while ins and not ins[-1]:
        ins.pop()
    dt = ctx.dtype(node.input(0))
    for i, name in enumerate(ins):
        if not name:
            ins[i] = ctx.fresh(f"{node.op_type.lower()}_absent")
            ctx.values[ins[i]] = np.zeros(0, np.int32 if i == 4 else dt)
    outs = [o or ctx.fresh(f"{node.op_type.lower()}_unused") for o in node.outputs]
    if not outs:
        raise Unsupported("no outputs")
    args = {k: node.attr(k) for k in ("hidden_size", "direction", "activations", "activation_alpha",
                                       "activation_beta", "clip", "layout", "linear_before_reset",
                                       "input_forget")}  # fmt: skip
    if args["activations"] is not None:
        args["activations"] = [a.decode() if isinstance(a, bytes) else a for a in args["activations"]]
    if node.op_type != "GRU":
        args.pop("linear_before_reset")
    if node.op_type != "LSTM":
        args.pop("input_forget")
    ctx.op(f"ONNX{node.op_type}", ins, outs, **args)
