"""ONNX -> our ops: the transformer ops of ONNX's newer opsets (Attention, RotaryEmbedding,
LinearAttention, CausalConvWithState, SwiGLU), onto the ``ONNX*`` ops of ``framework/ops/onnx``.

float16 inputs run in float16 (as ONNX's reference does); bfloat16 and other types numpy lacks
stay unsupported.
"""

from __future__ import annotations

import numpy as np

from framework.onnx.importer import FLOATS, ImportContext, Node, Unsupported, translator

F16 = np.dtype(np.float16)
FLOATS16 = FLOATS + (F16,)
_PRECISIONS = (0, 1, 10, 11)


def outputs(ctx: ImportContext, node: Node, hint: str) -> list[str]:
    """The node's outputs up to its last requested one, absent ones given fresh names."""
    outs = list(node.outputs)
    while outs and not outs[-1]:
        outs.pop()
    return [o or ctx.fresh(hint) for o in outs]


def _require_floats(ctx: ImportContext, node: Node, inputs: list[int]) -> None:
    """Unsupported unless the given inputs are float16/32/64 or bfloat16 (ml_dtypes)."""
    for i in inputs:
        n = node.input(i)
        dt = ctx.dtype(n) if n else None
        if n and (dt is None or (dt not in FLOATS16 and dt.name != "bfloat16")):
            raise Unsupported(f"input '{n}' of type {dt} (supported: float16/32/64, bfloat16)")


@translator("Attention", opsets=(23, 10_000))
def _attention(ctx: ImportContext, node: Node) -> None:
    _require_floats(ctx, node, [0, 1, 2, 4, 5])
    mask, past, nonpad = node.input(3), node.input(4), node.input(6)
    ins = list(node.inputs[:3])
    args = {}
    if mask:
        dt = ctx.dtype(mask)
        if dt is None or (dt != np.dtype(bool) and dt not in FLOATS16 and dt.name != "bfloat16"):
            raise Unsupported(f"attn_mask of type {dt}")
        ins.append(mask)
        args["has_attn_mask"] = 1
    if past:
        if not node.input(5):
            raise Unsupported("past_key without past_value")
        ins += [past, node.input(5)]
        args["has_past"] = 1
    if nonpad:
        ins.append(nonpad)
        args["has_nonpad_kv_seqlen"] = 1
    prec = int(node.attr("softmax_precision", 0))
    if prec not in _PRECISIONS:
        raise Unsupported(f"softmax_precision {prec}")
    for name in (
        "is_causal",
        "q_num_heads",
        "kv_num_heads",
        "qk_matmul_output_mode",
        "left_window_size",
        "right_window_size",
    ):
        if node.attr(name) is not None:
            args[name] = int(node.attr(name))
    for name in ("scale", "softcap"):
        if node.attr(name) is not None:
            args[name] = float(node.attr(name))
    ctx.op("ONNXAttention", ins, outputs(ctx, node, "attention_unused"), softmax_precision=prec, **args)


@translator("RotaryEmbedding", opsets=(23, 10_000))
def _rotary(ctx: ImportContext, node: Node) -> None:
    ctx.require(node, FLOATS16, [0, 1, 2])
    args = {
        k: int(node.attr(k)) for k in ("interleaved", "rotary_embedding_dim", "num_heads") if node.attr(k) is not None
    }
    ctx.op("ONNXRotaryEmbedding", [n for n in node.inputs[:4] if n], [node.outputs[0]], **args)


@translator("SwiGLU", opsets=(28, 10_000))
def _swiglu(ctx: ImportContext, node: Node) -> None:
    ctx.require(node, FLOATS16)
    a, b = ctx.shape(node.input(0)), ctx.shape(node.input(1))
    if a is None or a != b or ctx.dtype(node.input(0)) != ctx.dtype(node.input(1)):
        raise Unsupported("inputs of different (or unknown) shapes or types")
    ctx.op("ONNXSwiGLU", node.inputs[:2], [node.outputs[0]], alpha=float(node.attr("alpha", 1.0)))


@translator("CausalConvWithState", opsets=(27, 10_000))
def _causal_conv(ctx: ImportContext, node: Node) -> None:
    ctx.require(node, FLOATS16)
    act = node.attr("activation", "none")
    if act not in ("none", "silu", "swish"):
        raise Unsupported(f"activation {act}")
    ins = list(node.inputs[:2])
    args = {"activation": act}
    if node.input(2):
        ins.append(node.input(2))
        args["has_bias"] = 1
    if node.input(3):
        ins.append(node.input(3))
        args["has_past_state"] = 1
    ctx.op("ONNXCausalConvWithState", ins, outputs(ctx, node, "conv_state_unused"), **args)


@translator("LinearAttention", opsets=(27, 10_000))
def _linear_attention(ctx: ImportContext, node: Node) -> None:
    ctx.require(node, FLOATS16)
    rule = node.attr("update_rule", "gated_delta")
    if rule not in ("linear", "gated", "delta", "gated_delta"):
        raise Unsupported(f"update_rule {rule}")
    gated, delta = rule in ("gated", "gated_delta"), "delta" in rule
    if bool(node.input(4)) != gated or bool(node.input(5)) != delta:
        raise Unsupported(f"decay/beta inputs that do not match update_rule {rule}")
    if node.attr("q_num_heads") is None or node.attr("kv_num_heads") is None:
        raise Unsupported("q_num_heads/kv_num_heads missing")
    ins = list(node.inputs[:3]) + [n for n in (node.input(3), node.input(4), node.input(5)) if n]
    args = {"q_num_heads": int(node.attr("q_num_heads")), "kv_num_heads": int(node.attr("kv_num_heads"))}
    if node.attr("scale") is not None:
        args["scale"] = float(node.attr("scale"))
    ctx.op(
        "ONNXLinearAttention",
        ins,
        outputs(ctx, node, "linear_attention_unused"),
        update_rule=rule,
        has_past_state=int(bool(node.input(3))),
        **args,
    )


