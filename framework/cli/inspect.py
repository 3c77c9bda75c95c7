"""``framework inspect``: what a NetDef or a checkpoint holds."""

from __future__ import annotations

import argparse
import os

from framework.cli.common import CLIError, parse_shapes, read_net


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("inspect", help="describe a NetDef or a checkpoint", description=__doc__)
    p.add_argument(
        "file",
        help="a NetDef or PlanDef (.pbtxt/.pb), an .onnx file, a model or pair folder, a checkpoint or a data "
        "DB (any DB kind)",
    )
    p.add_argument("--init", help="init net giving parameter shapes (for nets)")
    p.add_argument("--checkpoint", help="checkpoint giving parameter shapes (for nets)")
    p.add_argument(
        "--shape",
        action="append",
        default=[],
        metavar="NAME=D1,D2,...[:DTYPE]",
        help="known input shape for shape inference (repeatable; NAME= is a scalar)",
    )
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from framework.cli.sources import is_model_path

    if not os.path.exists(args.file):
        raise CLIError(f"file not found: {args.file}")
    if not is_model_path(args.file) and _looks_like_checkpoint(args.file):
        from framework.cli.db_tools import inspect_db

        return inspect_db(args.file)
    return inspect_net(args)


def _looks_like_checkpoint(path: str) -> bool:
    from framework.cli.db_tools import is_db

    if os.path.isdir(path) or is_db(path):
        return True
    ext = os.path.splitext(path)[1].lower()
    if ext in (".pbtxt", ".pb", ".prototxt", ".txt"):
        return False
    try:  # unknown extension: a well-formed minidb says so
        from framework.checkpoint import list_checkpoint

        list_checkpoint(path)
        return True
    except Exception:
        return False


def inspect_checkpoint(path: str) -> int:
    from framework.checkpoint import list_checkpoint

    rows = list_checkpoint(path)
    print(f"checkpoint {path}: {len(rows)} blobs")
    print(f"  {'name':<32} {'dtype':<10} {'shape':<20} {'bytes':>12}")
    total = 0
    for r in rows:
        print(f"  {r['name']:<32} {r['dtype']:<10} {str(list(r['shape'])):<20} {r['bytes']:>12,}")
        total += r["bytes"]
    print(f"  total {total:,} bytes")
    from framework.cli.db_tools import integrity_line
    from framework.db import detect_db_type

    print(integrity_line(detect_db_type(path)))
    return 0


def analyze(args: argparse.Namespace, path: str) -> tuple:
    """(source, known input specs, inferred specs, parameter names) for the model at ``path`` (any model
    path: framework/cli/sources.py), validated and dry-run as ``inspect`` does; the path's own init net,
    --init, --checkpoint and --shape give the known shapes. A --shape name the nets do not read is an error."""
    from framework.cli.sources import open_source
    from framework.net.inference import infer_net, infer_nets
    from framework.ops.schema import TensorSpec

    src = open_source(path)
    nets = src.nets()
    reads = [b for n in nets for b in (*n.external_input, *(i for op in n.op for i in op.input))]
    given = parse_shapes(args.shape, known=reads)
    known: dict[str, TensorSpec] = {}
    init = read_net(args.init) if args.init else src.init
    if init is not None:
        validate_net(init)
        known.update(infer_net(init, {}))
    if getattr(args, "checkpoint", None):
        known.update(checkpoint_specs(args.checkpoint))
    for n in nets:
        validate_net(n, has_blob=lambda b: b in known or b in given)
    params = [p for n in nets for p in parameters(n, known if (init is not None or args.checkpoint) else None)]
    for name, (shape, dtype) in given.items():
        known[name] = TensorSpec(shape, dtype or known.get(name, TensorSpec(None, None)).dtype or _f32())
    shapes = infer_nets(nets, known)
    if src.plan is None:
        dry_run(src.net, known)
    return src, known, shapes, list(dict.fromkeys(params))


def inspect_net(args: argparse.Namespace) -> int:
    src, known, shapes, params = analyze(args, args.file)
    if src.plan is not None:
        steps = len(src.plan.execution_step)
        print(f"plan '{src.plan.name}': {len(src.plan.network)} nets, {steps} execution steps")
    for net in src.nets():
        print(f"net '{net.name}' type {net.type or 'simple'}: {len(net.op)} ops")
        print(f"external inputs:  {', '.join(net.external_input) or '(none)'}")
        print(f"external outputs: {', '.join(net.external_output) or '(none)'}")
        print(f"  {'#':>3} {'type':<22} {'inputs':<36} outputs")
        for i, op in enumerate(net.op):
            outs = ", ".join(f"{o}{_shape(shapes.get(o))}" for o in op.output)
            print(f"  {i:>3} {op.type:<22} {', '.join(op.input):<36} {outs}")
    count, unknown = 0, []
    for p in params:
        n = numel(shapes.get(p) or known.get(p))
        if n is None:
            unknown.append(p)
        else:
            count += n
    note = f" ({len(unknown)} of unknown shape: pass --init)" if unknown else ""
    print(f"parameters: {count:,} in {len(params) - len(unknown)} blobs{note}")
    return 0


