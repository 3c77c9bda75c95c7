"""``framework draw``: the op/blob graph of a net as DOT, SVG or PNG (graphviz)."""

from __future__ import annotations

import argparse
import os

from framework.caffe2.python.net_drawer import render, to_dot
from framework.cli.common import MODEL_PATH_HELP, CLIError
from framework.cli.sources import open_source


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("draw", help="draw a net's graph (dot, svg, png)", description=__doc__)
    p.add_argument("net", help=MODEL_PATH_HELP)
    p.add_argument("-o", "--output", required=True, help="output file: .dot always works; .svg/.png/.pdf need graphviz")
    p.add_argument("--rankdir", default="TB", choices=["TB", "LR", "BT", "RL"], help="layout direction")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    src = open_source(args.net)
    net = src.net
    if src.plan is not None:  # one graph: every network's ops, in the plan's order
        from framework.proto.framework_pb2 import NetDef

        net = NetDef(name=src.plan.name)
        for n in src.plan.network:
            net.op.extend(n.op)
    dot = to_dot(net, rankdir=args.rankdir)
    ext = os.path.splitext(args.output)[1].lower().lstrip(".")
    if ext in ("dot", "gv"):
        with open(args.output, "w") as f:
            f.write(dot)
    elif ext in ("svg", "png", "pdf"):
        render(dot, args.output, ext)
    else:
        raise CLIError(f"unknown output format '.{ext}' for {args.output}", "use .dot, .svg, .png or .pdf")
    print(f"wrote {args.output}")
    return 0
