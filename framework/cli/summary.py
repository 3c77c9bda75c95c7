"""``framework summary NET [--init INIT | --checkpoint DB] [--shape NAME=D1,D2]``: a layer table.

One row per op: output shape, the parameters it reads (elements) and its FLOPs from the op schema's
cost function, then totals, like the model summaries PyTorch users know. Shapes come from shape
inference over the given input shapes; a row whose shapes are unknown shows "?".
"""

from __future__ import annotations

import argparse

from framework.cli.common import MODEL_PATH_HELP
from framework.cli.inspect import analyze, numel


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("summary", help="per-layer output shapes, parameters and FLOPs", description=__doc__)
    p.add_argument("net", help=MODEL_PATH_HELP)
    p.add_argument("--init", help="init net giving parameter shapes")
    p.add_argument("--checkpoint", help="checkpoint giving parameter shapes")
    p.add_argument("--shape", action="append", default=[], metavar="NAME=D1,D2,...[:DTYPE]", help="an input's shape")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from framework.ops.arguments import parse_args
    from framework.ops.operator import describe_op
    from framework.ops.registry import get_schema
    from framework.ops.schema import UNKNOWN

    src, known, shapes, params = analyze(args, args.net)
    param_set = set(params)
    rows, total_params, total_flops, unknown_flops = [], 0, 0.0, 0
    seen_params: set[str] = set()
    nets = src.nets()
    for i, op, where in ((i, op, f"{n.name}:" if len(nets) > 1 else "") for n in nets for i, op in enumerate(n.op)):
        schema = get_schema(op.type)
        ins = [shapes.get(b) or known.get(b) or UNKNOWN for b in op.input]
        outs = [shapes.get(b) or UNKNOWN for b in op.output]
        own = [b for b in op.input if b in param_set and b not in seen_params]
        seen_params.update(own)
        n_params = sum(numel(shapes.get(b) or known.get(b)) or 0 for b in own)
        flops = None
        if schema.cost is not None and all(s.shape is not None for s in ins + outs):
            args_ = parse_args(schema, op.arg, describe_op(op, i), len(op.input), len(op.output))
            try:
                flops = float(schema.cost(args_, ins, outs).flops)
            except (TypeError, ValueError, IndexError):
                flops = None
        if flops is None:
            unknown_flops += 1
        else:
            total_flops += flops
        total_params += n_params
        shape = ", ".join("?" if s.shape is None else "[" + ",".join(map(str, s.shape)) + "]" for s in outs)
        rows.append(
            (
                f"{where}{i} {op.type}",
                ", ".join(op.output),
                shape,
                f"{n_params:,}" if own else "",
                "?" if flops is None else _flops(flops),
            )
        )
    head = ("op", "output", "shape", "params", "FLOPs")
    widths = [max(len(h), *(len(r[k]) for r in rows)) if rows else len(h) for k, h in enumerate(head)]
    line = "  ".join(f"{{:<{w}}}" for w in widths)
    print(line.format(*head))
    print("  ".join("-" * w for w in widths))
    for r in rows:
        print(line.format(*r))
    note = f" ({unknown_flops} ops without a cost function or known shapes)" if unknown_flops else ""
    print(f"total: {total_params:,} parameters, {_flops(total_flops)} FLOPs{note}")
    return 0


def _flops(f: float) -> str:
    for unit, scale in (("G", 1e9), ("M", 1e6), ("K", 1e3)):
        if f >= scale:
            return f"{f / scale:.2f}{unit}"
    return f"{f:.0f}"
