"""``framework inspect``: what a NetDef or a checkpoint holds."""

from __future__ import annotations

import argparse
import os

from framework.cli.common import CLIError, read_net


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("inspect", help="describe a NetDef or a checkpoint", description=__doc__)
    p.add_argument(
        "file",
        help="a NetDef (.pbtxt/.pb), a checkpoint or a data DB (any DB kind)",
    )
    p.add_argument("--init", help="init net giving parameter shapes (for nets)")
    p.add_argument(
        "--shape",
        action="append",
        default=[],
        metavar="NAME=D1,D2,...",
        help="known input shape for shape inference (repeatable)",
    )
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    if not os.path.exists(args.file):
        raise CLIError(f"file not found: {args.file}")
    if _looks_like_checkpoint(args.file):
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
    return 0


def inspect_net(args: argparse.Namespace) -> int:
    from framework.net.inference import infer_net
    from framework.ops.schema import TensorSpec

    net = read_net(args.file)
    known: dict[str, TensorSpec] = {}
    params: list[str] = []
    if args.init:
        init = read_net(args.init)
        known.update(infer_net(init, {}))
        params = [b for b in net.external_input if b in known]
    else:
        params = list(net.external_input[1:])
    for spec in args.shape:
        name, _, dims = spec.partition("=")
        try:
            shape = tuple(int(d) for d in dims.split(",") if d.strip())
        except ValueError as e:
            raise CLIError(f"--shape {spec}: dimensions must be integers", "write it as NAME=64,1,8,8") from e
        known[name] = TensorSpec(shape, known.get(name, TensorSpec(None, None)).dtype or _f32())
    shapes = infer_net(net, known)

    print(f"net '{net.name}' type {net.type or 'simple'}: {len(net.op)} ops")
    print(f"external inputs:  {', '.join(net.external_input) or '(none)'}")
    print(f"external outputs: {', '.join(net.external_output) or '(none)'}")
    print(f"  {'#':>3} {'type':<22} {'inputs':<36} outputs")
    for i, op in enumerate(net.op):
        outs = ", ".join(f"{o}{_shape(shapes.get(o))}" for o in op.output)
        print(f"  {i:>3} {op.type:<22} {', '.join(op.input):<36} {outs}")
    count, unknown = 0, []
    for p in params:
        spec = shapes.get(p) or known.get(p)
        if spec is not None and spec.known:
            n = 1
            for d in spec.shape:
                n *= d
            count += n
        else:
            unknown.append(p)
    note = f" ({len(unknown)} of unknown shape: pass --init)" if unknown else ""
    print(f"parameters: {count:,} in {len(params) - len(unknown)} blobs{note}")
    return 0


def _shape(spec) -> str:
    if spec is None or spec.shape is None:
        return ""
    return " [" + ",".join("?" if d is None else str(d) for d in spec.shape) + "]"


def _f32():
    import numpy as np

    return np.dtype(np.float32)