def validate_net(net, has_blob=None) -> None:
    """Check ``net`` as CreateNet does (known ops, arity, arguments, defined blobs, no cycle); raise the
    same errors. Blobs are assumed to exist only if they are external inputs or ``has_blob`` says so.

    Stricter than CreateNet where a file is most likely wrong: an argument the op does not know (CreateNet
    and Caffe2 ignore it with a warning; a misspelt ``kernal`` silently runs with the default) and, in a
    ``dag`` net, a blob written by two ops with nothing reading it in between (the first write is lost and
    only the declared order keeps the two apart) are ArgumentError and NetError here.
    """
    from framework.errors import ArgumentError
    from framework.net.graph import compile_graph
    from framework.ops.arguments import IGNORED_ARGS, parse_args
    from framework.ops.operator import describe_op
    from framework.ops.registry import get_schema

    compile_graph(net, has_blob)
    for i, op in enumerate(net.op):
        where = f"net '{net.name}': {describe_op(op, i)}"
        parsed = parse_args(get_schema(op.type), op.arg, where, len(op.input), len(op.output))
        unknown = [a for a in parsed.extra if a not in IGNORED_ARGS]
        if unknown:
            from framework.memory.workspace import suggest

            known = list(get_schema(op.type).args)
            raise ArgumentError(
                f"{where}: unknown argument '{unknown[0]}'.{suggest(unknown[0], known)} The op takes: "
                f"{', '.join(known) or 'no arguments'} (running the net ignores it with a warning)"
            )
    if net.type in ("dag", "async_dag", "prof_dag", "async_scheduling"):
        _check_dead_writes(net)


def _check_dead_writes(net) -> None:
    """NetError for a blob that one op writes and a later op overwrites without reading it, with no op
    reading it in between (in a ``dag`` net the two writers look independent)."""
    from framework.errors import NetError
    from framework.ops.operator import describe_op

    last_writer: dict[str, int] = {}
    for i, op in enumerate(net.op):
        for b in op.input:
            last_writer.pop(b, None)
        for b in op.output:
            if b in last_writer and b not in op.input:
                j = last_writer[b]
                raise NetError(
                    f"net '{net.name}' ({net.type}): {describe_op(net.op[j], j)} and {describe_op(op, i)} both "
                    f"write '{b}' and no op reads it in between: the first write is lost",
                )
            last_writer[b] = i


def checkpoint_specs(path: str) -> dict:
    """Shapes and dtypes of a checkpoint's tensors, read from record headers (no data loaded)."""
    import numpy as np

    from framework.checkpoint import list_checkpoint
    from framework.ops.schema import TensorSpec

    if not os.path.exists(path):
        raise CLIError(f"checkpoint not found: {path}")
    out = {}
    for r in list_checkpoint(path):
        try:
            out[r["name"]] = TensorSpec(tuple(r["shape"]), np.dtype(r["dtype"]))
        except TypeError:
            continue
    return out


def parameters(net, known: dict | None) -> list[str]:
    """The net's parameters: external inputs (known ones, when shapes were given; else all but the data
    input) that some op other than an optimizer update reads (momenta, learning rates are not)."""
    from framework.ops.registry import get_schema, has_op

    state_only = {"optimizer", "training"}
    read_by_model = {
        b for op in net.op if has_op(op.type) and get_schema(op.type).category not in state_only for b in op.input
    }
    cands = [b for b in net.external_input if b in known] if known is not None else list(net.external_input[1:])
    trained = {o[: -len("_grad")] for op in net.op for o in op.output if o.endswith("_grad")}
    if trained:  # a training net: the parameters are what it computes gradients for
        cands = [b for b in cands if b in trained]
    return [b for b in cands if b in read_by_model]


def dry_run(net, known: dict) -> None:
    """Run ``net`` once on zeros of the known input shapes, so shape mismatches that inference cannot
    see fail here as they would in ``run`` (only when the shape of every external input, and of every
    undeclared blob it reads that ``known`` holds, is known)."""
    import numpy as np

    from framework.memory.workspace import Workspace

    written = {o for op in net.op for o in op.output}
    reads = [b for op in net.op for b in op.input if b in known and b not in written]
    inputs = list(dict.fromkeys([*net.external_input, *reads]))
    specs = [known.get(b) for b in inputs]
    if not inputs or any(s is None or s.shape is None or None in s.shape for s in specs):
        return
    ws = Workspace(name="inspect")
    for b, spec in zip(inputs, specs):
        ws.feed_blob(b, np.zeros(spec.shape, spec.dtype or np.float32))
    ws.run_net_once(net)


def numel(spec) -> int | None:
    """Elements of a fully known spec, else None."""
    if spec is None or spec.shape is None or None in spec.shape:
        return None
    n = 1
    for d in spec.shape:
        n *= d
    return n


def _shape(spec) -> str:
    if spec is None or spec.shape is None:
        return ""
    return " [" + ",".join("?" if d is None else str(d) for d in spec.shape) + "]"


def _f32():
    import numpy as np

    return np.dtype(np.float32)