@translator("FlexAttention", domain="ai.onnx.preview")
def _flex_attention(ctx: ImportContext, node: Node) -> None:
    """FlexAttention (float32/float64): the scaled scores Q K^T of ONNXAttention (its
    qk_matmul_output, GQA by repeated KV heads), the ``score_mod`` subgraph's nodes inlined on them,
    Softmax over the keys, the ``prob_mod`` subgraph inlined, then the product with V. Without
    mods this is ONNXAttention itself. float16: the scores in float16 (as the reference), then the
    mods, the softmax and the product with V in float32, cast back. (FlexAttention takes
    sqrt(scale) in float32; ONNXAttention in float64, then the input's type.)"""
    ctx.require(node, FLOATS16)
    if node.attr("softmax_precision") is not None:
        raise Unsupported("softmax_precision")
    shapes = [ctx.shape(n) for n in node.inputs[:3]]
    if any(sh is None or len(sh) != 4 for sh in shapes):
        raise Unsupported("inputs of unknown shapes or of rank other than 4")
    args = {"scale": float(node.attr("scale"))} if node.attr("scale") is not None else {}
    score_mod, prob_mod = node.attr("score_mod"), node.attr("prob_mod")
    dt = ctx.dtype(node.input(0))
    if score_mod is None and prob_mod is None and dt != F16:
        ctx.op("ONNXAttention", node.inputs[:3], [node.outputs[0]], **args)
        return
    (b, hq, lq, _), (_, hkv, s, _), _ = shapes
    if hq != hkv:
        raise Unsupported("score_mod/prob_mod or float16 with grouped KV heads")
    scores = ctx.fresh("flex_scores")
    unused = [ctx.fresh("flex_unused") for _ in range(3)]
    ctx.op("ONNXAttention", node.inputs[:3], unused + [scores], qk_matmul_output_mode=0, **args)
    ctx.types[scores], ctx.shapes[scores] = dt, (b, hq, lq, s)
    v, out = node.input(2), node.outputs[0]
    if dt == F16:  # float16 scores, the rest in float32
        s32, v32, out = ctx.fresh("flex_scores32"), ctx.fresh("flex_v32"), ctx.fresh("flex_out32")
        ctx.op("Cast", [scores], [s32], to=1)
        ctx.op("Cast", [v], [v32], to=1)
        scores, v, dt = s32, v32, np.dtype(np.float32)
        ctx.types[scores], ctx.shapes[scores] = dt, (b, hq, lq, s)
    if score_mod is not None:
        scores = _inline_graph(ctx, score_mod, scores, "score_mod")
    probs = ctx.fresh("flex_probs")
    ctx.op("Softmax", [scores], [probs], axis=3)
    ctx.types[probs], ctx.shapes[probs] = dt, (b, hq, lq, s)
    if prob_mod is not None:
        probs = _inline_graph(ctx, prob_mod, probs, "prob_mod")
    ctx.op("BatchMatMul", [probs, v], [out], broadcast=1)
    if out != node.outputs[0]:
        ctx.op("Cast", [out], [node.outputs[0]], to=12)


def _inline_graph(ctx: ImportContext, graph: object, x: str, label: str) -> str:
    """The one-input one-output ``graph``'s nodes translated inline on ``x`` (its names prefixed);
    returns the output's name. The result must keep x's shape and type."""
    from onnx import GraphProto, numpy_helper

    from framework.onnx.importer import NeedsRuntime, translate_nodes

    if len(graph.input) != 1 or len(graph.output) != 1:
        raise Unsupported(f"{label} with {len(graph.input)} inputs and {len(graph.output)} outputs")
    prefix = ctx.fresh(label) + "/"
    local = {v.name for v in graph.input} | {t.name for t in graph.initializer}
    local |= {o for n in graph.node for o in n.output}
    g = GraphProto()
    g.CopyFrom(graph)
    for n in g.node:
        if any(a.type in (a.GRAPH, a.GRAPHS) for a in n.attribute):
            raise Unsupported(f"{label} with nested subgraphs")
        for j, name in enumerate(n.input):
            n.input[j] = prefix + name if name in local else name
        for j, name in enumerate(n.output):
            n.output[j] = prefix + name if name in local else name
    for t in graph.initializer:
        ctx.values[prefix + t.name] = numpy_helper.to_array(t)
    sub_in, out = prefix + graph.input[0].name, prefix + graph.output[0].name
    ctx.op("Copy", [x], [sub_in])
    ctx.types[sub_in], ctx.shapes[sub_in] = ctx.types[x], ctx.shapes[x]
    unsupported = translate_nodes(ctx, g.node, f"{label}: ")
    if unsupported:
        exc = NeedsRuntime if all("needs run-time values" in u for u in unsupported) else Unsupported
        raise exc("; ".join(unsupported))
    if out in ctx.values:  # folded to a constant: materialize it
        raise Unsupported(f"{label} output does not depend on its input")
    if ctx.types.get(out) != ctx.types[x] or ctx.shapes.get(out) != ctx.shapes[x]:
        raise Unsupported(f"{label} changes the shape or type ({ctx.shapes.get(out)}, {ctx.types.get(out)})")
    return out
