"""ONNX -> our ops: the string ops (framework/ops/onnx/strings.py)."""

from __future__ import annotations

from framework.onnx.import_elementwise import typed_inputs
from framework.onnx.importer import ImportContext, Node, translator


@translator("StringConcat")
def _concat(ctx: ImportContext, node: Node) -> None:
    typed_inputs(ctx, node, ("string",), node.inputs[:2])
    ctx.op("ONNXStringConcat", node.inputs[:2], [node.outputs[0]])


@translator("StringSplit")
def _split(ctx: ImportContext, node: Node) -> None:
    typed_inputs(ctx, node, ("string",), node.inputs[:1])
    outs = [o or ctx.fresh("split_unused") for o in node.outputs] + [ctx.fresh("split_unused")] * (
        2 - len(node.outputs)
    )
    args = {"delimiter": node.attr("delimiter", ""), "maxsplit": int(node.attr("maxsplit", -1))}
    ctx.op("ONNXStringSplit", node.inputs[:1], outs[:2], **args)


@translator("StringNormalizer")
def _normalizer(ctx: ImportContext, node: Node) -> None:
    typed_inputs(ctx, node, ("string",), node.inputs[:1])
    stop = [w.decode() if isinstance(w, bytes) else w for w in node.attr("stopwords", [])]
    args = {
        "case_change_action": node.attr("case_change_action", "NONE"),
        "is_case_sensitive": int(node.attr("is_case_sensitive", 0)),
        "stopwords": stop or None,
    }
    ctx.op("ONNXStringNormalizer", node.inputs[:1], [node.outputs[0]], **args)


@translator("RegexFullMatch")
def _regex(ctx: ImportContext, node: Node) -> None:
    typed_inputs(ctx, node, ("string",), node.inputs[:1])
    ctx.op("ONNXRegexFullMatch", node.inputs[:1], [node.outputs[0]], pattern=node.attr("pattern", ""))
