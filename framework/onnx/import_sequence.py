"""ONNX -> our ops: sequences (Sequence*, SplitToSequence, ConcatFromSequence) and optionals
(Optional, OptionalHasElement, OptionalGetElement) onto framework/ops/onnx/{sequence,optional}.py.
Sequence and optional values live in blobs as TensorSequence / OptionalValue objects."""

from __future__ import annotations

from framework.onnx.importer import INTS, TRANSLATORS, ImportContext, Node, Unsupported, translator


def _present(node: Node) -> list[str]:
    ins = list(node.inputs)
    while ins and not ins[-1]:
        ins.pop()
    return ins


@translator("SequenceEmpty", opsets=(11, 10_000))
def _sequence_empty(ctx: ImportContext, node: Node) -> None:
    ctx.op("ONNXSequenceEmpty", [], node.outputs[:1], dtype=int(node.attr("dtype", 1)))


@translator("SequenceConstruct", opsets=(11, 10_000))
def _sequence_construct(ctx: ImportContext, node: Node) -> None:
    ctx.op("ONNXSequenceConstruct", node.inputs, node.outputs[:1])


@translator("SequenceInsert", opsets=(11, 10_000))
def _sequence_insert(ctx: ImportContext, node: Node) -> None:
    ctx.require(node, INTS, [2])
    ctx.op("ONNXSequenceInsert", _present(node), node.outputs[:1])


@translator("SequenceErase", opsets=(11, 10_000))
def _sequence_erase(ctx: ImportContext, node: Node) -> None:
    ctx.require(node, INTS, [1])
    ctx.op("ONNXSequenceErase", _present(node), node.outputs[:1])


@translator("SequenceAt", opsets=(11, 10_000))
def _sequence_at(ctx: ImportContext, node: Node) -> None:
    ctx.require(node, INTS, [1])
    ctx.op("ONNXSequenceAt", node.inputs, node.outputs[:1])


@translator("SequenceLength", opsets=(11, 10_000))
def _sequence_length(ctx: ImportContext, node: Node) -> None:
    ctx.op("ONNXSequenceLength", node.inputs, node.outputs[:1])


@translator("SplitToSequence", opsets=(11, 10_000))
def _split_to_sequence(ctx: ImportContext, node: Node) -> None:
    ctx.require(node, INTS, [1])
    args = {"axis": int(node.attr("axis", 0)), "keepdims": int(node.attr("keepdims", 1))}
    ctx.op("ONNXSplitToSequence", _present(node), node.outputs[:1], **args)


@translator("ConcatFromSequence", opsets=(11, 10_000))
def _concat_from_sequence(ctx: ImportContext, node: Node) -> None:
    args = {"axis": int(node.attr("axis")), "new_axis": int(node.attr("new_axis", 0))}
    ctx.op("ONNXConcatFromSequence", node.inputs, node.outputs[:1], **args)


@translator("Optional", opsets=(15, 10_000))
def _optional(ctx: ImportContext, node: Node) -> None:
    ctx.op("ONNXOptional", _present(node), node.outputs[:1])


@translator("OptionalHasElement", opsets=(15, 10_000))
def _optional_has_element(ctx: ImportContext, node: Node) -> None:
    ctx.op("ONNXOptionalHasElement", _present(node), node.outputs[:1])


@translator("OptionalGetElement", opsets=(15, 10_000))
def _optional_get_element(ctx: ImportContext, node: Node) -> None:
    ctx.op("ONNXOptionalGetElement", node.inputs, node.outputs[:1])


from framework.onnx import import_elementwise  # noqa: E402,F401  (registers the tensor Identity first)

_TENSOR_IDENTITY = TRANSLATORS.get("Identity")  # the tensor translator, wrapped below


@translator("Identity", opsets=_TENSOR_IDENTITY[1] if _TENSOR_IDENTITY else (1, 10_000))
def _identity(ctx: ImportContext, node: Node) -> None:
    """Identity of a sequence or an optional (no tensor type known): ONNXCopyValue; of a tensor:
    the tensor translator."""
    name = node.input(0)
    if name not in ctx.types and name not in ctx.values:
        ctx.op("ONNXCopyValue", [name], node.outputs[:1])
        return
    if _TENSOR_IDENTITY is None:
        raise Unsupported("no tensor Identity translator")
    _TENSOR_IDENTITY[0](ctx, node)
