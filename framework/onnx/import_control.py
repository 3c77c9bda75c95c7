"""ONNX -> our ops: If, Loop, Scan and SequenceMap onto Caffe2's control ops.

A subgraph attribute becomes a nested NetDef translated in the same context (names are unique in
ONNX, so the subgraph sees every outer-scope name, and constants it folds become init-net blobs).
The nested nets run in the enclosing op's own workspace (``If``; ``ONNXWhile`` with
``disable_scopes=1``), so outer-scope blobs are visible there too.

- If -> If(cond) with then_net / else_net, each ending with ONNXCopyValue of its results onto
  the If's outputs (tensors, sequences or optionals).
- Loop -> ONNXWhile (max trip count, condition, loop-carried values; scan outputs stacked).
- Scan (opset 9+) -> ONNXWhile over the scan length: the body first Gathers element ``i`` (or
  ``len-1-i`` for reverse directions) of every scan input along its axis; reversed scan outputs
  are Gathered back, other scan output axes Transposed.
- SequenceMap -> ONNXWhile over the first sequence's length: SequenceAt of every sequence input,
  the body, SequenceInsert of each result into an output sequence carried by the loop.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from framework.onnx.importer import (
    ImportContext,
    NeedsRuntime,
    Node,
    Unsupported,
    translate_nodes,
    translator,
)
from framework.proto.framework_pb2 import NetDef, OperatorDef


def _op(op_type: str, inputs: Sequence[str], outputs: Sequence[str], **args: Any) -> OperatorDef:
    from framework.proto.args import make_argument

    op = OperatorDef(type=op_type, input=list(inputs), output=list(outputs))
    for k, v in args.items():
        op.arg.append(make_argument(k, v))
    return op


def subnet(
    ctx: ImportContext,
    graph: Any,
    label: str,
    ext_in: Sequence[str],
    ext_out: Sequence[str],
    prelude: Sequence[OperatorDef] = (),
    postlude: Sequence[OperatorDef] = (),
) -> NetDef:
    """``graph``'s nodes as a NetDef (after ``prelude``, before ``postlude``); Unsupported
    (NeedsRuntime when every reason is a run-time value) naming the subgraph's nodes."""
    from onnx import numpy_helper

    child = ImportContext(ctx.opset, ctx.types, ctx.shapes)
    child.values = ctx.values  # shared: the subgraph's folded constants become init-net blobs
    child.wanted = ctx.wanted
    child.opset_imports = getattr(ctx, "opset_imports", {})
    child._n = ctx._n
    for t in graph.initializer:
        ctx.values[t.name] = numpy_helper.to_array(t)
    for vi in graph.input:  # a subgraph input is never a constant, whatever an outer name says
        ctx.values.pop(vi.name, None)
    child.ops.extend(prelude)
    unsupported = translate_nodes(child, graph.node, f"{label}: ")
    ctx._n = child._n
    if unsupported:
        exc = NeedsRuntime if all("needs run-time values" in u for u in unsupported) else Unsupported
        raise exc("; ".join(unsupported))
    net = NetDef(name=label, op=list(child.ops) + list(postlude))
    net.external_input.extend(ext_in)
    net.external_output.extend(ext_out)
    return net


def _outputs(ctx: ImportContext, node: Node, n: int) -> list[str]:
    outs = list(node.outputs) + [""] * (n - len(node.outputs))
    return [o or ctx.fresh(f"{node.op_type.lower()}_unused") for o in outs]


def _const(ctx: ImportContext, value: np.ndarray, hint: str) -> str:
    name = ctx.fresh(hint)
    ctx.values[name] = value
    return name


def _inline_branch(ctx: ImportContext, node: Node, label: str) -> None:
    """An If whose condition is a constant: its taken branch's nodes join the outer graph (their
    shapes and constants then flow on, e.g. the dims a function body splits off a shape input)."""
    from onnx import numpy_helper

    g = node.attr(label)
    n_ops, known = len(ctx.ops), set(ctx.values)
    for t in g.initializer:
        ctx.values[t.name] = numpy_helper.to_array(t)
    bad = translate_nodes(ctx, list(g.node), f"If {label} (inlined): ")
    if bad:
        del ctx.ops[n_ops:]
        for k in set(ctx.values) - known:
            del ctx.values[k]
        needs = all("needs run-time values" in b for b in bad)
        raise (NeedsRuntime if needs else Unsupported)("; ".join(bad))
    for r, o in zip([v.name for v in g.output], node.outputs):
        if r in ctx.values:
            ctx.values[o] = ctx.values[r]
            continue
        if r == o:  # the branch already writes the If's output under its name
            continue
        ctx.op("ONNXCopyValue", [r], [o])
        if ctx.shape(r) is not None:
            ctx.shapes[o] = ctx.shape(r)
        if ctx.dtype(r) is not None:
            ctx.types[o] = ctx.dtype(r)


