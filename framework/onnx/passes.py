"""Clean-ups on the exported node list: Caffe2 names for the outputs, cancelled Transpose pairs,
unused initializers dropped."""

from __future__ import annotations

from typing import Iterable

from framework.onnx.context import ExportContext


def _rename_everywhere(ctx: ExportContext, mapping: dict[str, str]) -> None:
    for node in ctx.nodes:
        for seq in (node.input, node.output):
            for i, n in enumerate(seq):
                if n in mapping:
                    seq[i] = mapping[n]
    ctx.initializers = {mapping.get(k, k): v for k, v in ctx.initializers.items()}


def rename_outputs(ctx: ExportContext, blobs: Iterable[str], graph_inputs: set[str]) -> list[str]:
    """ONNX names of the outputs ``blobs``: each blob's last version, renamed to the blob's own name
    where that name is free to take (an in-place write of a graph input keeps its SSA name)."""
    names = []
    for blob in blobs:
        final = ctx.read(blob)
        if final in graph_inputs or final in ctx.initializers or final in names:
            final = ctx.node("Identity", [final], [ctx.fresh(blob + "_out")])[0]
        if final != blob and blob not in graph_inputs and blob not in names:
            old = ctx.fresh(blob + "__v0")
            _rename_everywhere(ctx, {blob: old, final: blob})
            for b, n in ctx.current.items():
                ctx.current[b] = {blob: old, final: blob}.get(n, n)
            final = blob
        names.append(final)
    return names


def _consumers(ctx: ExportContext) -> dict[str, list]:
    out: dict[str, list] = {}
    for node in ctx.nodes:
        for n in node.input:
            out.setdefault(n, []).append(node)
    return out


def cancel_transposes(ctx: ExportContext, protected: set[str]) -> None:
    """Remove Transpose(Transpose(x, p1), p2) when the composition is the identity."""
    changed = True
    while changed:
        changed = False
        producer = {o: n for n in ctx.nodes for o in n.output}
        for t2 in ctx.nodes:
            if t2.op_type != "Transpose" or t2.output[0] in protected:
                continue
            t1 = producer.get(t2.input[0])
            if t1 is None or t1.op_type != "Transpose":
                continue
            p1 = list(t1.attribute[0].ints)
            p2 = list(t2.attribute[0].ints)
            if [p1[j] for j in p2] != list(range(len(p2))):
                continue
            _rename_everywhere_inputs(ctx, t2.output[0], t1.input[0])
            ctx.nodes.remove(t2)
            if t1.output[0] not in protected and not _consumers(ctx).get(t1.output[0]):
                ctx.nodes.remove(t1)
            changed = True
            break


def _rename_everywhere_inputs(ctx: ExportContext, old: str, new: str) -> None:
    for node in ctx.nodes:
        for i, n in enumerate(node.input):
            if n == old:
                node.input[i] = new


def drop_unused_initializers(ctx: ExportContext, protected: set[str]) -> None:
    used = {n for node in ctx.nodes for n in node.input} | protected
    ctx.initializers = {k: v for k, v in ctx.initializers.items() if k in used}
