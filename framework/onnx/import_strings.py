"""ONNX -> our ops: the string ops (framework/ops/onnx/strings.py)."""

from __future__ import annotations

from framework.onnx.import_elementwise import typed_inputs
from framework.onnx.importer import ImportContext, Node, Unsupported, translator


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


@translator("TfIdfVectorizer")
def _tfidf(ctx: ImportContext, node: Node) -> None:
    x = ctx.dtype(node.input(0))
    if x is None or not (x.kind == "O" or x.name in ("int32", "int64")):
        raise Unsupported(f"input of type {x}")
    args = {k: node.attr(k) for k in ("max_gram_length", "min_gram_length", "max_skip_count", "mode")}
    if any(v is None for v in args.values()) or not node.attr("ngram_counts") or not node.attr("ngram_indexes"):
        raise Unsupported("a required attribute is missing")
    args.update({k: list(node.attr(k, [])) for k in ("ngram_counts", "ngram_indexes", "pool_int64s", "weights")})
    args["pool_strings"] = [s.decode() if isinstance(s, bytes) else s for s in node.attr("pool_strings", [])]
    ctx.op("ONNXTfIdfVectorizer", [node.input(0)], [node.outputs[0]], **{k: v for k, v in args.items() if v != []})