@translator("If")
def _if(ctx: ImportContext, node: Node) -> None:
    outs = list(node.outputs)
    if not all(outs):
        raise Unsupported("an If with unnamed outputs")
    cond = ctx.values.get(node.input(0))
    if cond is not None and cond.size == 1 and len(node.attr("then_branch").output) == len(outs):
        _inline_branch(ctx, node, "then_branch" if bool(cond.reshape(-1)[0]) else "else_branch")
        return
    nets = []
    for label in ("then_branch", "else_branch"):
        g = node.attr(label)
        results = [o.name for o in g.output]
        if len(results) != len(outs):
            raise Unsupported(f"{label} has {len(results)} outputs, the If {len(outs)}")
        copies = [_op("ONNXCopyValue", [r], [o]) for r, o in zip(results, outs) if r != o]
        nets.append(subnet(ctx, g, f"If {label}", [], [], postlude=copies))
    ctx.op("If", [node.input(0)], outs, then_net=nets[0], else_net=nets[1])


def _scan_rows(ctx: ImportContext, scan_outs: Sequence[str]) -> tuple[list[OperatorDef], list[str]]:
    """ExpandDims ops making each per-iteration scan value a row of one, and the rows' names: ONNXWhile
    concatenates scan values along dim 0 (Caffe2), ONNX stacks them on a new first axis."""
    rows = [ctx.fresh("scan_row") for _ in scan_outs]
    return [_op("ExpandDims", [v], [r], dims=[0]) for v, r in zip(scan_outs, rows)], rows


@translator("Loop")
def _loop(ctx: ImportContext, node: Node) -> None:
    body = node.attr("body")
    trip, cond = node.input(0), node.input(1)
    n_lcd = len(node.inputs) - 2
    if len(body.input) != 2 + n_lcd or len(body.output) < 1 + n_lcd:
        raise Unsupported("body inputs/outputs do not match the Loop's")
    if trip and ctx.dtype(trip) not in (None, np.dtype(np.int64)):
        raise Unsupported(f"trip count of type {ctx.dtype(trip)}")
    ext_in = [i.name for i in body.input]
    ext_out = [o.name for o in body.output]
    rows, row_names = _scan_rows(ctx, ext_out[1 + n_lcd :])
    net = subnet(ctx, body, "Loop body", ext_in, ext_out[: 1 + n_lcd] + row_names, postlude=rows)
    ins = [trip or _const(ctx, np.zeros(1, np.int64), "loop_no_trip"),
           cond or _const(ctx, np.ones(1, bool), "loop_no_cond")] + list(node.inputs[2:])  # fmt: skip
    if not all(ins[2:]):
        raise Unsupported("an absent loop-carried input")
    outs = _outputs(ctx, node, len(ext_out) - 1)
    ctx.op("ONNXWhile", ins, outs, body=net, has_trip_count=int(bool(trip)), has_cond=int(bool(cond)),
           disable_scopes=1, num_loop_carried_deps=n_lcd)  # fmt: skip


def _bind(ctx: ImportContext, name: str, shape: tuple | None, dtype: Any) -> None:
    """Give a subgraph input the shape/type onnx's inference left unknown."""
    if shape is not None and ctx.shapes.get(name) is None:
        ctx.shapes[name] = tuple(shape)
    if dtype is not None and name not in ctx.types:
        ctx.types[name] = dtype


