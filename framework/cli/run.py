"""``framework run``: run a net on numpy inputs and print or save its outputs."""

from __future__ import annotations

import argparse

import numpy as np

from framework.cli.common import CLIError, load_checkpoint, new_workspace, parse_inputs, read_net, summarize


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("run", help="run a net on .npy inputs", description=__doc__)
    p.add_argument("net", help="NetDef file (.pbtxt text or .pb binary)")
    p.add_argument("--init", help="init net to run once first (creates parameters)")
    p.add_argument("--checkpoint", help="checkpoint DB to load parameters from (minidb file or lmdb folder)")
    p.add_argument("--input", action="append", default=[], metavar="NAME=FILE.npy", help="feed a blob (repeatable)")
    p.add_argument(
        "--output", action="append", default=[], metavar="NAME", help="blob to print (default: external outputs)"
    )
    p.add_argument("--save", metavar="OUT.npz", help="save the outputs to a .npz file")
    p.add_argument("--iters", type=int, default=1, help="run the net N times (default 1)")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    net_def = read_net(args.net)
    ws = new_workspace()
    if args.init:
        ws.run_net_once(read_net(args.init))
    if args.checkpoint:
        load_checkpoint(ws, args.checkpoint)
    for name, value in parse_inputs(args.input, list(net_def.external_input)).items():
        ws.feed_blob(name, value)
    if args.iters < 1:
        raise CLIError(f"--iters must be at least 1, got {args.iters}")
    net = ws.create_net(net_def)
    for _ in range(args.iters):
        net.run()
    names = args.output or list(net_def.external_output) or (list(net_def.op[-1].output) if net_def.op else [])
    outputs = {}
    for name in names:
        if not ws.has_blob(name):
            raise CLIError(f"net '{net_def.name}' has no blob '{name}'", "list blobs with `framework inspect NET`")
        outputs[name] = ws.fetch_blob(name)
        print(summarize(name, outputs[name]))
    if args.save:
        arrays = {k: v for k, v in outputs.items() if isinstance(v, np.ndarray) and v.dtype != object}
        np.savez(args.save, **arrays)
        print(f"saved {len(arrays)} arrays to {args.save}")
    return 0