def _infer_body(ctx: ImportContext, graph: Any) -> None:
    """onnx's shape inference over a Scan body whose inputs (and the outer names it reads) now have
    known shapes: fills the body's unknown value shapes and types (Scan states keep their shapes)."""
    import onnx
    from onnx import helper, numpy_helper

    from framework.onnx.shape_bound import infer_shapes

    g = onnx.GraphProto()
    g.CopyFrom(graph)
    produced = {o for n in graph.node for o in n.output} | {i.name for i in graph.input}
    produced |= {t.name for t in graph.initializer}
    outer = sorted({i for n in graph.node for i in n.input if i and i not in produced})
    del g.input[:]
    for name in [i.name for i in graph.input] + outer:
        shape, dt = ctx.shape(name), ctx.dtype(name)
        if name in outer and name in ctx.values and ctx.values[name].size <= 4096:
            g.initializer.append(numpy_helper.from_array(ctx.values[name], name))
            continue
        try:
            elem = helper.np_dtype_to_tensor_dtype(dt) if dt is not None else 0
        except Exception:
            elem = 0
        g.input.append(helper.make_tensor_value_info(name, elem, list(shape) if shape is not None else None))
    opsets = [helper.make_opsetid("" if d == "ai.onnx" else d, v) for d, v in getattr(ctx, "opset_imports", {}).items()]
    try:
        inferred = infer_shapes(helper.make_model(g, opset_imports=opsets))
    except Exception:
        return
    for vi in list(inferred.graph.value_info) + list(inferred.graph.output):
        tt = vi.type.tensor_type if vi.type.HasField("tensor_type") else None
        if tt is None or not tt.elem_type:
            continue
        if tt.HasField("shape") and all(d.HasField("dim_value") for d in tt.shape.dim):
            shape = tuple(int(d.dim_value) for d in tt.shape.dim)
            try:
                dt = np.dtype(helper.tensor_dtype_to_np_dtype(tt.elem_type))
            except Exception:
                dt = None
            _bind(ctx, vi.name, shape, dt)


def _gather(data: str, idx: str, out: str, axis: int) -> OperatorDef:
    return _op("Gather", [data, idx], [out], axis=axis)


@translator("Scan", opsets=(8, 10_000))
def _scan_any(ctx: ImportContext, node: Node) -> None:
    (_scan8 if ctx.opset < 9 else _scan)(ctx, node)


def _scan(ctx: ImportContext, node: Node) -> None:
    body = node.attr("body")
    m = int(node.attr("num_scan_inputs"))
    n = len(node.inputs) - m
    k = len(body.output) - n
    if n < 0 or k < 0 or len(body.input) != n + m or not all(node.inputs):
        raise Unsupported("Scan inputs/outputs do not match its body")
    in_axes = list(node.attr("scan_input_axes") or [0] * m)
    in_dirs = list(node.attr("scan_input_directions") or [0] * m)
    out_axes = list(node.attr("scan_output_axes") or [0] * k)
    out_dirs = list(node.attr("scan_output_directions") or [0] * k)
    lengths = set()
    for j, s in enumerate(node.inputs[n:]):
        shape = ctx.shape(s)
        if shape is None:
            raise NeedsRuntime(f"scan input '{s}' of unknown shape")
        in_axes[j] %= len(shape)
        lengths.add(shape[in_axes[j]])
    if len(lengths) != 1 or 0 in lengths:
        raise Unsupported(f"scan lengths {sorted(lengths)} (must be one positive length)")
    length = lengths.pop()
    for i in range(n):  # states keep their shapes and types across iterations; elements lose the axis
        _bind(ctx, body.input[i].name, ctx.shape(node.inputs[i]), ctx.dtype(node.inputs[i]))
    for j, s in enumerate(node.inputs[n:]):
        shape = ctx.shape(s)
        _bind(ctx, body.input[n + j].name, shape[: in_axes[j]] + shape[in_axes[j] + 1 :], ctx.dtype(s))
    _infer_body(ctx, body)
    rev = _const(ctx, np.arange(length - 1, -1, -1, dtype=np.int64), "scan_reversed")
    it, cond = ctx.fresh("scan_iter"), ctx.fresh("scan_cond")
    prelude = []
    for j, s in enumerate(node.inputs[n:]):
        idx = it
        if in_dirs[j]:
            idx = ctx.fresh("scan_rev_iter")
            prelude.append(_gather(rev, it, idx, 0))
        prelude.append(_gather(s, idx, body.input[n + j].name, in_axes[j]))
    ext_in = [it, cond] + [i.name for i in body.input[:n]]
    ext_out = [cond] + [o.name for o in body.output]
    rows, row_names = _scan_rows(ctx, ext_out[1 + n :])
    net = subnet(ctx, body, "Scan body", ext_in, ext_out[: 1 + n] + row_names, prelude=prelude, postlude=rows)
    outs = _outputs(ctx, node, n + k)
    stacked = [ctx.fresh("scan_stacked") if out_dirs[i] or out_axes[i] else outs[n + i] for i in range(k)]
    trip = _const(ctx, np.array([length], np.int64), "scan_length")
    ctx.op("ONNXWhile", [trip, _const(ctx, np.ones(1, bool), "scan_true")] + list(node.inputs[:n]),
           outs[:n] + stacked, body=net, has_trip_count=1, has_cond=0, disable_scopes=1,
           num_loop_carried_deps=n)  # fmt: skip
    for i in range(k):
        cur = stacked[i]
        if out_dirs[i]:
            nxt = outs[n + i] if not out_axes[i] else ctx.fresh("scan_flipped")
            ctx.op("Gather", [cur, rev], [nxt], axis=0)
            cur = nxt
        if out_axes[i]:
            shape = ctx.shape(body.output[n + i].name)
            if shape is None:
                raise Unsupported(f"scan_output_axes with a body output of unknown rank ('{body.output[n + i].name}')")
            r = len(shape) + 1
            a = out_axes[i] % r
            perm = list(range(1, a + 1)) + [0] + list(range(a + 1, r))
            ctx.op("Transpose", [cur], [outs[n + i]], axes=perm)


@translator("SequenceMap", opsets=(17, 10_000))
def _sequence_map(ctx: ImportContext, node: Node) -> None:
    from onnx import helper

    body = node.attr("body")
    ins, outs = list(node.inputs), list(node.outputs)
    if len(body.input) != len(ins) or len(body.output) != len(outs) or not all(ins):
        raise Unsupported("SequenceMap inputs/outputs do not match its body")
    trip = ctx.fresh("seqmap_length")
    ctx.op("ONNXSequenceLength", [ins[0]], [trip])
    it, cond = ctx.fresh("seqmap_iter"), ctx.fresh("seqmap_cond")
    prelude = []
    for name, vi in zip(ins, body.input):
        if name in ctx.types or name in ctx.values:  # a tensor: the same value for every element
            if name != vi.name:
                prelude.append(_op("ONNXCopyValue", [name], [vi.name]))
        else:
            prelude.append(_op("ONNXSequenceAt", [name, it], [vi.name]))
    inits, acc_in, acc_out, postlude = [], [], [], []
    for o in body.output:
        dt = ctx.dtype(o.name)
        if dt is None:
            raise Unsupported(f"body output '{o.name}' of unknown type")
        init = ctx.fresh("seqmap_empty")
        ctx.op("ONNXSequenceEmpty", [], [init], dtype=int(helper.np_dtype_to_tensor_dtype(dt)))
        a_in, a_out = ctx.fresh("seqmap_acc"), ctx.fresh("seqmap_acc_next")
        postlude.append(_op("ONNXSequenceInsert", [a_in, o.name], [a_out]))
        inits.append(init)
        acc_in.append(a_in)
        acc_out.append(a_out)
    net = subnet(ctx, body, "SequenceMap body", [it, cond] + acc_in, [cond] + acc_out, prelude, postlude)
    ctx.op("ONNXWhile", [trip, _const(ctx, np.ones(1, bool), "seqmap_true")] + inits, outs, body=net,
           has_trip_count=1, has_cond=0, disable_scopes=1, num_loop_carried_deps=len(outs))  # fmt: skip


def _scan8(ctx: ImportContext, node: Node) -> None:
    """Opset 8's Scan (a batch axis first, the scan axis second): without sequence_lens, one opset-9
    Scan per batch element (the batch size must be known), results stacked on the batch axis."""
    from onnx import helper

    if node.input(0):
        raise Unsupported("sequence_lens (opset 8)")
    ins = list(node.inputs[1:])
    m = int(node.attr("num_scan_inputs"))
    shapes = [ctx.shape(i) for i in ins]
    if not ins or any(s is None or not s for s in shapes) or len({s[0] for s in shapes}) != 1:
        raise NeedsRuntime("inputs of unknown shapes or batch sizes")
    batch = shapes[0][0]
    if batch == 0:
        raise Unsupported("an empty batch")
    per_out: list[list[str]] = [[] for _ in node.outputs]
    for b in range(batch):
        idx = _const(ctx, np.array(b, np.int64), "scan8_batch")
        rows = []
        for name, shape in zip(ins, shapes):
            row = ctx.fresh("scan8_row")
            ctx.op("Gather", [name, idx], [row], axis=0)
            _bind(ctx, row, shape[1:], ctx.dtype(name))
            rows.append(row)
        outs = [ctx.fresh("scan8_out") for _ in node.outputs]
        proto = helper.make_node("Scan", rows, outs, body=node.attr("body"), num_scan_inputs=m,
                                 scan_input_directions=list(node.attr("directions") or [0] * m))  # fmt: skip
        _scan(ctx, Node(proto))
        for k, o in enumerate(outs):
            one = ctx.fresh("scan8_one")
            ctx.op("ExpandDims", [o], [one], dims=[0])
            per_out[k].append(one)
    for k, out in enumerate(node.outputs):
        if out:
            ctx.op("Concat", per_out[k], [out, ctx.fresh("scan8_split")], axis=0)
